"""Which `Host` and `Origin` headers the dashboard answers: a defence against DNS rebinding.

The page has no login: whoever reaches it reads the fleet with the credentials of whoever runs
it. A web page a user visits elsewhere cannot read it cross-origin (no CORS headers are sent),
but a DNS-rebinding page can: its own name is made to resolve to 127.0.0.1 (or the pod's
address), so the browser thinks the dashboard is same-origin with it. What gives such a page
away is the `Host` header, which still names the attacker's domain. So a request is answered
only when its `Host` names this dashboard:

- the address it listens on (`--host`), and the loopback names (`localhost`, `127.0.0.1`,
  `[::1]`) when it listens on a loopback address or on every address (a `kubectl port-forward`
  arrives on loopback);
- when it listens on every address (`0.0.0.0`, `::`), any IP literal: a name that can be
  rebound is never an IP literal (the kubelet's probes and in-cluster clients by address);
- the names given with `--allow-host NAME` (the Helm chart gives the Service's DNS names and
  the ingress host).

The `Host` port is not compared: it is the client's view of the port (a port-forward or a
Service maps it), and a rebinding is about the name. An `Origin` header (browsers send one on
cross-origin requests) must be the request's own origin (the same host and port as its `Host`)
or a name given with `--allow-host` (with its port when one was given); anything else, `null`
included, is refused. Refusals are 403 with one line that says what to allow.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: What `--host` takes for "every address".
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _normal(name: str) -> str:
    """A host name as compared: lower case, no brackets, no trailing dot."""
    return name.strip().strip("[]").rstrip(".").lower()


def split_host(value: str) -> tuple[str, int | None] | None:
    """`name[:port]` (an IPv6 address in brackets) -> (name, port or None); None: not a host."""
    if not value or any(ch in value for ch in "/\\@?# "):
        return None
    try:
        parts = urlsplit(f"//{value}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return _normal(parts.hostname), port


@dataclass(frozen=True)
class AllowedHosts:
    """The names a dashboard serves (see the module's docstring)."""

    #: Host names (lower case, IPv6 without brackets) a `Host` header may carry.
    names: frozenset[str]
    #: Whether any IP literal may be the `Host` (listening on every address).
    any_ip: bool = False
    #: Names given with `--allow-host`, each with its port if one was given: the cross-origin
    #: `Origin`s accepted.
    extra: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def serving(cls, bind: str, allow: Iterable[str] = ()) -> AllowedHosts:
        """What a dashboard listening on `bind` serves, plus the `allow` names (NAME[:PORT]).

        Raises ValueError naming an `allow` entry that is not a host name."""
        host = _normal(bind)
        names: set[str] = set()
        any_ip = host in WILDCARDS
        address = _ip(host)
        if any_ip or host in LOOPBACK_NAMES or (address is not None and address.is_loopback):
            names |= LOOPBACK_NAMES
        if not any_ip:
            names.add(host)
        extra: set[tuple[str, int | None]] = set()
        for entry in allow:
            parsed = split_host(entry.strip())
            if parsed is None:
                raise ValueError(f"--allow-host {entry!r}: not a host name (NAME or NAME:PORT)")
            extra.add(parsed)
            names.add(parsed[0])
        return cls(frozenset(names), any_ip, frozenset(extra))

    def allows_host(self, name: str) -> bool:
        return name in self.names or (self.any_ip and _ip(name) is not None)

    def refusal(self, host_header: str | None, origin: str | None) -> str:
        """Why a request with these headers is refused; "" when it is answered."""
        host = split_host(host_header or "")
        if host is None:
            return f"no usable Host header ({host_header!r})"
        if not self.allows_host(host[0]):
            return (
                f"Host {host_header!r} is not a name this dashboard serves "
                f"(allow it with --allow-host {host[0]})"
            )
        if origin is None:
            return ""
        parts = urlsplit(origin)
        try:
            origin_port = parts.port
        except ValueError:
            origin_port = None
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
            return f"Origin {origin!r} is not a web origin this dashboard serves"
        origin_host = (_normal(parts.hostname), origin_port)
        if origin_host == host or origin_host in self.extra or (origin_host[0], None) in self.extra:
            return ""
        return (
            f"Origin {origin!r} is cross-origin "
            f"(allow it with --allow-host {parts.netloc.rpartition('@')[2]})"
        )


def guard(allowed: AllowedHosts) -> Middleware:
    """aiohttp middleware: 403 for a request whose Host or Origin `allowed` refuses."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        why = allowed.refusal(request.headers.get("Host"), request.headers.get("Origin"))
        if why:
            log.info("refused %s %s: %s", request.method, request.path, why)
            return web.Response(status=403, text=f"403 Forbidden: {why}\n")
        return await handler(request)

    return middleware
