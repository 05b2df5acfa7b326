"""Failover and crash safety on real API servers: jobs move when they fail or their cluster is
lost, and nothing is ever run twice or lost, also when the controller is killed."""

from __future__ import annotations

import datetime as dt
import re
import time

from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import LEASE_SECONDS, MEMBERS, Fleet


def _job(namespace: str, name: str, **kw: object) -> dict:
    # restartPolicy Never: a failing pod fails the job, as the training operator rules.
    return pytorchjob(
        name,
        namespace=namespace,
        node_selector={"test": namespace},
        workers=1,
        gpus=1,
        restart_policy="Never",
        **kw,
    )


def _history(live: Fleet, namespace: str, name: str) -> list[dict]:
    return ((live.binding(namespace, name) or {}).get("status") or {}).get("failoverHistory") or []


def _moved(live: Fleet, namespace: str, name: str, away_from: str) -> str | None:
    target = live.target(namespace, name)
    return target if target and target != away_from else None


def _copy_state(live: Fleet, namespace: str, name: str, cluster: str) -> str | None:
    """The state of the job's copy in `cluster`, as the binding's aggregatedStatus has it."""
    status = (live.binding(namespace, name) or {}).get("status") or {}
    for entry in status.get("aggregatedStatus") or []:
        if entry.get("clusterName") == cluster:
            return entry.get("jobState")
    return None


def _running_job(live: Fleet, namespace: str, add_nodes, policy: dict) -> str:
    """Room in member-1 and member-2, the policy, and job `job` running; returns its member."""
    for member in ("member-1", "member-2"):
        add_nodes(member, count=1, gpu=4, labels={"test": namespace})
    live.api.create(policy)
    live.api.create(_job(namespace, "job"))
    first = wait_until(lambda: live.target(namespace, "job"), what="placement")
    live.wait_running(namespace, "job", first)
    return first


def _fail_and_move(live: Fleet, namespace: str, first: str, *, running: bool = True) -> str:
    """Fail job `job` in `first`; return the member it moved to (running there if asked)."""
    live.mark(first, namespace, "job", "Failed")
    second = wait_until(lambda: _moved(live, namespace, "job", first), timeout=60, what="failover")
    if running:
        live.wait_running(namespace, "job", second)
    return second


def test_immediately_deletes_the_failed_copy_and_runs_elsewhere(live: Fleet, namespace, add_nodes):
    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy("gang", namespace, toleration_seconds=2, purge_mode="Immediately"),
    )

    second = _fail_and_move(live, namespace, first)
    assert live.copies(namespace, "job") == [second]
    history = _history(live, namespace, "job")
    assert [(h["fromCluster"], h["reason"]) for h in history] == [(first, "ApplicationFailure")]
    reasons = [r for r, _, _ in live.events(namespace, "job")]
    assert "FailoverTriggered" in reasons
    assert reasons.count("ScheduleBindingSucceed") == 2


def test_graciously_keeps_the_old_copy_until_the_new_one_runs(live: Fleet, namespace, add_nodes):
    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy(
            "gang",
            namespace,
            toleration_seconds=2,
            purge_mode="Graciously",
            grace_period_seconds=600,
        ),
    )
    other = next(m for m in ("member-1", "member-2") if m != first)

    # The new home cannot start the gang yet: its scheduler is down.
    live.sandbox.stop_component(other, "kube-scheduler")
    try:
        _fail_and_move(live, namespace, first, running=False)
        # The new copy's state mirrored into the binding: the reconcile that mirrored it had
        # already decided about the old copy, with the new one not running.
        wait_until(
            lambda: _copy_state(live, namespace, "job", other) == "Created",
            what=f"the new copy in {other} mirrored as Created",
        )
        assert live.copies(namespace, "job") == sorted([first, other])  # old copy still kept
        tasks = live.binding(namespace, "job")["spec"]["gracefulEvictionTasks"]
        assert [t["fromCluster"] for t in tasks] == [first]
    finally:
        live.sandbox.start_component(other, "kube-scheduler")
    live.wait_running(namespace, "job", other)
    wait_until(
        lambda: live.copies(namespace, "job") == [other],
        timeout=60,
        what="the old copy deleted once the new one runs",
    )


def test_never_leaves_the_old_copy_for_a_person(live: Fleet, namespace, add_nodes):
    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy("gang", namespace, toleration_seconds=2, purge_mode="Never"),
    )
    # Running on the fleet is mirrored by a reconcile that first decided about the old copy.
    second = _fail_and_move(live, namespace, first)
    assert live.copies(namespace, "job") == sorted([first, second])
    assert any("left in place" in m for _, m, _ in live.events(namespace, "job"))


def test_a_lost_member_is_failed_over_and_its_stale_copy_fenced(live: Fleet, namespace, add_nodes):
    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy("gang", namespace, toleration_seconds=3, purge_mode="Immediately"),
    )

    lost_at = time.monotonic()
    live.sandbox.stop_cluster(first, abrupt=True)
    try:
        second = wait_until(
            lambda: _moved(live, namespace, "job", first),
            timeout=60,
            what="failover away from the lost member",
        )
        moved_after = time.monotonic() - lost_at
        assert moved_after >= 3  # not before tolerationSeconds
        live.wait_running(namespace, "job", second)
        history = _history(live, namespace, "job")
        assert history[-1]["reason"] == "ClusterLost"
    finally:
        live.sandbox.start_cluster(first)
    # The member comes back still holding the old copy: fleet deletes it and says so.
    wait_until(
        lambda: live.copies(namespace, "job") == [second], timeout=90, what="the stale copy fenced"
    )
    assert any(r == "StaleCopyDeleted" for r, _, _ in live.events(namespace, "job"))
    print(f"failover {moved_after:.1f}s after the member was lost (tolerationSeconds 3)")


def test_failover_limit_fails_the_job_on_the_fleet_with_its_history(
    live: Fleet, namespace, add_nodes
):
    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy(
            "gang", namespace, toleration_seconds=1, purge_mode="Immediately", max_failovers=1
        ),
    )
    second = _fail_and_move(live, namespace, first)
    live.mark(second, namespace, "job", "Failed")

    def failed_on_fleet():
        job = live.job(namespace, "job")
        conds = (job.get("status") or {}).get("conditions") or []
        return next(
            (
                c
                for c in conds
                if c["type"] == "Failed" and c.get("reason") == "FailoverLimitReached"
            ),
            None,
        )

    condition = wait_until(failed_on_fleet, timeout=60, what="Failed on the fleet")
    assert "maxFailovers 1" in condition["message"] and first in condition["message"]
    assert live.state(namespace, "job") == "Failed"
    assert live.binding(namespace, "job")["status"]["phase"] == "Failed"


def test_a_single_member_fleet_waits_with_a_reason_instead_of_looping(
    live: Fleet, namespace, add_nodes
):
    add_nodes("member-3", count=1, gpu=4, labels={"test": namespace})
    policy = gang_policy("gang", namespace, toleration_seconds=1, cluster_names=["member-3"])
    live.api.create(policy)
    live.api.create(_job(namespace, "job"))
    wait_until(lambda: live.target(namespace, "job") == "member-3", what="placement")
    live.wait_running(namespace, "job", "member-3")
    live.mark("member-3", namespace, "job", "Failed")

    def pending():
        status = (live.binding(namespace, "job") or {}).get("status") or {}
        return status.get("pendingReasons") if status.get("phase") == "Pending" else None

    reasons = wait_until(pending, timeout=60, what="pending after the failover")
    by_cluster = {r["cluster"]: r["reason"] for r in reasons}
    assert "failed over from it" in by_cluster["member-3"]
    # Make fleet place it again: a policy edit, synced into the binding, that changes nothing
    # about where it may go. Once fleet has acted on it, the job still waits.
    generation = live.binding(namespace, "job")["metadata"]["generation"]
    tolerate = {"key": "unrelated", "operator": "Exists", "effect": "NoSchedule"}
    live.api.patch(
        "policy.one.alibabacloud.com/v1alpha1",
        "PropagationPolicy",
        "gang",
        {"spec": {"placement": {"clusterTolerations": [tolerate]}}},
        namespace,
    )
    binding = live.observed(namespace, "job", after=generation)
    assert binding["spec"]["placement"]["clusterTolerations"] == [tolerate]
    status = binding["status"]
    assert status["failoverCount"] == 1 and status["phase"] == "Pending"
    assert [(e["name"], e.get("until")) for e in status["excludedClusters"]] == [("member-3", None)]


def test_controller_killed_during_a_burst_never_duplicates_or_loses_a_job(
    live: Fleet, namespace, add_nodes
):
    for member in MEMBERS:
        add_nodes(member, count=1, gpu=40, cpu="400", labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    names = [f"burst-{i:02d}" for i in range(50)]
    for name in names:
        live.api.create(_job(namespace, name))

    def placed() -> int:
        bindings = live.api.items("fleet.dev/v1alpha1", "GangBinding", namespace)
        return sum(1 for b in bindings if (b.get("spec") or {}).get("clusters"))

    wait_until(lambda: placed() >= 8, timeout=60, what="some dispatches")
    leader = live.leader()
    assert leader is not None
    live.replica(leader).kill()  # SIGKILL mid-burst: no cleanup, no lease release
    live.replica(leader).start()

    def settled() -> bool:
        return placed() == len(names) and all(len(live.copies(namespace, n)) == 1 for n in names)

    wait_until(settled, timeout=240, interval=2, what="all 50 jobs placed exactly once")
    for name in names:
        copies = live.copies(namespace, name)
        assert copies == [live.target(namespace, name)], name


def test_restart_mid_window_keeps_the_original_deadline(live: Fleet, namespace, add_nodes):
    """The toleration window runs from when fleet first saw the failure, as the binding
    records it, not from when a controller (re)started."""
    toleration = 20
    policy = gang_policy("gang", namespace, toleration_seconds=toleration)
    first = _running_job(live, namespace, add_nodes, policy)
    live.mark(first, namespace, "job", "Failed")

    def since():
        return ((live.binding(namespace, "job") or {}).get("status") or {}).get("unhealthySince")

    started = _utc(wait_until(since, what="unhealthySince recorded"))
    for replica in live.replicas:
        replica.kill()
    # No controller runs while the deadline passes; they come back after it.
    deadline = started + dt.timedelta(seconds=toleration)
    wait_until(
        lambda: _now() > deadline + dt.timedelta(seconds=1),
        timeout=toleration + 5,
        what="the original deadline to pass",
    )
    restarted = _now()
    for replica in live.replicas:
        replica.start()
    wait_until(lambda: _moved(live, namespace, "job", first), timeout=90, what="failover")
    moved = _utc(_history(live, namespace, "job")[-1]["time"])
    assert moved >= deadline  # never before the window ends

    # Which window was used: the failover says how long the job had been Failed. Counted from
    # the recorded start, that is since `started`; a window restarted with the controllers
    # would have begun after `restarted`, 21s or more later. (However slow the new leader is
    # to get there, the start it counted from is what the message and the move time give.)
    def held_for() -> int | None:
        for reason, message, _ in live.events(namespace, "job"):
            found = re.search(r"for (\d+)s \(tolerationSeconds", message)
            if reason == "FailoverTriggered" and found:
                return int(found[1])
        return None

    counted_from = moved - dt.timedelta(seconds=wait_until(held_for, what="the failover event"))
    assert abs((counted_from - started).total_seconds()) <= 3, (started, counted_from, restarted)
    assert restarted - started >= dt.timedelta(seconds=toleration + 1)


def _utc(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def test_one_replica_acts_and_a_standby_takes_over(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    leader = live.leader()
    assert leader is not None
    standby = next(r for r in live.replicas if r.identity != leader)
    standby_dispatches = live.metrics(standby.identity).value("fleet_dispatches_total")
    live.api.create(_job(namespace, "before"))
    # The event follows the binding's write: wait for it, then see who posted it.
    posted = wait_until(lambda: _instances(live, namespace, "before"), what="the placement event")
    assert posted == {leader}
    assert live.metrics(standby.identity).value("fleet_leader") == 0
    assert live.metrics(standby.identity).value("fleet_dispatches_total") == standby_dispatches

    killed_at = time.monotonic()
    live.replica(leader).kill()
    wait_until(
        lambda: live.leader() == standby.identity,
        timeout=10 * LEASE_SECONDS,
        interval=0.2,
        what="the standby to take the lease",
    )
    takeover = time.monotonic() - killed_at
    live.api.create(_job(namespace, "after"))
    posted = wait_until(lambda: _instances(live, namespace, "after"), what="the placement event")
    assert posted == {standby.identity}
    assert live.metrics(standby.identity).value("fleet_leader") == 1
    assert live.metrics(standby.identity).value("fleet_dispatches_total") == standby_dispatches + 1
    print(f"takeover {takeover:.1f}s after SIGKILL (lease {LEASE_SECONDS}s)")


def _instances(live: Fleet, namespace: str, name: str) -> set[str]:
    """The replicas that posted the job's ScheduleBindingSucceed events."""
    return {
        e.get("reportingInstance", "")
        for e in live.api.events(namespace, name)
        if e["reason"] == "ScheduleBindingSucceed"
    }


def test_metrics_count_dispatches_failovers_reconciles_and_requests(
    live: Fleet, namespace, add_nodes
):
    """Counters move by what the test did: one dispatch per placement, one failover, the
    binding and the member copy written, on the replica that leads."""
    # The counters are the controller's, for every namespace: the jobs of earlier tests whose
    # namespaces are still being deleted would move them too (a binding recreated and refused
    # while its namespace terminates), so they are gone first.
    wait_until(
        lambda: (
            not [
                ns
                for ns in live.api.items("v1", "Namespace")
                if ns["metadata"]["name"] != namespace
                and (ns.get("status") or {}).get("phase") == "Terminating"
            ]
        ),
        timeout=180,
        what="the namespaces of earlier tests deleted",
    )
    leader = live.leader()
    assert leader is not None
    before = live.metrics(leader)
    assert before.value("fleet_leader") == 1 and "fleet_api_requests_total" in before.families()

    first = _running_job(
        live,
        namespace,
        add_nodes,
        gang_policy("gang", namespace, toleration_seconds=1, purge_mode="Immediately"),
    )
    second = _fail_and_move(live, namespace, first)
    assert live.leader() == leader, "the leader changed: the counters are another replica's"
    after = live.metrics(leader)

    def delta(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert delta("fleet_dispatches_total", cluster=first) == 1
    assert delta("fleet_dispatches_total", cluster=second) == 1
    assert delta("fleet_failovers_total", reason="ApplicationFailure") == 1
    assert delta("fleet_failovers_total") == 1
    assert delta("fleet_placement_decision_seconds_count") >= 2
    assert delta("fleet_reconciles_total", outcome="ok") >= 3
    binding_creates = delta(
        "fleet_api_requests_total", server="fleet", verb="CREATE", resource="gangbindings"
    )
    assert binding_creates == 1
    for member in (first, second):  # each member copy created once
        creates = delta(
            "fleet_api_requests_total", server=member, verb="CREATE", resource="pytorchjobs"
        )
        assert creates == 1, member
    assert (
        delta("fleet_api_requests_total", server=first, verb="DELETE", resource="pytorchjobs") >= 1
    )
