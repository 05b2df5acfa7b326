"""The fleet and its member clusters, as kubectl amc reaches them.

Members and their kubeconfigs come from the fleet (MemberCluster objects, and beside the Secret
each names, the member's viewer kubeconfig Secret `<member>-viewer-kubeconfig`: the people's
read-only identity `fleet join` made there, never the controller's dispatch token), so the fleet
kubeconfig that submits jobs, and `get` on those Secrets (the Role `fleet-viewer-kubeconfigs`),
is all a user needs. A member's kubeconfig is
validated by the same rules as the controller's (fleet.kubeconfig: no exec plugins, no files, no
insecure TLS) before anything connects with it; the fleet's own kubeconfig is the user's, read as
kubectl reads it (exec plugins, a `$KUBECONFIG` list).

Members are asked concurrently, one thread each, so `-M` over many members takes as long as the
slowest one, not their sum. Whatever stops one member from answering (its Secret is missing,
forbidden or invalid; its API server does not answer) becomes a MemberProblem for that member
alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import ValidationError

from fleet.amc.errors import AmcError, MemberProblem, MemberUnavailable
from fleet.api import MemberCluster
from fleet.api import constants as c
from fleet.api.access import VIEWER_SECRETS_ROLE, viewer_secret_name
from fleet.kube import Connection, KubeconfigError, KubeError, SyncKubeClient, load
from fleet.kubeconfig import connection_from_secret

T = TypeVar("T")

#: How a client is made for a connection and a name (`fleet` or the member's); tests replace
#: the network here.
Dial = Callable[[Connection, str], SyncKubeClient]

#: Most members asked at once.
MAX_PARALLEL = 16


def dial(connection: Connection, name: str) -> SyncKubeClient:
    """A client for the command line: a member that does not answer costs seconds, not
    minutes (three tries, 5 s to connect, 20 s to answer)."""
    return SyncKubeClient(connection, name=name, timeout=20.0, retries=3)


@dataclass(frozen=True)
class Answer(Generic[T]):
    """What the members that could be asked said, and why the others could not be."""

    values: dict[str, T]
    problems: list[MemberProblem]


class Fleet:
    """The fleet API server, its MemberClusters, and a client per member, made on demand.

    Clients are closed with `stack`.
    """

    def __init__(self, client: SyncKubeClient, stack: ExitStack, connect: Dial = dial) -> None:
        self.client = client
        self._stack = stack
        self._dial = connect
        self._members: dict[str, MemberCluster | str] | None = None
        self._clients: dict[str, SyncKubeClient] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls, kubeconfig: str | None, context: str | None, stack: ExitStack, connect: Dial = dial
    ) -> Fleet:
        """The fleet from its kubeconfig (`--kubeconfig`, else $KUBECONFIG, else in-cluster,
        else ~/.kube/config); AmcError when there is none fleet can use."""
        try:
            connection = load(kubeconfig, context)
        except KubeconfigError as e:
            raise AmcError(
                f"cannot use the fleet's kubeconfig: {e} (pass --kubeconfig or set KUBECONFIG)"
            ) from None
        return cls(stack.enter_context(connect(connection, "fleet")), stack, connect)

    @property
    def namespace(self) -> str:
        """The namespace of the fleet kubeconfig's context, as kubectl defaults it."""
        return self.client.connection.default_namespace or "default"

    # -- members ------------------------------------------------------------------------------

    def members(self) -> dict[str, MemberCluster | str]:
        """Every MemberCluster by name (asked once); for one that does not parse, why not (it
        is still a member: asking it then says so, instead of it silently missing)."""
        if self._members is None:
            listing = self.client.list(c.FLEET_API_VERSION, "MemberCluster")
            found: dict[str, MemberCluster | str] = {}
            for item in listing.get("items") or []:
                name = str((item.get("metadata") or {}).get("name") or "")
                if not name:
                    continue
                try:
                    found[name] = MemberCluster.from_dict(item)
                except ValidationError as e:
                    error = e.errors()[0]
                    where = ".".join(str(part) for part in error["loc"])
                    found[name] = f"MemberCluster {name} cannot be read: {where}: {error['msg']}"
            self._members = dict(sorted(found.items()))
        return self._members

    def select(self, names: Sequence[str] | None) -> tuple[list[str], list[MemberProblem]]:
        """The members asked for (None: all of them), and a problem for each name the fleet
        does not know. AmcError when no name at all is known."""
        known = self.members()
        if names is None:
            if not known:
                raise AmcError("the fleet has no member clusters (see `fleet join`)")
            return list(known), []
        wanted = list(dict.fromkeys(names))
        have = ", ".join(known) or "none"
        unknown = [n for n in wanted if n not in known]
        if len(unknown) == len(wanted):
            which = ", ".join(repr(n) for n in unknown)
            noun = "cluster" if len(unknown) == 1 else "clusters"
            raise AmcError(f"unknown member {noun} {which} (members: {have})")
        problems = [
            MemberProblem(n, f"{n}: unknown member cluster (members: {have})") for n in unknown
        ]
        return [n for n in wanted if n in known], problems

    def connect(self, name: str) -> SyncKubeClient:
        """A client for the member, made with the kubeconfig in its Secret; MemberUnavailable
        names the member and what stands in the way (a 403 reads as 403, never as missing)."""
        with self._lock:
            if name in self._clients:
                return self._clients[name]
        member = self.members().get(name)
        if member is None:
            raise MemberUnavailable(MemberProblem(name, f"{name}: unknown member cluster"))
        if isinstance(member, str):
            raise MemberUnavailable(MemberProblem(name, f"{name}: {member}"))
        ref = member.spec.kubeconfig_secret_ref
        secret_name = viewer_secret_name(name)
        where = f"Secret {ref.namespace}/{secret_name}"
        try:
            secret = self.client.get("v1", "Secret", secret_name, ref.namespace)
        except KubeError as e:
            raise MemberUnavailable(
                MemberProblem(
                    name,
                    f"{name}: {e} (kubectl amc reads the member's viewer kubeconfig {where}: "
                    f"ask for a RoleBinding to role/{VIEWER_SECRETS_ROLE} -n {ref.namespace})",
                )
            ) from None
        if secret is None:
            raise MemberUnavailable(
                MemberProblem(
                    name,
                    f"{name}: its viewer kubeconfig {where} is not found (`fleet join {name}` "
                    "makes it; join the member again)",
                )
            )
        try:
            connection = connection_from_secret(secret, ref.key)
        except KubeconfigError as e:
            raise MemberUnavailable(MemberProblem(name, f"{name}: {e}")) from None
        client = self._dial(connection, name)
        with self._lock:
            if name in self._clients:  # another thread was first
                client.close()
                return self._clients[name]
            self._clients[name] = self._stack.enter_context(client)
            return client

    def ask(self, names: Iterable[str], work: Callable[[str, SyncKubeClient], T]) -> Answer[T]:
        """`work(name, client)` for every member at once (a thread each). A member that cannot
        be reached, or whose work fails with a KubeError, becomes a problem; the rest answer."""
        names = list(names)
        if not names:
            return Answer({}, [])
        # Warm the fleet's discovery once, so the threads only read it.
        self.client.resource("v1", "Secret")

        def one(name: str) -> T | MemberProblem:
            try:
                return work(name, self.connect(name))
            except MemberUnavailable as e:
                return e.problem
            except KubeError as e:
                return MemberProblem(name, str(e))

        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(names))) as pool:
            results = list(pool.map(one, names))
        values: dict[str, T] = {}
        problems: list[MemberProblem] = []
        for name, result in zip(names, results, strict=True):
            if isinstance(result, MemberProblem):
                problems.append(result)
            else:
                values[name] = result
        return Answer(values, problems)
