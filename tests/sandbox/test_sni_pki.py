"""The sandbox's second serving certificate: it names SNI_NAME alone and is signed by a CA of
its own, and the API server is told to serve it to clients that name SNI_NAME, so an e2e test
can join a member that is reached only through tls-server-name (e2e/test_join.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from fleet.sandbox import components
from fleet.sandbox.components import ClusterLayout, kube_apiserver
from fleet.sandbox.pki import SNI_NAME, create_cluster_pki
from fleet.sandbox.toolchain import Toolchain


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_sni_certificate_names_only_sni_name_and_has_a_ca_of_its_own(tmp_path: Path) -> None:
    pki = create_cluster_pki(tmp_path / "pki", "member-1")
    sni, sni_ca, ca = _load(pki.sni_crt), _load(pki.sni_ca_crt), _load(pki.ca_crt)
    names = sni.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(names) == [x509.DNSName(SNI_NAME)]
    sni.verify_directly_issued_by(sni_ca)
    assert sni_ca.subject != ca.subject
    assert not (pki.root / "sni" / "ca.key").exists()  # the SNI CA signs once, then is gone
    # Kept on a second run (an existing sandbox), made when missing (one older than this).
    before = pki.sni_crt.read_bytes()
    assert create_cluster_pki(tmp_path / "pki", "member-1").sni_crt.read_bytes() == before
    pki.sni_key.unlink()
    create_cluster_pki(tmp_path / "pki", "member-1")
    assert pki.sni_key.is_file() and pki.admin_crt.is_file()


def test_the_api_server_serves_it_to_clients_that_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(components, "tls_context", lambda *_pem: True)  # no PKI on disk here
    ports = {name: 30000 + i for i, name in enumerate(components.PORT_NAMES)}
    layout = ClusterLayout("member-1", tmp_path, ports)
    argv = kube_apiserver(Toolchain(tmp_path), layout).argv
    pki = layout.pki
    assert f"--tls-sni-cert-key={pki.sni_crt},{pki.sni_key}:{SNI_NAME}" in argv
