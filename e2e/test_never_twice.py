"""Never twice, on real API servers: the paths on which fleet promises that two clusters never
hold a job at once, and the one where they may (a lost member), fenced however it comes back
(docs/controller.md, "Never twice: the ledger, and exactly when two clusters can hold a job").

Each test samples what the members hold (once a second, for a bounded time) and fails on the
first sample that sees the job's pods in two clusters.

The tests that take a member away (its credential revoked, its cluster killed and its
MemberCluster deleted) do it to the spare cluster of e2e/test_join.py (the Koordinator member,
joined by no MemberCluster outside the modules about it), joined under names of their own and
unjoined afterwards: member-1..3, which the session joined, stay as conftest made them.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.api import constants as c
from fleet.api.conditions import condition_of
from fleet.install import SECRETS_NAMESPACE
from fleet.kube import Conflict, NotFound
from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy

from .conftest import MEMBER_CLUSTER, PYTORCHJOB, Fleet
from .test_failover import _moved, _running_job
from .test_join import SPARE, _cluster_id, _join_spare, _ready_condition, _remove_identity
from .test_join import _placeable as _probe_placed
from .test_join import _running_in as _running_in_spare

#: At most one sample a second: each lists the job's pods in every member.
SAMPLE_SECONDS = 1.0
#: A finalizer of the tests' own that keeps a pod Terminating (kwok deletes a pod the moment it
#: has a deletionTimestamp, whatever its terminationGracePeriodSeconds: its fleet-pod-delete
#: stage), as a pod whose containers take long to stop.
HOLD = "e2e.fleet.dev/hold"
TAINT_KEY = "e2e.fleet.dev/never-twice"


# -- what the members hold ---------------------------------------------------------------------


def _uid(live: Fleet, namespace: str, name: str) -> str:
    """The fleet job's UID: the fleet-uid label of its copies and their pods."""
    job = live.job(namespace, name)
    assert job is not None, f"{namespace}/{name} not on the fleet"
    return str(job["metadata"]["uid"])


def _pods(live: Fleet, member: str, namespace: str, uid: str) -> list[dict[str, Any]]:
    """The job's pods in `member` (by its fleet-uid label), in any phase."""
    return live.clusters[member].pods(namespace, f"{c.FLEET_UID_LABEL}={uid}")


def _terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _alive(pod: dict[str, Any]) -> bool:
    """A pod that runs, may run, or is still stopping (Terminating)."""
    return _terminating(pod) or pod["status"].get("phase") not in ("Succeeded", "Failed")


def _running(pod: dict[str, Any]) -> bool:
    return bool(pod["status"].get("phase") == "Running")


def _holding(
    live: Fleet, namespace: str, uid: str, members: list[str], keep: Any = _alive
) -> dict[str, list[dict[str, Any]]]:
    """The members among `members` with pods of the job that `keep` says count, and those pods."""
    found = {m: [p for p in _pods(live, m, namespace, uid) if keep(p)] for m in members}
    return {m: pods for m, pods in found.items() if pods}


def _copy_in(live: Fleet, member: str, namespace: str, name: str, uid: str) -> bool:
    """Whether `member` holds a copy of the job (its fleet-uid label is the job's)."""
    copy = live.clusters[member].get(*PYTORCHJOB, name, namespace) or {}
    labels = (copy.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(c.FLEET_UID_LABEL) == uid)


def _binding_condition(live: Fleet, namespace: str, name: str, type_: str) -> dict[str, Any]:
    binding = live.binding(namespace, name) or {}
    return condition_of((binding.get("status") or {}).get("conditions"), type_)


def _evictions(live: Fleet, namespace: str, name: str) -> list[dict[str, Any]]:
    binding = live.binding(namespace, name) or {}
    return list((binding.get("spec") or {}).get("gracefulEvictionTasks") or [])


def _outside(live: Fleet, cluster: str, state: str) -> float | None:
    """The leader's fleet_copies_outside_target for (cluster, state); None while no replica
    answers for the lease's holder (a restarted one not serving yet)."""
    try:
        metrics = live.metrics()
    except (OSError, StopIteration):
        return None
    return metrics.value("fleet_copies_outside_target", cluster=cluster, state=state)


# -- the spare cluster, joined under names of the test's own ------------------------------------


class Spare:
    """The spare cluster joined under names of the test's own, all with one identity namespace
    there; taken down and brought back by the test."""

    def __init__(self, live: Fleet) -> None:
        self.live = live
        suffix = secrets.token_hex(2)
        self.prefix = f"nt-{suffix}"
        self.namespace = f"fleet-nt-{suffix}"
        self.names: list[str] = []
        self.down = False

    def join(self, name: str) -> str:
        """Join the spare cluster as `<prefix>-<name>` (or re-join it); that name."""
        full = name if name.startswith(self.prefix) else f"{self.prefix}-{name}"
        if full not in self.names:
            self.names.append(full)
        _join_spare(self.live, full, self.namespace)
        return full

    def stop(self) -> None:
        self.down = True
        self.live.sandbox.stop_cluster(SPARE, abrupt=True)

    def start(self) -> None:
        self.live.sandbox.start_cluster(SPARE)
        self.down = False

    def _gone(self, name: str) -> bool:
        return self.live.api.get(*MEMBER_CLUSTER, name) is None

    def restore(self) -> None:
        """As the test found it: the cluster up, joined under no name, no identity of ours."""
        if self.down:
            self.start()
        for name in self.names:
            self.live.api.delete(*MEMBER_CLUSTER, name)
            self.live.api.delete("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
        for name in self.names:
            wait_until(functools.partial(self._gone, name), what=f"MemberCluster {name} deleted")
        _remove_identity(self.live.clusters[SPARE], self.namespace)


def _placeable(live: Fleet, namespace: str, name: str) -> None:
    """Wait until fleet places gangs in member `name`: Ready (which a member that has just
    connected says only once the collector has fenced it), then a probe gang placed there
    (test_join's)."""
    wait_until(lambda: _ready_condition(live, name), timeout=90, what=f"{name} Ready")
    _probe_placed(live, name, namespace)


@pytest.fixture
def spare(live: Fleet, namespace: str) -> Iterator[Spare]:
    """The spare cluster for one test, restored afterwards whatever the test left (before the
    test's namespace is deleted: a cluster still down could not delete it)."""
    handle = Spare(live)
    try:
        yield handle
    finally:
        handle.restore()


# -- 1. a member that answers but refuses fleet's credentials -------------------------------------


def test_a_member_refusing_fleets_credentials_keeps_its_gang_and_it_never_runs_twice(
    live: Fleet, namespace: str, spare: Spare
) -> None:
    """fleet's ServiceAccount deleted in the member running a gang: the member says why
    (CredentialsRefused), the binding too, and for 120 s (25 times the toleration) the gang
    stays there and no sample sees its pods Running in two members; re-joined, the member is
    Ready again with the gang where it was."""
    name = spare.join("refusing")
    _placeable(live, namespace, name)
    _running_in_spare(live, name, namespace, SPARE)  # tolerationSeconds 5, then member-1
    uid = _uid(live, namespace, "train")
    members = live.sandbox.members()

    def sample(n: int) -> None:
        running = sorted(_holding(live, namespace, uid, members, keep=_running))
        assert len(running) <= 1, f"sample {n}: the gang's pods Running in {running}"
        assert live.target(namespace, "train") == name, f"sample {n}: the gang was moved"
        copies = [m for m in members if _copy_in(live, m, namespace, "train", uid)]
        assert copies == [SPARE], f"sample {n}: copies in {copies}"

    live.clusters[SPARE].delete("v1", "ServiceAccount", "fleet", spare.namespace)
    revoked = time.monotonic()
    seen: dict[str, float] = {}
    samples = 0
    while time.monotonic() - revoked < 120:
        sample(samples)
        samples += 1
        ready = live.member_condition(name) or {}
        if (ready.get("status"), ready.get("reason")) == ("False", c.REASON_CREDENTIALS_REFUSED):
            seen.setdefault("member", time.monotonic() - revoked)
        healthy = _binding_condition(live, namespace, "train", c.CONDITION_HEALTHY)
        if (healthy.get("status"), healthy.get("reason")) == (
            "Unknown",
            c.REASON_CREDENTIALS_REFUSED,
        ):
            seen.setdefault("binding", time.monotonic() - revoked)
        time.sleep(SAMPLE_SECONDS)
    assert "member" in seen, f"{name} never NotReady CredentialsRefused: {ready}"
    assert "binding" in seen, f"the binding never said CredentialsRefused: {healthy}"
    ready = live.member_condition(name) or {}
    assert (ready["status"], ready["reason"]) == ("False", c.REASON_CREDENTIALS_REFUSED), ready
    healthy = _binding_condition(live, namespace, "train", c.CONDITION_HEALTHY)
    assert (healthy["status"], healthy["reason"]) == ("Unknown", c.REASON_CREDENTIALS_REFUSED)
    assert name in healthy["message"], healthy

    # The credential restored the way the Ready message says: the same join again.
    spare.join(name)
    rejoined = time.monotonic()
    while (ready := live.member_condition(name) or {}).get("status") != "True":
        assert time.monotonic() - rejoined < 90, f"{name} not Ready again: {ready}"
        sample(samples)
        samples += 1
        time.sleep(SAMPLE_SECONDS)
    ready_after = time.monotonic() - rejoined
    sample(samples)
    assert sorted(_holding(live, namespace, uid, members, keep=_running)) == [SPARE]
    print(
        f"{samples} samples; NotReady CredentialsRefused {seen['member']:.0f}s and the "
        f"binding's Healthy Unknown {seen['binding']:.0f}s after the ServiceAccount was "
        f"deleted; Ready {ready_after:.0f}s after the re-join"
    )


# -- 2. a lost member deleted, the controller restarted, the cluster back under a new name ------


def test_a_lost_members_copy_is_fenced_when_its_cluster_joins_again_under_a_new_name(
    live: Fleet, namespace: str, spare: Spare
) -> None:
    """The member of a running gang is killed; the gang fails over; the MemberCluster is
    deleted, the controller restarted, and the cluster comes back joined under a new name: its
    old copy is deleted within a resync, the eviction that recorded it (by the cluster's
    identity) ends, and the binding shows it all along."""
    first = spare.join("lost")
    _placeable(live, namespace, first)
    _running_in_spare(live, first, namespace, SPARE)  # tolerationSeconds 5, then member-1
    uid = _uid(live, namespace, "train")
    identity = _cluster_id(live, SPARE)

    spare.stop()
    lost = time.monotonic()
    second = wait_until(
        lambda: _moved(live, namespace, "train", first), timeout=90, what="failover"
    )
    failover_after = time.monotonic() - lost
    assert second == "member-1"
    live.wait_running(namespace, "train", second)
    evictions = [
        (e["fromCluster"], e.get("clusterId")) for e in _evictions(live, namespace, "train")
    ]
    assert evictions == [(first, identity)], "the lost copy is not on record by its cluster"

    live.api.delete(*MEMBER_CLUSTER, first)
    wait_until(lambda: live.api.get(*MEMBER_CLUSTER, first) is None, what=f"{first} deleted")

    def unfenced() -> dict[str, Any] | None:
        condition = _binding_condition(live, namespace, "train", c.CONDITION_OLD_COPIES_REMOVED)
        shown = (condition.get("status"), condition.get("reason")) == ("False", "CopyUnfenced")
        return condition if shown and _outside(live, first, "Unreachable") == 1 else None

    condition = wait_until(unfenced, timeout=60, what="the unfenced copy shown")
    assert first in condition["message"] and identity in condition["message"], condition

    for replica in live.replicas:
        replica.kill()
    for replica in live.replicas:
        replica.start()
    wait_until(live.leading, timeout=60, what="a leading controller")
    # The restarted controller knows the copy from the binding alone: no MemberCluster names it.
    condition = wait_until(unfenced, timeout=60, what="the unfenced copy shown after a restart")
    assert first in condition["message"] and identity in condition["message"], condition
    assert _evictions(live, namespace, "train")[0]["clusterId"] == identity
    assert live.copies(namespace, "train") == [second]

    spare.start()
    # Nothing reaches it yet: it still holds the old copy and its pods.
    assert _copy_in(live, SPARE, namespace, "train", uid)
    assert _pods(live, SPARE, namespace, uid)
    again = spare.join("again")
    joined = time.monotonic()
    samples = 0
    while True:
        samples += 1
        assert live.copies(namespace, "train") == [second], f"sample {samples}"
        condition = _binding_condition(live, namespace, "train", c.CONDITION_OLD_COPIES_REMOVED)
        fenced = (
            not _copy_in(live, SPARE, namespace, "train", uid)
            and not _pods(live, SPARE, namespace, uid)
            and not _evictions(live, namespace, "train")
            and (condition.get("status"), condition.get("reason")) == ("True", "NoOldCopies")
        )
        if fenced:
            break
        assert time.monotonic() - joined < 60, (
            f"not fenced within 60s of the join as {again}: copy "
            f"{_copy_in(live, SPARE, namespace, 'train', uid)}, pods "
            f"{len(_pods(live, SPARE, namespace, uid))}, evictions "
            f"{_evictions(live, namespace, 'train')}, OldCopiesRemoved {condition}"
        )
        time.sleep(SAMPLE_SECONDS)
    fenced_after = time.monotonic() - joined
    running = _holding(live, namespace, uid, [second], keep=_running)
    assert list(running) == [second] and len(running[second]) == 2  # Master and Worker
    assert live.target(namespace, "train") == second
    wait_until(
        lambda: _outside(live, first, "Unreachable") == 0,
        what=f"fleet_copies_outside_target for {first} back to 0",
    )
    assert any(
        r == "StaleCopyDeleted" and again in m for r, m, _ in live.events(namespace, "train")
    )
    print(
        f"failover {failover_after:.1f}s after the cluster was lost; old copy fenced "
        f"{fenced_after:.1f}s after the join as {again} ({samples} samples)"
    )


# -- 3. Immediately off a NoExecute taint, the old pods slow to stop ------------------------------


def _release(live: Fleet, member: str, namespace: str, uid: str) -> int:
    """Take HOLD off the job's pods in `member`; how many held it."""
    released = 0
    for pod in _pods(live, member, namespace, uid):
        finalizers = pod["metadata"].get("finalizers") or []
        if HOLD not in finalizers:
            continue
        patch = {
            "metadata": {
                "finalizers": [f for f in finalizers if f != HOLD],
                "resourceVersion": pod["metadata"]["resourceVersion"],
            }
        }
        with contextlib.suppress(NotFound, Conflict):  # changed meanwhile: the next sample
            live.clusters[member].patch("v1", "Pod", pod["metadata"]["name"], patch, namespace)
            released += 1
    return released


def test_immediately_never_starts_the_gang_elsewhere_while_its_old_pods_terminate(
    live: Fleet, namespace: str, add_nodes: Callable[..., list[str]]
) -> None:
    """purgeMode Immediately, the gang's member tainted NoExecute, its pods Terminating for
    10 s: no sample sees the job's pods (or copies) in two clusters, and the gang ends up
    running in the other member."""
    policy = gang_policy("gang", namespace, toleration_seconds=2, purge_mode="Immediately")
    first = _running_job(live, namespace, add_nodes, policy)
    other = next(m for m in ("member-1", "member-2") if m != first)
    uid = _uid(live, namespace, "job")
    members = live.sandbox.members()
    for pod in _pods(live, first, namespace, uid):
        live.clusters[first].patch(
            "v1", "Pod", pod["metadata"]["name"], {"metadata": {"finalizers": [HOLD]}}, namespace
        )

    tainted = time.monotonic()
    taints = (live.api.get(*MEMBER_CLUSTER, first) or {}).get("spec", {}).get("taints")
    live.api.patch(
        *MEMBER_CLUSTER,
        first,
        {"spec": {"taints": [{"key": TAINT_KEY, "value": namespace, "effect": "NoExecute"}]}},
    )
    at: dict[str, float] = {}  # what happened, seconds after the taint
    reasons: set[str] = set()
    samples = 0
    try:
        while True:
            now = time.monotonic() - tainted
            assert now < 150, f"the gang not running in {other} 150s after the taint: {at}"
            holding = _holding(live, namespace, uid, members)
            samples += 1
            assert len(holding) <= 1, f"sample {samples} ({now:.0f}s): pods in {sorted(holding)}"
            copies = [m for m in members if _copy_in(live, m, namespace, "job", uid)]
            assert len(copies) <= 1, f"sample {samples} ({now:.0f}s): copies in {copies}"
            old = holding.get(first) or []
            if any(_terminating(p) for p in old):
                at.setdefault("terminating", now)
                reason = _binding_condition(
                    live, namespace, "job", c.CONDITION_OLD_COPIES_REMOVED
                ).get("reason")
                reasons.add(str(reason))
                held = now - at["terminating"] >= 10 and "released" not in at
                if held and _release(live, first, namespace, uid):
                    at["released"] = now
            if holding.get(other):
                at.setdefault("elsewhere", now)
                if all(_running(p) for p in holding[other]):
                    at["running"] = now
                    break
            time.sleep(SAMPLE_SECONDS)
    finally:
        _release(live, first, namespace, uid)
        live.api.patch(*MEMBER_CLUSTER, first, {"spec": {"taints": taints}})
        live.member_taken_in(first)
    assert "released" in at, f"the old pods were never held Terminating: {at}"
    assert at["elsewhere"] >= at["released"], at
    assert "CopyDeleting" in reasons, f"OldCopiesRemoved while the pods terminated: {reasons}"
    live.wait_running(namespace, "job", other)
    assert live.target(namespace, "job") == other
    history = ((live.binding(namespace, "job") or {}).get("status") or {}).get("failoverHistory")
    assert [(h["fromCluster"], h["reason"]) for h in history or []] == [(first, "TaintUntolerated")]
    assert live.copies(namespace, "job") == [other]
    print(
        f"{samples} samples; old pods Terminating {at['terminating']:.0f}s after the taint, "
        f"released at {at['released']:.0f}s; pods in {other} at {at['elsewhere']:.0f}s, "
        f"all Running at {at['running']:.0f}s"
    )
