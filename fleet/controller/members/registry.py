"""Every member cluster, kept connected and in sync, and told apart by its MemberCluster.

A member is connected with the kubeconfig in the Secret its MemberCluster names, validated first
(fleet.kubeconfig). Every change to a member's connection (a MemberCluster event, an edited
Secret, a removal) runs under that member's lock, so two of them never interleave: the old
connection is closed, tasks and all, before the new one starts. A member that cannot be reached,
or whose kubeconfig is unusable, is NotReady with the reason, and is never dropped: it comes back
by itself when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from fleet.api import cluster_fields, format_time
from fleet.api import constants as c
from fleet.api._time import parse_time, to_epoch
from fleet.api.access import FLEET_SECRETS_NAMESPACE
from fleet.api.guardprobe import GuardVerdict, guard_probe, guard_verdict
from fleet.api.membership import cluster_id_of, identity_of
from fleet.controller.clock import Clock
from fleet.controller.events import EventRecorder
from fleet.controller.members.connection import MemberConnection
from fleet.controller.members.feed import apply_node_event, apply_pod_event
from fleet.controller.members.health import (
    MESSAGE_LIMIT,
    Health,
    Probe,
    SourceState,
    credentials_refused,
    next_health,
    recovery,
    verdict,
)
from fleet.controller.members.member import FENCING_MESSAGE, Member
from fleet.controller.members.renewal import (
    RETRY_SECONDS,
    Renewal,
    RenewalState,
    Superseded,
    connect_renewable,
    failure_reason,
    renew,
    renewable_token,
    renewal_of,
    shape,
)
from fleet.controller.members.secrets import SecretWatch
from fleet.controller.members.status import MemberStatusWriter
from fleet.controller.metrics import Metrics
from fleet.core.errors import FieldError
from fleet.core.identity import Claim, holder
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, parse_taints
from fleet.kube import ApiError, Connection, KubeClient, Obj, RateLimit, Unreachable
from fleet.kubeconfig import KubeconfigError, kubeconfig_from_secret

log = logging.getLogger(__name__)

#: Builds the client for a member from the Connection its validated kubeconfig describes
#: (fleet.kubeconfig builds it once, with the checks; tests inject transports).
Connect = Callable[[str, Connection], KubeClient]


def connect_with_kubeconfig(name: str, connection: Connection) -> KubeClient:
    """The member's client; a token in it can be renewed in place (renewal.RenewableToken)."""
    return connect_renewable(name, connection)


class MemberListener(Protocol):
    """What the rest of the controller hears from the members."""

    def capacity_changed(self, member: str) -> None: ...

    def job_changed(self, member: str, event: str, obj: Obj) -> None: ...

    def gang_pods_refused(self, member: str, uid: str) -> None: ...

    def health_changed(self, member: str, ready: bool) -> None: ...


class MemberRegistry:
    """Every member, kept connected and in sync; tells the listener what changed."""

    def __init__(
        self,
        fleet: KubeClient,
        listener: MemberListener,
        *,
        fleet_id: str,
        clock: Clock,
        probe_interval: float = 3.0,
        status_interval: float = 10.0,
        guard_check_interval: float = 60.0,
        source_grace: float = 15.0,
        resync_after_error: float = 5.0,
        connect: Connect = connect_with_kubeconfig,
        member_qps: float = 0.0,
        member_burst: int = 0,
        token_renew_before: float | None = None,
        renew_retry: float = RETRY_SECONDS,
        events: EventRecorder | None = None,
        metrics: Metrics | None = None,
        secrets_namespaces: Collection[str] = (FLEET_SECRETS_NAMESPACE,),
    ) -> None:
        self.fleet = fleet
        self.listener = listener
        self.fleet_id = fleet_id
        self.clock = clock
        self.probe_interval = probe_interval
        self.status_interval = status_interval
        #: How often each guarded member is asked whether its guard is in force.
        self.guard_check_interval = guard_check_interval
        self.source_grace = source_grace
        self.resync_after_error = resync_after_error
        self.connect = connect
        #: Each member client's rate limit (client-go's QPS and burst); qps 0: none.
        self.member_qps = member_qps
        self.member_burst = member_burst
        #: Renew joined members' bound tokens this many seconds before they expire (None: at
        #: 80% of their lifetime, fleet.core.tokens).
        self.token_renew_before = token_renew_before
        self.renew_retry = renew_retry
        #: Where a refused renewal is told (Events on the MemberCluster, metrics).
        self.events = events
        self.metrics = metrics
        #: The only namespaces whose Secrets are read, watched and renewed (settings).
        self.secrets_namespaces = frozenset(secrets_namespaces)
        #: Tokens renewed, per member.
        self.renewals: defaultdict[str, int] = defaultdict(int)
        #: Renewals that were due but left to the leader (this replica is a standby), per member.
        self.renewals_left: defaultdict[str, int] = defaultdict(int)
        self.members: dict[str, Member] = {}
        #: The last MemberCluster seen per member, to resync when its Secret changes.
        self._objects: dict[str, Obj] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._background: set[asyncio.Task[None]] = set()
        self._status_task: asyncio.Task[None] | None = None
        self.secrets = SecretWatch(fleet, self._secret_changed, self._secret_watch_health)
        self.status = MemberStatusWriter(fleet, clock)
        #: Only the leading replica writes MemberCluster status.
        self.writes_enabled = False
        #: Every MemberCluster that existed when `warm` listed them has been synced: a name
        #: missing from `members` now means the member left, not "not heard of yet".
        self.listed = False
        #: Every MemberCluster event (sync or removal) is numbered; the number of the last one
        #: per name tells `warm` whether kopf said something newer than its list.
        self._event_seq = 0
        self._last_event: dict[str, int] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self._status_task is None:
            self._status_task = asyncio.create_task(self._status_loop(), name="member-status")

    async def stop(self) -> None:
        for task in [self._status_task, *self._background]:
            if task is not None:
                task.cancel()
        for task in [self._status_task, *self._background]:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._status_task = None
        self._background.clear()
        await self.secrets.stop()
        for name in list(self.members):
            await self.remove(name)

    async def warm(self) -> None:
        """Sync every MemberCluster from one list, so that a controller that just started
        never takes a member it has not heard of yet for one that left the fleet (a copy left
        behind there would be forgotten, not purged). ApiError or Unreachable: not listed."""
        listed_at = self._event_seq
        listing = await self.fleet.list(c.FLEET_API_VERSION, "MemberCluster")
        todo = []
        for obj in listing.get("items") or []:
            name = (obj.get("metadata") or {}).get("name") or ""
            if not name or name in self.members:
                continue
            if self._last_event.get(name, -1) > listed_at:
                continue  # kopf told something newer (a deletion, say): its word stands
            todo.append((name, {"apiVersion": c.FLEET_API_VERSION, "kind": "MemberCluster", **obj}))
        for name, obj in todo:
            # Every recorded spec.id is known before the first member connects: the holder of
            # a cluster (fleet.core.identity) connects first whatever the list's order.
            self._objects.setdefault(name, obj)
        for _, obj in todo:
            await self.sync(obj)
        self.listed = True

    # -- reads -------------------------------------------------------------------------------

    def get(self, name: str) -> Member | None:
        return self.members.get(name)

    def by_identity(self, cluster_id: str) -> Member | None:
        """The member that is the cluster `cluster_id` (its kube-system namespace's UID): of the
        MemberClusters that are that cluster, the one that holds it (fleet.core.identity: created
        first, then first by name), whether it is Ready or not; the others are refused
        (DuplicateCluster). None: no member is known to be that cluster."""
        name = holder(self._claims(cluster_id))
        return self.members.get(name) if name is not None else None

    def left(self, name: str) -> bool:
        """Whether `name` is no member of the fleet (known only once `warm` has listed them)."""
        return self.listed and name not in self.members

    def snapshots(self) -> list[ClusterSnapshot]:
        return [m.snapshot for m in self.members.values()]

    def room(self, name: str) -> ClusterSnapshot | None:
        """`name`'s snapshot as a placement now reads it: its expired reservations dropped
        (None: no such member)."""
        member = self.members.get(name)
        if member is None:
            return None
        member.snapshot.expire(self.clock.monotonic())
        return member.snapshot

    def not_ready(self) -> dict[str, str]:
        """The members nothing may be placed in now, each with why: not Ready, or not fenced
        yet since it (re)connected (the collector has not checked fleet's objects there)."""
        out = {
            name: f"{m.health.reason}: {m.health.message}"
            for name, m in self.members.items()
            if not m.ready
        }
        for name, m in self.members.items():
            if m.ready and not m.fenced:
                out[name] = f"{c.REASON_FENCING}: {FENCING_MESSAGE}"
            elif m.ready and m.unguarded:
                out[name] = f"{c.REASON_GUARD_MISSING}: {m.guard_missing}"
        return out

    def fenced(self, member: Member) -> None:
        """The collector has made `member`'s cluster match the ledger since it connected: it is
        placeable now (Ready=True), and the gangs waiting for room are told."""
        if member.fenced:
            return
        member.fenced = True
        self._write_status_soon(member)
        self.listener.capacity_changed(member.name)

    def lacking(self, api_version: str, kind: str) -> dict[str, str]:
        """The members known not to serve a kind, each with the sentence placement gives."""
        plural = kind.lower() + "s"
        group = api_version.split("/")[0] if "/" in api_version else "core"
        return {
            name: f"does not run {kind}: no {plural}.{group} CRD in the member"
            for name, m in self.members.items()
            if m.lacks(api_version, kind)
        }

    def taints(self) -> dict[str, tuple[Taint, ...]]:
        return {name: m.taints for name, m in self.members.items() if m.taints}

    # -- membership -------------------------------------------------------------------------

    async def sync(self, obj: Obj) -> None:
        """A MemberCluster was added or changed: (re)connect if its kubeconfig changed."""
        name = (obj.get("metadata") or {}).get("name") or ""
        self._noted(name)
        self._objects[name] = obj
        await self._resync(name)

    async def _resync(self, name: str) -> None:
        """Sync `name` from the last MemberCluster seen, read once the lock is ours: a sync
        that waited behind a removal finds no object and does nothing, so a resync that a
        Secret's event started cannot bring back a member deleted meanwhile."""
        async with self._locks[name]:
            obj = self._objects.get(name)
            if obj is None:
                return
            await self._sync(name, obj)
            member = self.members.get(name)
            generation = (obj.get("metadata") or {}).get("generation")
            if member is not None and member.generation != generation:
                member.generation = generation
                self._write_status_soon(member)

    def _noted(self, name: str) -> None:
        self._event_seq += 1
        self._last_event[name] = self._event_seq

    async def remove(self, name: str) -> None:
        self._noted(name)
        self._objects.pop(name, None)
        async with self._locks[name]:
            member = self.members.pop(name, None)
            if member is not None:
                await self._disconnect(member)
                self.listener.health_changed(name, False)
                self._release(name)

    async def _sync(self, name: str, obj: Obj) -> None:
        before = self.members.get(name)
        held = (before.cluster_id, before.duplicate_of) if before is not None else (None, None)
        await self._sync_member(name, obj)
        after = self.members.get(name)
        now = (after.cluster_id, after.duplicate_of) if after is not None else (None, None)
        if held[0] is not None and now != held:
            # It left, is another cluster now, or is refused itself: the members refused as
            # its duplicates are looked at again (one of them may hold the cluster now).
            self._release(name)

    async def _sync_member(self, name: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            member = self.members.pop(name, None)
            if member is not None:
                await self._disconnect(member)
                self.listener.health_changed(name, False)
            return
        labels = dict(meta.get("labels") or {})
        spec = obj.get("spec") or {}
        member = self.members.get(name)
        if member is None:
            member = self.members[name] = Member(name, labels, cluster_fields(labels))
        else:
            member.snapshot.labels = labels
            member.snapshot.fields = cluster_fields(labels)
        if not member.gang_probed:
            # What `fleet join` (or a controller before this one) detected and recorded: known
            # before this controller's probe answers, so the first placements in a member that
            # takes Reservations reserve, as its GANG column says; the probe replaces it.
            recorded = (obj.get("status") or {}).get("gangScheduler")
            member.detected_gang_scheduler = str(recorded) if recorded else None
        try:
            member.taints = parse_taints(spec.get("taints"), "spec.taints")
        except FieldError as e:
            log.warning("MemberCluster %s: %s; keeping its previous taints", name, e)
        member.created = _created(obj)
        recorded = str(spec.get("id") or "") or None
        member.cluster_id = recorded or member.reached_id
        member.declared_gang_scheduler = spec.get("gangScheduler") or None
        member.scheduler_name = spec.get("schedulerName") or None
        reservation = spec.get("reservation") or {}
        member.reservation = (
            (int(reservation.get("ttlSeconds") or 600), float(reservation.get("waitSeconds") or 60))
            if reservation.get("enabled")
            else None
        )
        ref = spec.get("kubeconfigSecretRef") or {}
        namespace, secret_name = ref.get("namespace") or "", ref.get("name") or ""
        if namespace not in self.secrets_namespaces:
            # The controller may list, watch and renew Secrets only there (its Roles): a
            # kubeconfig elsewhere would be read once and never followed or renewed.
            watched = ", ".join(sorted(self.secrets_namespaces))
            member.secret_watch = (False, f"{namespace!r} is not one of {watched}")
            await self._disconnect(member)
            self._set_health(
                member,
                False,
                c.REASON_KUBECONFIG_SECRET_NOT_WATCHED,
                f"Secret {namespace}/{secret_name} is in namespace {namespace!r}, where the "
                f"controller does not watch Secrets (it watches {watched}): keep it in one of "
                "those (fleet join --secrets-namespace), or add the namespace to the chart's "
                "controller.secretsNamespaces",
            )
            self._write_status_soon(member)
            return
        self.secrets.watch(namespace)
        member.secret_watch = self.secrets.state(namespace)
        try:
            secret = await self.fleet.get("v1", "Secret", secret_name, namespace)
        except ApiError as e:
            if e.status >= 500:
                self._resync_later(name)
                return
            # Unreadable is not missing: a 403 says what the controller may not do.
            self._set_health(member, False, c.REASON_KUBECONFIG_SECRET_UNREADABLE, str(e))
            return
        except Unreachable as e:
            log.warning("MemberCluster %s: cannot read its Secret: %s; retrying", name, e)
            self._resync_later(name)
            return
        if secret is None:
            await self._disconnect(member)
            self._set_health(
                member,
                False,
                c.REASON_KUBECONFIG_SECRET_MISSING,
                f"Secret {namespace}/{secret_name} not found",
            )
            return
        issued_for = cluster_id_of(secret)
        if recorded and issued_for and recorded != issued_for:
            await self._disconnect(member)
            self._set_health(
                member,
                False,
                c.REASON_CLUSTER_ID_MISMATCH,
                f"Secret {namespace}/{secret_name} was issued for cluster {issued_for}, but "
                f"this MemberCluster is cluster {recorded} (spec.id): not used",
            )
            return
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        guard = annotations.get(c.ADMISSION_POLICY_ANNOTATION)
        member.guard = None if guard is None else ("" if guard == c.NO_ADMISSION_POLICY else guard)
        identity = identity_of(secret)
        viewer_role = annotations.get(c.VIEWER_ROLE_ANNOTATION)
        member.viewer = identity[0] if viewer_role and identity is not None else None
        member.identity_namespace = identity[0] if identity is not None else None
        key = ref.get("key") or "kubeconfig"
        fingerprint = hashlib.sha256(
            json.dumps([secret.get("data"), secret.get("stringData"), key], sort_keys=True).encode()
        ).hexdigest()
        connected = fingerprint == member.fingerprint and member.connection is not None
        if recorded or connected:
            # Its cluster is known (recorded, or read by the connection it has with this very
            # kubeconfig): refused before anything is (re)connected when another MemberCluster
            # holds it (fleet.core.identity).
            first = self._outranked_by(member)
            if first is not None:
                await self._disconnect(member)
                self._refuse_duplicate(member, first)
                return
        if connected:
            return
        try:
            resolved = kubeconfig_from_secret(secret, key)
        except (KubeconfigError, ValueError) as e:
            await self._disconnect(member)
            member.fingerprint = fingerprint
            self._set_health(member, False, c.REASON_KUBECONFIG_INVALID, str(e))
            return
        token, new_token = renewable_token(member.client), resolved.token
        if token is not None and new_token and member.shape == shape(resolved.config):
            # Only the token changed (renewed, or rotated by hand): swap it into the live
            # client; the watches, the snapshot and the member's health go on untouched.
            token.current = new_token
            member.fingerprint = fingerprint
            self._schedule_renewal(member, secret, key, resolved.config)
            log.info("member %s: took in a new token", name)
            return
        await self._disconnect(member)
        member.fingerprint = fingerprint
        try:
            client = self.connect(name, resolved.connection)
        except (KubeconfigError, ValueError) as e:
            self._set_health(member, False, c.REASON_KUBECONFIG_INVALID, str(e))
            return
        if self.member_qps > 0:
            client.rate_limit = RateLimit(self.member_qps, self.member_burst or 1)
        if not await self._reaches(member, client, recorded):
            member.fingerprint = ""  # looked at again with the next change or resync
            return
        first = self._outranked_by(member)
        if first is not None:
            await client.aclose()
            member.fingerprint = ""  # looked at again when the holder lets go
            self._refuse_duplicate(member, first)
            return
        member.shape = shape(resolved.config)
        self._connect(member, client)
        self._schedule_renewal(member, secret, key, resolved.config)

    async def _reaches(self, member: Member, client: KubeClient, recorded: str | None) -> bool:
        """Read which cluster `client` reaches (its kube-system namespace's UID) into the
        member's `reached_id`, and, without a recorded spec.id, its `cluster_id`. Whether it is
        the cluster `recorded`: a member that does not answer now is taken on trust (the probe
        reports it), one that answers with another UID is refused."""
        try:
            namespace = await client.get("v1", "Namespace", "kube-system")
        except (ApiError, Unreachable):
            return True
        found = str(((namespace or {}).get("metadata") or {}).get("uid") or "")
        if found:
            member.reached_id = found
            member.cluster_id = recorded or found
        if not recorded or not found or found == recorded:
            return True
        await client.aclose()
        self._set_health(
            member,
            False,
            c.REASON_CLUSTER_ID_MISMATCH,
            f"its kubeconfig reaches cluster {found}, but this MemberCluster is cluster "
            f"{recorded} (spec.id): not used",
        )
        return False

    # -- one cluster, one registration ---------------------------------------------------------

    def _claims(self, cluster_id: str) -> list[Claim]:
        """Every MemberCluster known to be the cluster `cluster_id`: the members (by their
        cluster_id), and MemberClusters listed but not synced yet (by their spec.id)."""
        claims = [
            Claim(m.name, m.created) for m in self.members.values() if m.cluster_id == cluster_id
        ]
        for name, obj in self._objects.items():
            if name in self.members or (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if str((obj.get("spec") or {}).get("id") or "") == cluster_id:
                claims.append(Claim(name, _created(obj)))
        return claims

    def _outranked_by(self, member: Member) -> str | None:
        """The MemberCluster that holds `member`'s cluster instead of it (None: it holds it, or
        its cluster is not known). When it holds it, every other member connected to that
        cluster is synced again, and so refused."""
        if member.cluster_id is None:
            return None
        first = holder(self._claims(member.cluster_id))
        if first is not None and first != member.name:
            return first
        for other in list(self.members.values()):
            if (
                other is not member
                and other.cluster_id == member.cluster_id
                and other.connection is not None
            ):
                self._in_background(self._resync(other.name), f"resync-{other.name}")
        return None

    def _refuse_duplicate(self, member: Member, first: str) -> None:
        member.duplicate_of = first
        self._set_health(
            member,
            False,
            c.REASON_DUPLICATE_CLUSTER,
            f"cluster {member.cluster_id} (kube-system UID) is already MemberCluster {first}, "
            "which holds it (the one created first, then first by name): this one is not used, "
            f"so the cluster counts once; unjoin {member.name} (fleet unjoin {member.name}), or "
            f"unjoin {first} to keep this one",
        )
        self._write_status_soon(member)

    def _release(self, name: str) -> None:
        """`name` no longer holds the cluster it held: the members refused as its duplicates
        are synced again (the next in rank connects)."""
        for other in list(self.members.values()):
            if other.duplicate_of == name:
                self._in_background(self._resync(other.name), f"resync-{other.name}")

    # -- token renewal -------------------------------------------------------------------------

    def _schedule_renewal(
        self, member: Member, secret: Obj, key: str, config: Mapping[str, Any]
    ) -> None:
        self._cancel_renewal(member)
        renewal = renewal_of(secret, key, config)
        if renewal is None:
            if member.token is not None:
                member.token = None  # no longer a bound token: no TokenRenewed condition
                self._write_status_soon(member)
            return
        now = self.clock.now()
        previous = member.token
        member.token = RenewalState(
            issued=renewal.issued,
            expires=renewal.expires,
            next_attempt=renewal.due(now, self.token_renew_before),
            # The Secret's watch brought back the token this controller renewed (its times
            # were written to the second).
            renewed=previous is not None
            and previous.renewed
            and previous.failure is None
            and abs(previous.issued - renewal.issued) < 1.0,
        )
        if self.metrics is not None:
            self.metrics.token_expiry.set(member.name, renewal.expires)
        member.renewal = asyncio.create_task(
            self._renew_loop(member, renewal), name=f"renew-{member.name}"
        )

    @staticmethod
    def _cancel_renewal(member: Member) -> None:
        task, member.renewal = member.renewal, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _renew_loop(self, member: Member, renewal: Renewal) -> None:
        """Renew the member's token when due, for as long as the member keeps this Secret."""
        while True:
            now = self.clock.now()
            due = renewal.due(now, self.token_renew_before)
            if due > now:
                # Look at the clock again at least every renew_retry: a suspended machine, or
                # a test's clock, moves time without this task sleeping through it.
                await asyncio.sleep(min(due - now, self.renew_retry))
                continue
            client, token = member.client, renewable_token(member.client)
            if not self.writes_enabled or client is None or token is None:
                if not self.writes_enabled:
                    self.renewals_left[member.name] += 1
                await asyncio.sleep(min(self.renew_retry, self.probe_interval))
                continue  # only the leader renews; a standby takes over when it leads
            try:
                issued, written = await renew(member.writer, self.fleet, renewal, now)
            except Superseded as e:
                # A re-join wrote a new kubeconfig: read it (the watch would too) and renew that.
                log.info("member %s: %s", member.name, e)
                self._resync_later(member.name)
                return
            except (ApiError, Unreachable, ValueError) as e:
                log.warning(
                    "member %s: cannot renew its token (expires in %.0fs): %s; retrying in %.0fs",
                    member.name,
                    renewal.expires - now,
                    e,
                    self.renew_retry,
                )
                self._renewal_failed(member, renewal, e, now)
                await asyncio.sleep(self.renew_retry)
                continue
            # Used at once; the Secret's watch brings the same token back (swapped in place).
            token.current = issued.token
            self.renewals[member.name] += 1
            log.info(
                "member %s: token renewed, expires in %.0fs",
                member.name,
                (issued.expires or now) - now,
            )
            renewal = dataclasses.replace(
                renewal, secret=written, issued=issued.issued or now, expires=issued.expires or now
            )
            self._renewal_succeeded(member, renewal, now)

    def _renewal_failed(
        self, member: Member, renewal: Renewal, error: Exception, now: float
    ) -> None:
        """Say so where an operator looks: the condition, a Warning Event, the failure counter.
        The member stays Ready: its token works until it expires."""
        reason = failure_reason(error)
        state = member.token or RenewalState(renewal.issued, renewal.expires, now)
        first = state.failure is None
        state.failure, state.failures = (reason, str(error)), state.failures + 1
        state.next_attempt = now + self.renew_retry
        member.token = state
        if self.metrics is not None:
            self.metrics.token_renewal_failures.inc(member.name, reason)
        if first:
            self._write_status_soon(member)
        self._member_event(
            member,
            c.REASON_TOKEN_RENEWAL_FAILED,
            f"cannot renew fleet's token for member {member.name}: {error}; the token expires "
            f"at {format_time(renewal.expires)}, the member stays Ready until then; retrying "
            f"every {self.renew_retry:.0f}s",
            warning=True,
        )

    def _renewal_succeeded(self, member: Member, renewal: Renewal, now: float) -> None:
        recovered = member.token is not None and member.token.failure is not None
        member.token = RenewalState(
            renewal.issued,
            renewal.expires,
            renewal.due(now, self.token_renew_before),
            renewed=True,
        )
        if self.metrics is not None:
            self.metrics.token_expiry.set(member.name, renewal.expires)
            self.metrics.token_renewals.inc(member.name)
        self._write_status_soon(member)
        if recovered:
            self._member_event(
                member,
                c.REASON_TOKEN_RENEWED,
                f"fleet's token for member {member.name} renewed again; it expires at "
                f"{format_time(renewal.expires)}",
            )

    def _member_event(
        self, member: Member, reason: str, message: str, *, warning: bool = False
    ) -> None:
        """Post an Event on the MemberCluster, in the background: the renewal that reports it
        may be replaced (its Secret's watch brought the renewed token) while it is posted."""
        obj = self._objects.get(member.name)
        if self.events is None or obj is None or not (obj.get("metadata") or {}).get("uid"):
            return
        about = {"apiVersion": c.FLEET_API_VERSION, "kind": "MemberCluster", **obj}
        self._in_background(
            self.events.record(about, reason, message, warning=warning),
            f"event-{member.name}-{reason}",
        )

    def _connect(self, member: Member, client: KubeClient) -> None:
        now = self.clock.monotonic()
        member.duplicate_of = None
        member.probe = None
        member.sources = {
            "Node": SourceState(failing_since=now),
            "Pod": SourceState(failing_since=now),
        }
        member.health = Health(since=now)  # Connecting: no verdict until it answers
        member.fenced = False  # the collector looks at fleet's objects there first
        guarded = bool(member.guard) and bool(member.identity_namespace)
        member.connection = MemberConnection(
            member.name,
            client,
            _MemberEvents(self, member),
            fleet_id=self.fleet_id,
            probe_interval=self.probe_interval,
            guard_check=(lambda: self.check_guard(member)) if guarded else None,
            guard_interval=self.guard_check_interval,
            # Found gone before: asked at once (a re-join has just put it back, say).
            guard_check_first=member.guard_missing is not None,
        )
        member.connection.start()

    async def _disconnect(self, member: Member) -> None:
        self._cancel_renewal(member)
        member.token = None
        connection, member.connection = member.connection, None
        if connection is not None:
            await connection.close()
        member.fingerprint = ""
        member.reset_snapshot()

    def _secret_watch_health(self, namespace: str) -> None:
        """A namespace's Secret watch started or stopped working: said on its members."""
        for name, obj in list(self._objects.items()):
            ref = (obj.get("spec") or {}).get("kubeconfigSecretRef") or {}
            member = self.members.get(name)
            if member is not None and ref.get("namespace") == namespace:
                member.secret_watch = self.secrets.state(namespace)
                self._write_status_soon(member)

    def _secret_changed(self, namespace: str, name: str) -> None:
        for member, obj in list(self._objects.items()):
            ref = (obj.get("spec") or {}).get("kubeconfigSecretRef") or {}
            if ref.get("namespace") == namespace and ref.get("name") == name:
                self._in_background(self._resync(member), f"resync-{member}")

    def _resync_later(self, name: str) -> None:
        async def later() -> None:
            await asyncio.sleep(self.resync_after_error)
            await self._resync(name)

        self._in_background(later(), f"resync-{name}")

    def _in_background(self, work: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- the guard ---------------------------------------------------------------------------

    async def check_guard(self, member: Member) -> None:
        """Ask the member, with fleet's token, the guard's probe as `fleet join` does
        (fleet.api.guardprobe: a dry-run create the guard must refuse). Admitted: the guard is
        gone or no longer refuses (GuardMissing); refused by it: in force. Any other answer (no
        answer, fleet's token refused, another webhook) tells nothing and changes nothing."""
        policy, namespace = member.guard, member.identity_namespace
        if not policy or not namespace or member.connection is None:
            return
        status: int | None = None
        message = ""
        try:
            await member.writer.create(guard_probe(namespace), dry_run=True)
        except ApiError as e:
            status, message = e.status, e.message
        except Unreachable:
            return
        verdict = guard_verdict(status, message, policy)
        if verdict is GuardVerdict.IN_FORCE:
            self._guard_seen(member, None)
        elif verdict is GuardVerdict.NOT_LOADED:
            self._guard_seen(
                member,
                f"ValidatingAdmissionPolicy {policy} no longer refuses fleet's token (a ConfigMap "
                f"without fleet's mark, created in {namespace} as a dry run, was admitted): the "
                "policy or its binding was deleted or changed in the member; fleet's identity "
                f"there is limited by RBAC alone and no new gang is placed there. `fleet join "
                f"{member.name}` again installs it",
            )
        else:
            log.debug("member %s: guard probe inconclusive: %s %s", member.name, status, message)

    def _guard_seen(self, member: Member, missing: str | None) -> None:
        before, member.guard_missing = member.guard_missing, missing
        if (before is None) == (missing is None):
            return
        self._write_status_soon(member)
        if missing is not None:
            log.warning("member %s: %s", member.name, missing)
            self._member_event(member, c.REASON_GUARD_MISSING, missing, warning=True)
        else:
            self._member_event(
                member,
                c.REASON_GUARD_IN_FORCE,
                f"ValidatingAdmissionPolicy {member.guard} refuses fleet's token again: "
                f"{member.name} takes new gangs",
            )
            self.listener.capacity_changed(member.name)

    # -- health ------------------------------------------------------------------------------

    def refresh_health(self, member: Member) -> None:
        ready, reason, message = verdict(
            member.probe, member.sources, self.clock.monotonic(), grace=self.source_grace
        )
        self._set_health(member, ready, reason, message)

    def _set_health(self, member: Member, ready: bool, reason: str, message: str) -> None:
        hint = recovery(member.name, reason)
        if hint is not None:
            # The way back, in the condition an operator reads (kept whole: the error is cut).
            message = f"{message[: max(100, MESSAGE_LIMIT - len(hint) - 2)]}; {hint}"
        before = member.health
        member.health = next_health(before, ready, reason, message, self.clock.monotonic())
        if member.health.reason != before.reason or member.health.ready != before.ready:
            log.info(
                "member %s: %s %s: %s",
                member.name,
                "Ready" if ready else "NotReady",
                reason,
                message,
            )
        # Lost or refusing fleet's credentials: its gangs are judged again either way, for
        # only the first fails them over (fleet.core.failover).
        refusal_changed = credentials_refused(member.health.reason) != credentials_refused(
            before.reason
        )
        if member.health.ready != before.ready or refusal_changed:
            self.listener.health_changed(member.name, ready)
            self._write_status_soon(member)

    # -- MemberCluster status ------------------------------------------------------------------

    def _write_status_soon(self, member: Member) -> None:
        if self._status_task is not None and self.writes_enabled:
            self._in_background(self._write_status(member), f"status-{member.name}")

    async def _status_loop(self) -> None:
        while True:
            await self.write_statuses()
            await asyncio.sleep(self.status_interval)

    async def write_statuses(self) -> None:
        for member in list(self.members.values()):
            await self._write_status(member)

    async def _write_status(self, member: Member) -> None:
        if not self.writes_enabled:
            return
        try:
            await self.status.write(member)
        except (ApiError, Unreachable) as e:
            log.debug("cannot write status of MemberCluster %s: %s", member.name, e)


class _MemberEvents:
    """A connection's reports, applied to its member."""

    def __init__(self, registry: MemberRegistry, member: Member) -> None:
        self.registry = registry
        self.member = member

    def node_event(self, event: str, obj: Obj) -> None:
        if apply_node_event(self.member.snapshot, event, obj):
            self.registry.listener.capacity_changed(self.member.name)

    def pod_event(self, event: str, obj: Obj) -> None:
        usable, gang = apply_pod_event(self.member.snapshot, event, obj, self.member.unscheduled)
        if usable:
            self.registry.listener.capacity_changed(self.member.name)
        if gang is not None:
            self.registry.listener.gang_pods_refused(self.member.name, gang)

    def job_event(self, event: str, obj: Obj) -> None:
        self.registry.listener.job_changed(self.member.name, event, obj)

    def source_health(self, source: str, ok: bool, why: str, refused: bool) -> None:
        state = self.member.sources.setdefault(source, SourceState())
        state.report(ok, why, self.registry.clock.monotonic(), refused=refused)
        self.registry.refresh_health(self.member)

    def detected(self, gang_scheduler: str | None) -> None:
        self.member.gang_probed = True
        if self.member.detected_gang_scheduler != gang_scheduler:
            self.member.detected_gang_scheduler = gang_scheduler
            self.registry.listener.capacity_changed(self.member.name)

    def kinds_found(self) -> None:
        self.registry.listener.capacity_changed(self.member.name)

    def probed(self, ok: bool, why: str, version: str | None, refused: bool) -> None:
        self.member.probe = Probe(ok, why, refused)
        if version:
            self.member.version = version
        self.registry.refresh_health(self.member)


def _created(obj: Obj) -> float | None:
    """A MemberCluster's creationTimestamp in epoch seconds (None: absent or unreadable)."""
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return to_epoch(parse_time(str(stamp))) if stamp else None
    except ValueError:
        return None
