"""Per-user authorization of the in-cluster dashboard, by the fleet's own RBAC.

Run behind an authenticating proxy (oauth2-proxy, kube-rbac-proxy, an ingress's auth), with
`--auth-headers`, the dashboard answers a request only for the user the proxy names in a header
(`X-Remote-User`, groups in `X-Remote-Group`, by default: kube-rbac-proxy's and the API server's
request-header names; `--user-header`/`--group-header` choose others, e.g. oauth2-proxy's
`X-Forwarded-User`/`X-Forwarded-Groups`), and asks the fleet's API server with a
SubjectAccessReview what that user may do:

- a job's page and its log: `get` on that job (its kind, namespace and name) on the fleet;
- the job list: only the jobs of the namespaces where the user may `list` that kind.

A request without the user header is refused (401): the dashboard must only be reachable through
the proxy, which must strip any such header a client sends (docs/dashboard.md). Answers are
cached for `ttl` seconds per user, groups and question, so a page's refreshes cost no reviews.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiohttp import web

from fleet.api.access import group_of, job_kinds, plural

__all__ = [
    "DEFAULT_GROUP_HEADER",
    "DEFAULT_USER_HEADER",
    "Authorizer",
    "Question",
    "User",
    "job_resource",
    "user_of",
]

DEFAULT_USER_HEADER: Final = "X-Remote-User"
DEFAULT_GROUP_HEADER: Final = "X-Remote-Group"
#: How long an answer is reused.
TTL_SECONDS: Final = 10.0


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Question:
    """May the user `verb` `group/resource` (named `name`) in `namespace`?"""

    verb: str
    group: str
    resource: str
    namespace: str
    name: str = ""


def job_resource(kind: str) -> tuple[str, str] | None:
    """(API group, resource) of a job kind fleet dispatches, by its kind (case-insensitive)."""
    for api_version, known in job_kinds():
        if known.lower() == kind.lower():
            return group_of(api_version), plural(known)
    return None


def user_of(request: web.Request, user_header: str, group_header: str) -> User | None:
    """The user the proxy names; None: the header is missing or empty. Groups may come as
    several headers or comma-separated in one."""
    name = (request.headers.get(user_header) or "").strip()
    if not name:
        return None
    groups = [
        part.strip()
        for value in request.headers.getall(group_header, [])
        for part in value.split(",")
        if part.strip()
    ]
    return User(name, tuple(groups))


def review(user: User, question: Question) -> dict[str, Any]:
    """The SubjectAccessReview asking the fleet `question` for `user`."""
    attributes = {
        "verb": question.verb,
        "group": question.group,
        "resource": question.resource,
        "namespace": question.namespace,
    }
    if question.name:
        attributes["name"] = question.name
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user.name,
            "groups": list(user.groups),
            "resourceAttributes": attributes,
        },
    }


#: Sends a SubjectAccessReview to the fleet; its answer.
Send = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


class Authorizer:
    """Asks the fleet whether a user may do something, with answers reused for `ttl` seconds."""

    def __init__(
        self,
        send: Send,
        *,
        user_header: str = DEFAULT_USER_HEADER,
        group_header: str = DEFAULT_GROUP_HEADER,
        ttl: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.send = send
        self.user_header = user_header
        self.group_header = group_header
        self.ttl = ttl
        self.clock = clock
        self._answers: dict[tuple[User, Question], tuple[bool, float]] = {}
        self.reviews = 0

    async def allows(self, user: User, question: Question) -> bool:
        key = (user, question)
        now = self.clock()
        cached = self._answers.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        self.reviews += 1
        answer = await self.send(review(user, question))
        allowed = bool((answer.get("status") or {}).get("allowed"))
        if len(self._answers) > 10_000:
            self._answers = {k: v for k, v in self._answers.items() if v[1] > now}
        self._answers[key] = (allowed, now + self.ttl)
        return allowed

    def user(self, request: web.Request) -> User | None:
        return user_of(request, self.user_header, self.group_header)
