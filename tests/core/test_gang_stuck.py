"""A gang that does not start in its member: the clock, the deadline, the failover it leads to,
and the index of refused pods it is seen by."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fleet.core import lifecycle
from fleet.core.failover import (
    CLEAR,
    DEFAULT_GANG_SCHEDULE_TIMEOUT_SECONDS,
    UNCHARGED_REASONS,
    FailoverSettings,
    GiveUp,
    Move,
    Observation,
    Stay,
    Timers,
    gang_deadline,
    judge,
)
from fleet.core.inventory import PodInfo, pod_from_k8s
from fleet.core.resources import EMPTY
from fleet.core.unscheduled import UnscheduledPods

SAID = "1 pod not scheduled (pod w-0: 0/3 nodes are available: 3 Insufficient cpu.)"
REFUSED = Observation(cluster_ready=True, gang_unschedulable=SAID)
STARTED = Observation(cluster_ready=True)
SETTINGS = FailoverSettings(
    toleration_seconds=30, purge_mode="Directly", gang_schedule_timeout_seconds=60
)


def test_the_clock_starts_at_the_first_refusal_and_nothing_is_said_before_the_deadline():
    first = judge(SETTINGS, REFUSED, CLEAR, now=100.0)
    assert first == Stay(Timers(gang_unschedulable_since=100.0), recheck_at=160.0)
    again = judge(SETTINGS, REFUSED, first.timers, now=159.0)
    assert isinstance(again, Stay) and again.stuck is None
    assert again.timers.gang_unschedulable_since == 100.0


def test_past_the_deadline_it_is_stuck_then_fails_over_after_toleration():
    timers = Timers(gang_unschedulable_since=100.0)
    stuck = judge(SETTINGS, REFUSED, timers, now=160.0, cluster="member-1")
    assert isinstance(stuck, Stay)
    assert stuck.stuck is not None and SAID in stuck.stuck and "member-1" in stuck.stuck
    assert stuck.recheck_at == 190.0  # deadline + tolerationSeconds
    assert "tolerationSeconds" in (stuck.waiting or "")
    assert isinstance(judge(SETTINGS, REFUSED, timers, now=189.9), Stay)
    moved = judge(SETTINGS, REFUSED, timers, now=190.0, cluster="member-1")
    assert isinstance(moved, Move) and moved.reason == "GangUnschedulable"
    assert SAID in moved.message and "member-1" in moved.message


def test_a_gang_that_starts_in_time_clears_the_clock():
    timers = judge(SETTINGS, REFUSED, CLEAR, now=0.0).timers
    assert judge(SETTINGS, STARTED, timers, now=59.0) == Stay(CLEAR)
    # Refused again later: a new window, not the old one.
    again = judge(SETTINGS, REFUSED, CLEAR, now=100.0)
    assert again.timers.gang_unschedulable_since == 100.0 and not isinstance(again, Move)


def test_a_running_copy_is_never_stuck_even_with_a_pod_refused():
    running = Observation(cluster_ready=True, job_running=True, gang_unschedulable=SAID)
    assert judge(SETTINGS, running, Timers(gang_unschedulable_since=0.0), now=1e6) == Stay(CLEAR)


def test_a_failed_copy_is_judged_as_failed_not_as_stuck():
    failed = Observation(cluster_ready=True, job_failed=True, gang_unschedulable=SAID)
    verdict = judge(SETTINGS, failed, Timers(gang_unschedulable_since=0.0), now=1e6)
    assert isinstance(verdict, Stay) and verdict.timers == Timers(unhealthy_since=1e6)


def test_it_counts_against_max_failovers():
    assert "GangUnschedulable" not in UNCHARGED_REASONS
    settings = FailoverSettings(
        toleration_seconds=0, gang_schedule_timeout_seconds=0, max_failovers=1
    )
    verdict = judge(settings, REFUSED, CLEAR, now=5.0, failovers=1)
    assert isinstance(verdict, GiveUp) and verdict.reason == "GangUnschedulable"


def test_without_application_failover_it_is_stuck_but_stays():
    settings = FailoverSettings(on_job_failure=False, gang_schedule_timeout_seconds=10)
    verdict = judge(settings, REFUSED, Timers(gang_unschedulable_since=0.0), now=1e6)
    assert isinstance(verdict, Stay) and verdict.stuck is not None and verdict.recheck_at is None


def test_the_clock_stands_while_the_copy_cannot_be_seen():
    timers = Timers(gang_unschedulable_since=7.0)
    lost = judge(SETTINGS, Observation(cluster_ready=False), timers, now=10.0)
    assert lost.timers.gang_unschedulable_since == 7.0  # type: ignore[union-attr]
    unsynced = judge(SETTINGS, Observation(cluster_ready=True, job_failed=None), timers, now=10)
    assert unsynced.timers.gang_unschedulable_since == 7.0  # type: ignore[union-attr]


def test_the_deadline_is_the_policy_s_else_the_job_s_else_the_default():
    assert gang_deadline(FailoverSettings(gang_schedule_timeout_seconds=30), 90.0) == 30
    assert gang_deadline(FailoverSettings(), 90.0) == 90
    assert gang_deadline(FailoverSettings(), None) == DEFAULT_GANG_SCHEDULE_TIMEOUT_SECONDS
    # No failover settings at all: still the default deadline for the Healthy condition.
    verdict = judge(None, REFUSED, Timers(gang_unschedulable_since=0.0), now=300.0)
    assert isinstance(verdict, Stay) and verdict.stuck is not None


def test_a_failover_for_it_is_the_application_s():
    settings = FailoverSettings(purge_mode="Directly", cluster_purge_mode="Never")
    assert settings.purge_mode_for("GangUnschedulable") == "Directly"
    binding = lifecycle.Binding(cluster="member-1", phase="Dispatched")
    moved = lifecycle.failed_over(
        binding, Move("GangUnschedulable", "stuck"), settings, 10.0, old_cluster_reachable=True
    )
    assert moved.binding.failover_count == 1
    assert moved.binding.timers == CLEAR


observations = st.builds(
    Observation,
    cluster_ready=st.just(True),
    job_failed=st.just(False),
    job_running=st.booleans(),
    gang_unschedulable=st.one_of(st.none(), st.just(SAID)),
    gang_timeout_seconds=st.one_of(st.none(), st.floats(1, 1e4)),
)


@given(
    steps=st.lists(st.tuples(observations, st.floats(0, 1e3)), min_size=1, max_size=20),
    timeout=st.one_of(st.none(), st.floats(0, 1e3)),
)
def test_only_a_continuous_refusal_past_deadline_and_toleration_moves(steps, timeout):
    """Whatever the sequence, a gang moves only after being refused (and not running)
    continuously for its deadline plus tolerationSeconds, and a started or running gang
    never carries a clock."""
    settings = FailoverSettings(toleration_seconds=30, gang_schedule_timeout_seconds=timeout)
    timers, now, refused_since = CLEAR, 0.0, None
    for observed, step in steps:
        now += step
        verdict = judge(settings, observed, timers, now)
        refused = observed.gang_unschedulable is not None and not observed.job_running
        if refused and refused_since is None:
            refused_since = now
        if not refused:
            refused_since = None
        if isinstance(verdict, Move):
            assert refused_since is not None
            deadline = gang_deadline(settings, observed.gang_timeout_seconds)
            assert now - refused_since >= deadline + 30
            return
        assert isinstance(verdict, Stay)
        if not refused:
            assert verdict.timers == CLEAR and verdict.stuck is None
        else:
            assert verdict.timers.gang_unschedulable_since == refused_since
        timers = verdict.timers


# -- the pods it is seen by ---------------------------------------------------------------------


def _pod(uid: str, *, node: str | None = None, refused: str | None = None, owner="job-1"):
    conditions = []
    if refused is not None:
        conditions = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": refused,
            }
        ]
    obj = {
        "metadata": {"uid": uid, "name": f"w-{uid}", "namespace": "ns", "labels": {"o": owner}},
        "spec": {"containers": [], **({"nodeName": node} if node else {})},
        "status": {"phase": "Pending" if node is None else "Running", "conditions": conditions},
    }
    return pod_from_k8s(obj, owner_label="o")


def test_a_refused_pod_carries_the_scheduler_s_message():
    assert _pod("1", refused="0/3 nodes").unschedulable == "0/3 nodes"
    assert _pod("1").unschedulable is None  # created, not tried yet
    bound = _pod("1", node="n1", refused="stale")
    assert bound.unschedulable is None


def test_the_index_follows_a_gang_s_pods_and_says_when_the_gang_turns_refused_or_not():
    index = UnscheduledPods()
    assert index.upsert(_pod("1")) is None  # not refused: nothing
    assert index.upsert(_pod("1", refused="no room")) == "job-1"  # the gang turns refused
    assert index.upsert(_pod("1", refused="still no room")) is None  # same pod, new word
    assert index.upsert(_pod("2", refused="no room")) is None  # refused already
    assert index.summary("job-1") == "2 pods not scheduled (pod w-1: still no room)"
    assert index.upsert(_pod("1", node="n1")) is None  # bound; one is still refused
    assert index.summary("job-1") == "1 pod not scheduled (pod w-2: no room)"
    assert index.remove("2") == "job-1"  # deleted: none refused any more
    assert index.summary("job-1") is None and index.of("job-1") == {}
    assert index.upsert(PodInfo("9", "ns", "x", None, EMPTY, unschedulable="no")) is None
