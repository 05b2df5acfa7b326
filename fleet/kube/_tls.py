"""TLS contexts built from PEM bytes in memory: no key material is ever written to disk.

Python's ssl takes a CA as data (`cadata=`) but a client certificate and key only as a file
name (`load_cert_chain`). fleet hands it a Linux memfd instead: an anonymous file that lives in
memory, named `/proc/self/fd/N`, closed (and gone) as soon as OpenSSL has read it. From then on
the key exists only inside the SSLContext, as long as the connection that holds it.

Where memfd_create is unavailable (not Linux, or blocked by a seccomp profile), the fallback is
a NamedTemporaryFile, private to the user, deleted right after loading: the key touches the
temporary folder for the time OpenSSL takes to read it, never longer.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator

__all__ = ["client_ssl_context", "load_client_certificate", "memfd_available"]


def memfd_available() -> bool:
    """Whether this system can keep a file in memory only (Linux memfd_create and /proc)."""
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


@contextlib.contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """A file name OpenSSL can read `data` from, valid inside the `with` block only."""
    fd = -1
    if memfd_available():
        with contextlib.suppress(OSError):
            fd = os.memfd_create("fleet-tls", os.MFD_CLOEXEC)
    if fd < 0:
        with tempfile.NamedTemporaryFile(prefix="fleet-tls-", suffix=".pem") as f:
            f.write(data)
            f.flush()
            yield f.name
        return
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def client_ssl_context(*, ca: bytes | None = None, insecure: bool = False) -> ssl.SSLContext:
    """Verify the server against `ca` (PEM; the system's CAs when None), or not at all when
    `insecure`. Raises ssl.SSLError (or ValueError) for a CA OpenSSL refuses."""
    context = ssl.create_default_context(cadata=ca.decode("ascii") if ca else None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def load_client_certificate(context: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    """Present `certificate` with `key` (PEM) on `context`'s connections. The pair is handed to
    OpenSSL through a memory-only file that is closed as soon as it has been read."""
    pair = certificate.rstrip(b"\n") + b"\n" + key
    with _pem_file(pair) as name:
        context.load_cert_chain(name)
