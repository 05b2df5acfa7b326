"""Failover and crash safety on real API servers: jobs move when they fail or their cluster is
lost, and nothing is ever run twice or lost, also when the controller is killed."""

from __future__ import annotations

import datetime as dt
import time
import urllib.request

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
        wait_until(
            lambda: live.copies(namespace, "job") == sorted([first, other]),
            what="both copies while the new one waits",
        )
        time.sleep(4)
        assert live.copies(namespace, "job") == sorted([first, other])  # old copy still kept
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
    second = _fail_and_move(live, namespace, first)
    time.sleep(3)
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
    time.sleep(5)
    status = live.binding(namespace, "job")["status"]
    assert status["failoverCount"] == 1 and status["phase"] == "Pending"


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
    time.sleep(1)
    live.replica(leader).start()

    def settled() -> bool:
        return placed() == len(names) and all(len(live.copies(namespace, n)) == 1 for n in names)

    wait_until(settled, timeout=240, interval=2, what="all 50 jobs placed exactly once")
    for name in names:
        copies = live.copies(namespace, name)
        assert copies == [live.target(namespace, name)], name


def test_restart_mid_window_keeps_the_original_deadline(live: Fleet, namespace, add_nodes):
    toleration = 20
    policy = gang_policy("gang", namespace, toleration_seconds=toleration)
    first = _running_job(live, namespace, add_nodes, policy)
    live.mark(first, namespace, "job", "Failed")

    def since():
        return ((live.binding(namespace, "job") or {}).get("status") or {}).get("unhealthySince")

    started = dt.datetime.fromisoformat(wait_until(since, what="unhealthySince recorded"))
    time.sleep(5)
    for replica in live.replicas:
        replica.kill()
    time.sleep(3)
    for replica in live.replicas:
        replica.start()
    wait_until(lambda: _moved(live, namespace, "job", first), timeout=90, what="failover")
    moved = dt.datetime.fromisoformat(_history(live, namespace, "job")[-1]["time"])
    delay = (moved - started).total_seconds()
    # At the original deadline, give or take the lease takeover, not a full window later.
    assert toleration - 1 <= delay < toleration + LEASE_SECONDS + 4, delay


def test_one_replica_acts_and_a_standby_takes_over(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    leader = live.leader()
    standby = next(r for r in live.replicas if r.identity != leader)
    live.api.create(_job(namespace, "before"))
    wait_until(lambda: live.target(namespace, "before"), what="placement by the leader")
    assert "before: bound by" not in standby.tail(400)

    killed_at = time.monotonic()
    live.replica(leader).kill()
    wait_until(
        lambda: live.leader() == standby.identity,
        timeout=3 * LEASE_SECONDS,
        interval=0.2,
        what="the standby to take the lease",
    )
    takeover = time.monotonic() - killed_at
    live.api.create(_job(namespace, "after"))
    wait_until(
        lambda: live.target(namespace, "after"), timeout=30, what="placement by the new leader"
    )
    assert "after: bound by" in standby.tail(400)
    assert takeover <= LEASE_SECONDS + 4, takeover
    print(f"takeover {takeover:.1f}s after SIGKILL (lease {LEASE_SECONDS}s)")


def test_metrics_endpoint_reports_dispatches_failovers_and_leadership(live: Fleet):
    leader = live.replica(live.leader() or "")
    url = f"http://127.0.0.1:{leader.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for family in (
        "fleet_dispatches_total",
        "fleet_failovers_total",
        "fleet_pending_jobs",
        "fleet_placement_decision_seconds",
        "fleet_leader",
    ):
        assert f"# TYPE {family} " in text
    assert "fleet_leader 1" in text
