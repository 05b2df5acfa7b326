"""Certificates for one sandbox cluster: a CA, the API server's serving cert, an admin client cert,
and a second serving cert that names only SNI_NAME, signed by a CA of its own.

ECDSA P-256 keeps generation instant; every file lands in the cluster's state folder, and the
kubeconfigs embed the data inline (the fleet refuses kubeconfigs that point at files).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)

#: The name each sandbox API server also answers to, with a serving certificate that names it
#: alone (kube-apiserver's --tls-sni-cert-key), signed by a CA of its own (`sni_ca_crt`). A
#: kubeconfig that trusts only that CA reaches the cluster only when it says `tls-server-name:
#: SNI_NAME` and the client honors it (sends it as SNI, checks the certificate against it), as
#: kubectl does; a client that dials 127.0.0.1 without it gets the usual certificate, which that
#: CA did not sign.
SNI_NAME: Final = "apiserver.fleet.test"


@dataclasses.dataclass(frozen=True)
class ClusterPki:
    """Paths of one cluster's key material."""

    root: Path

    ca_crt = property(lambda self: self.root / "ca.crt")
    ca_key = property(lambda self: self.root / "ca.key")
    serving_crt = property(lambda self: self.root / "apiserver.crt")
    serving_key = property(lambda self: self.root / "apiserver.key")
    admin_crt = property(lambda self: self.root / "admin.crt")
    admin_key = property(lambda self: self.root / "admin.key")
    sa_key = property(lambda self: self.root / "sa.key")
    sa_pub = property(lambda self: self.root / "sa.pub")
    webhook_crt = property(lambda self: self.root / "webhook" / "tls.crt")
    webhook_key = property(lambda self: self.root / "webhook" / "tls.key")
    sni_ca_crt = property(lambda self: self.root / "sni" / "ca.crt")
    sni_crt = property(lambda self: self.root / "sni" / "tls.crt")
    sni_key = property(lambda self: self.root / "sni" / "tls.key")


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    *,
    server_names: tuple[str, ...] = (),
    client: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usage = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if server_names:
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _ca(subject: x509.Name) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ca_key, ca_cert


def _create_sni_pki(pki: ClusterPki, cluster: str) -> None:
    """The SNI_NAME serving certificate and its own CA (whose key is not kept), once."""
    if pki.sni_key.is_file():
        return
    ca_key, ca_cert = _ca(_name(f"fleet-sandbox-{cluster}-sni-ca"))
    key, cert = _issue(ca_key, ca_cert, _name(SNI_NAME), server_names=(SNI_NAME,))
    _write(pki.sni_ca_crt, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(pki.sni_crt, cert.public_bytes(serialization.Encoding.PEM))
    _write(pki.sni_key, _pem_key(key))


def create_cluster_pki(root: Path, cluster: str) -> ClusterPki:
    """Generate every certificate a sandbox cluster needs (idempotent: keeps existing files)."""
    pki = ClusterPki(root)
    _create_sni_pki(pki, cluster)
    if pki.admin_crt.is_file() and pki.webhook_key.is_file():
        return pki
    ca_key, ca_cert = _ca(_name(f"fleet-sandbox-{cluster}-ca"))
    _write(pki.ca_key, _pem_key(ca_key))
    _write(pki.ca_crt, ca_cert.public_bytes(serialization.Encoding.PEM))
    names = ("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    key, cert = _issue(ca_key, ca_cert, _name("kube-apiserver"), server_names=names)
    _write(pki.serving_key, _pem_key(key))
    _write(pki.serving_crt, cert.public_bytes(serialization.Encoding.PEM))
    key, cert = _issue(ca_key, ca_cert, _name("fleet-sandbox-admin", "system:masters"), client=True)
    _write(pki.admin_key, _pem_key(key))
    _write(pki.admin_crt, cert.public_bytes(serialization.Encoding.PEM))
    sa = _key()
    _write(pki.sa_key, _pem_key(sa))
    _write(
        pki.sa_pub,
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    # The training operator serves its webhook with these; nothing calls it (see components).
    key, cert = _issue(
        ca_key,
        ca_cert,
        _name("training-operator"),
        server_names=("training-operator.kubeflow.svc", "127.0.0.1"),
    )
    _write(pki.webhook_key, _pem_key(key))
    _write(pki.webhook_crt, cert.public_bytes(serialization.Encoding.PEM))
    return pki


def tls_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """Verify the server against `ca`, and present a client certificate if given one."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert and key:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx
