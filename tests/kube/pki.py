"""Throwaway certificates made in memory, for tests that need real PEM that ssl accepts."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pem:
    ca: bytes
    cert: bytes
    key: bytes


def _cert(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: Any, ca: bool
) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pem() -> Pem:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    client_key = ec.generate_private_key(ec.SECP256R1())
    return Pem(
        ca=_cert("test-ca", ca_key, "test-ca", ca_key, ca=True),
        cert=_cert("test-admin", client_key, "test-ca", ca_key, ca=False),
        key=client_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def inline_kubeconfig(pem: Pem, server: str = "https://127.0.0.1:6443") -> dict[str, Any]:
    """One context with every credential inline, as member Secrets and the sandbox write them."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "certificate-authority-data": b64(pem.ca)}}
        ],
        "users": [
            {
                "name": "u",
                "user": {
                    "client-certificate-data": b64(pem.cert),
                    "client-key-data": b64(pem.key),
                },
            }
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


@dataclass(frozen=True)
class Serving:
    """A CA and a serving certificate (with its key) that names `names` and nothing else."""

    ca: bytes
    cert: bytes
    key: bytes


def make_serving(*names: str) -> Serving:
    """A throwaway CA and a server certificate for the DNS `names` only (no IP address, not
    `localhost`): a client that dials 127.0.0.1 verifies it only under one of those names."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Serving(
        ca=_cert("test-ca", ca_key, "test-ca", ca_key, ca=True),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )
