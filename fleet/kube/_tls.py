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
from typing import Any

__all__ = ["ServerNameContext", "client_ssl_context", "load_client_certificate", "memfd_available"]


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


class ServerNameContext(ssl.SSLContext):
    """An SSLContext whose connections name `server_name` (SNI, and the name the certificate
    must carry) whatever host the client dialled."""

    server_name: str

    def wrap_socket(
        self,
        sock: Any,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: Any = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            server_hostname=self.server_name,
            session=session,
        )

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: Any = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(
            incoming, outgoing, server_side, server_hostname=self.server_name, session=session
        )


def client_ssl_context(
    *, ca: bytes | None = None, insecure: bool = False, server_name: str | None = None
) -> ssl.SSLContext:
    """Verify the server against `ca` (PEM; the system's CAs when None), or not at all when
    `insecure`; under the name `server_name` (the kubeconfig's tls-server-name) rather than the
    URL's host, when given. Raises ssl.SSLError (or ValueError) for a CA OpenSSL refuses."""
    context = ssl.create_default_context(cadata=ca.decode("ascii") if ca else None)
    if server_name:
        # create_default_context's settings, on the subclass that names the server.
        named = ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
        named.server_name = server_name
        named.verify_flags = context.verify_flags
        named.options = context.options
        named.minimum_version = context.minimum_version
        if ca:
            named.load_verify_locations(cadata=ca.decode("ascii"))
        else:
            named.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context = named
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
