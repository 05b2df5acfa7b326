"""Every error fleet's Kubernetes client raises, in one tree (like httpx's).

    KubeError
    ├── ApiError            the server answered with an error status
    │   ├── NotFound        404
    │   ├── Conflict        409 (AlreadyExists, or a stale resourceVersion)
    │   ├── Forbidden       403
    │   ├── Gone            410 (a watch's resourceVersion is too old)
    │   └── Invalid         422
    ├── Unreachable         the server did not answer (refused, timeout, TLS failure)
    ├── KubeconfigError     a kubeconfig fleet cannot or will not use
    └── ExecPluginError     a kubeconfig's exec credential plugin did not give a credential

Each message says what was asked of which server, so nobody has to guess what went wrong:
`GET Secret fleet-system/member-1-kubeconfig on fleet: 403 Forbidden: ...`. A 403 is never
reported as "not found".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

__all__ = [
    "ApiError",
    "Conflict",
    "ExecPluginError",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "KubeconfigError",
    "KubeconfigProblem",
    "NotFound",
    "Unreachable",
    "api_error",
]


class KubeError(Exception):
    """Anything that went wrong talking to an API server or reading how to reach it."""


def _about(verb: str, target: str, server: str) -> str:
    what = " ".join(part for part in (verb, target) if part)
    where = f" on {server}" if server else ""
    return f"{what}{where}" if what else server


class ApiError(KubeError):
    """The API server refused a request.

    `status` is the HTTP code, `reason` the Status object's reason (`NotFound`, `AlreadyExists`,
    `Forbidden`, ...), `message` the server's own words, `verb` and `target` what was asked
    (`GET`, `Secret fleet-system/member-1-kubeconfig`), `server` which API server (its name in
    the fleet, or its URL), `body` the raw answer (field causes of a 422 live there).
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        server: str = "",
        *,
        verb: str = "",
        target: str = "",
        body: str = "",
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.server = server
        self.verb = verb
        self.target = target
        self.body = body or message
        phrase = httpx.codes.get_reason_phrase(status) or reason or "Error"
        about = _about(verb, target, server)
        prefix = f"{about}: " if about else ""
        super().__init__(
            f"{prefix}{status} {phrase}: {message}" if message else f"{prefix}{status} {phrase}"
        )

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def invalid(self) -> bool:
        return self.status == 422

    @property
    def retriable(self) -> bool:
        """Throttled (429) or a server-side failure (5xx): the same request may work later."""
        return self.status == 429 or self.status >= 500


class NotFound(ApiError):
    """404: the object, or the kind (the server does not serve it)."""


class Conflict(ApiError):
    """409: the object already exists, or someone else wrote it first."""


class Forbidden(ApiError):
    """403: the credentials may not do this. Not the same as missing."""


class Gone(ApiError):
    """410: a watch's resourceVersion is too old; list again."""


class Invalid(ApiError):
    """422: the server rejected the object; `body` has the fields."""


_BY_STATUS: Mapping[int, type[ApiError]] = {
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def api_error(
    status: int,
    reason: str,
    message: str,
    server: str = "",
    *,
    verb: str = "",
    target: str = "",
    body: str = "",
) -> ApiError:
    """The ApiError subclass for `status` (ApiError itself for codes without one)."""
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason, message, server, verb=verb, target=target, body=body)


class Unreachable(KubeError):
    """The API server did not answer: connection refused, timeout, TLS failure, broken stream."""

    def __init__(self, cause: str, server: str = "", *, verb: str = "", target: str = "") -> None:
        self.cause = cause
        self.server = server
        self.verb = verb
        self.target = target
        about = _about(verb, target, server)
        super().__init__(f"{about}: unreachable: {cause}" if about else f"unreachable: {cause}")


@dataclass(frozen=True)
class KubeconfigProblem:
    """One thing wrong with a kubeconfig, naming the field it is about."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class KubeconfigError(KubeError, ValueError):
    """A kubeconfig fleet cannot or will not use; `problems` lists every reason, each naming its
    field, and `source` says where the kubeconfig came from (a file, a Secret's key).

    It is a ValueError too: a kubeconfig is input, and callers that validate input catch that.
    """

    def __init__(self, problems: Sequence[KubeconfigProblem], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        where = f" ({source})" if source else ""
        super().__init__(f"invalid kubeconfig{where}: " + "; ".join(map(str, self.problems)))

    @classmethod
    def one(cls, field: str, message: str, source: str | None = None) -> KubeconfigError:
        return cls([KubeconfigProblem(field, message)], source)


class ExecPluginError(KubeError):
    """A kubeconfig user's exec plugin gave no credential: missing, failed, hung or printed
    something else. One line naming the user, the command and what went wrong."""

    def __init__(self, user: str, command: str, problem: str) -> None:
        self.user = user
        self.command = command
        self.problem = problem
        super().__init__(f"kubeconfig user {user!r}: exec plugin {command!r}: {problem}")
