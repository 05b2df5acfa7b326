"""Failover decisions: toleration windows survive restarts, limits hold, purge modes behave."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fleet.core.failover import (
    CLEAR,
    FailoverSettings,
    GiveUp,
    Move,
    Observation,
    Stay,
    Timers,
    delete_before_placing,
    exclusion_until,
    judge,
    purge_old_copy,
    still_excluded,
)

HEALTHY = Observation(cluster_ready=True)
FAILED = Observation(cluster_ready=True, job_failed=True)
LOST = Observation(cluster_ready=False)
SETTINGS = FailoverSettings(toleration_seconds=30, purge_mode="Directly")


def test_healthy_job_stays_and_clears_timers():
    verdict = judge(SETTINGS, HEALTHY, Timers(unhealthy_since=5.0), now=10.0)
    assert verdict == Stay(CLEAR)


def test_failure_is_tolerated_then_moves_at_the_deadline():
    first = judge(SETTINGS, FAILED, CLEAR, now=100.0)
    assert isinstance(first, Stay)
    assert first.timers.unhealthy_since == 100.0 and first.recheck_at == 130.0
    assert "tolerationSeconds" in (first.waiting or "")
    assert isinstance(judge(SETTINGS, FAILED, first.timers, now=129.9), Stay)
    moved = judge(SETTINGS, FAILED, first.timers, now=130.0, cluster="member-1")
    assert isinstance(moved, Move) and moved.reason == "ApplicationFailure"
    assert "member-1" in moved.message


def test_zero_toleration_moves_at_once():
    settings = FailoverSettings(toleration_seconds=0)
    assert isinstance(judge(settings, FAILED, CLEAR, now=1.0), Move)


def test_lost_cluster_is_judged_before_the_stale_job_state():
    verdict = judge(SETTINGS, Observation(cluster_ready=False, job_failed=True), CLEAR, now=0)
    assert isinstance(verdict, Stay) and verdict.timers.cluster_lost_since == 0
    moved = judge(SETTINGS, LOST, verdict.timers, now=30)
    assert isinstance(moved, Move) and moved.reason == "ClusterLost"


def test_recovery_resets_the_clock():
    t = judge(SETTINGS, FAILED, CLEAR, now=0).timers
    t = judge(SETTINGS, HEALTHY, t, now=20).timers
    again = judge(SETTINGS, FAILED, t, now=40)
    assert isinstance(again, Stay) and again.recheck_at == 70


def test_a_finished_job_never_moves():
    done = Observation(cluster_ready=True, job_succeeded=True)
    assert judge(SETTINGS, done, Timers(unhealthy_since=0), now=1000) == Stay(CLEAR)


def test_no_failover_settings_means_stay():
    assert judge(None, LOST, CLEAR, now=1e9) == Stay(CLEAR)


def test_max_failovers_gives_up_with_the_count():
    settings = FailoverSettings(toleration_seconds=0, max_failovers=2)
    assert isinstance(judge(settings, FAILED, CLEAR, now=0, failovers=1), Move)
    verdict = judge(settings, FAILED, CLEAR, now=0, failovers=2)
    assert isinstance(verdict, GiveUp) and "maxFailovers 2" in verdict.message


@given(
    toleration=st.integers(0, 600),
    restart_at=st.integers(0, 900),
    step=st.integers(1, 60),
)
def test_a_restart_mid_window_keeps_the_original_deadline(toleration, restart_at, step):
    """Judging from persisted timers after a restart moves when an unbroken run would."""
    settings = FailoverSettings(toleration_seconds=toleration)

    def first_move(timers: Timers, start: float) -> float:
        now = start
        while True:
            verdict = judge(settings, FAILED, timers, now)
            if isinstance(verdict, Move):
                return now
            assert isinstance(verdict, Stay)
            timers = verdict.timers
            now = min(now + step, verdict.recheck_at or now + step)

    continuous = first_move(CLEAR, 0.0)
    # The controller died after its first observation and came back at `restart_at`.
    persisted = judge(settings, FAILED, CLEAR, 0.0)
    assert isinstance(persisted, Stay) or toleration == 0
    timers = persisted.timers if isinstance(persisted, Stay) else CLEAR
    resumed = first_move(timers, float(min(restart_at, continuous)))
    assert resumed == continuous == float(toleration)


def test_exclusion_lasts_for_the_job_lifetime_unless_bounded():
    assert exclusion_until(FailoverSettings(), now=10) is None
    assert still_excluded(None, now=1e12)
    until = exclusion_until(FailoverSettings(cluster_exclusion_seconds=60), now=10)
    assert until == 70 and still_excluded(until, 69) and not still_excluded(until, 70)


def test_directly_deletes_first_only_when_it_can():
    assert delete_before_placing("Directly", old_cluster_reachable=True)
    assert not delete_before_placing("Directly", old_cluster_reachable=False)
    assert not delete_before_placing("Gracefully", old_cluster_reachable=True)


def test_purge_modes():
    assert purge_old_copy("Directly", evicted_at=0, successor_running=False, now=0).delete
    assert not purge_old_copy("Never", evicted_at=0, successor_running=True, now=1e9).delete
    waiting = purge_old_copy(
        "Gracefully", evicted_at=0, successor_running=False, now=10, grace_period_seconds=60
    )
    assert not waiting.delete and waiting.recheck_at == 60
    assert purge_old_copy("Gracefully", evicted_at=0, successor_running=True, now=10).delete
    assert purge_old_copy("Gracefully", evicted_at=0, successor_running=False, now=600).delete


def test_nothing_is_judged_on_what_is_not_known_yet():
    """A restarted controller that has not heard from the member keeps the stored timers."""
    timers = Timers(unhealthy_since=5.0, cluster_lost_since=None)
    assert judge(SETTINGS, Observation(cluster_ready=None), timers, now=100) == Stay(timers)
    unknown_job = Observation(cluster_ready=True, job_failed=None)
    assert judge(SETTINGS, unknown_job, timers, now=100) == Stay(Timers(unhealthy_since=5.0))


def test_an_unjoining_cluster_moves_its_gang_at_once_whatever_the_policy():
    unjoining = Observation(cluster_ready=True, unjoining=True)
    for settings in (SETTINGS, None, FailoverSettings(max_failovers=0)):
        verdict = judge(settings, unjoining, CLEAR, now=10.0, failovers=5, cluster="m1")
        assert isinstance(verdict, Move) and verdict.reason == "MemberUnjoined"
    # Even while it cannot be reached: the operator has said it is leaving.
    lost = Observation(cluster_ready=False, unjoining=True)
    assert judge(SETTINGS, lost, CLEAR, now=10.0) == Move(
        "MemberUnjoined", "its cluster is being unjoined from the fleet"
    )


# -- a cluster that refuses fleet's credentials is not lost ----------------------------------

REFUSING = Observation(cluster_ready=False, cluster_refuses="CredentialsRefused")


def test_a_cluster_refusing_fleets_credentials_keeps_its_job_with_no_lost_clock():
    """Up, with its copy most likely running: no failover on that ground, however long, and
    the copy's last seen state (stale) is not judged either."""
    stale_failure = Observation(
        cluster_ready=False, cluster_refuses="KubeconfigSecretMissing", job_failed=True
    )
    for observed in (REFUSING, stale_failure):
        verdict = judge(SETTINGS, observed, CLEAR, now=0.0, cluster="west")
        assert isinstance(verdict, Stay)
        assert verdict.timers == CLEAR and verdict.recheck_at is None
        assert verdict.refused == observed.cluster_refuses
        assert "west" in (verdict.waiting or "")
        assert observed.cluster_refuses in (verdict.waiting or "")
        assert judge(SETTINGS, observed, verdict.timers, now=1e9, cluster="west") == verdict


def test_a_lost_clock_stops_when_the_cluster_turns_out_to_refuse_and_restarts_after():
    lost = judge(SETTINGS, LOST, CLEAR, now=0.0)
    assert isinstance(lost, Stay) and lost.timers.cluster_lost_since == 0.0
    refused = judge(SETTINGS, REFUSING, lost.timers, now=20.0)
    assert isinstance(refused, Stay) and refused.timers.cluster_lost_since is None
    # Unreachable again: a new window, from now.
    again = judge(SETTINGS, LOST, refused.timers, now=40.0)
    assert isinstance(again, Stay) and again.recheck_at == 70.0
    assert isinstance(judge(SETTINGS, LOST, again.timers, now=70.0), Move)


def test_a_refusing_cluster_still_moves_its_job_on_the_operators_grounds():
    """An untolerated NoExecute taint and an unjoin move the job whatever fleet can see."""
    tainted = Observation(
        cluster_ready=False, cluster_refuses="CredentialsRefused", no_execute=("t:NoExecute", 0)
    )
    verdict = judge(SETTINGS, tainted, CLEAR, now=5.0)
    assert isinstance(verdict, Move) and verdict.reason == "TaintUntolerated"
    unjoining = Observation(
        cluster_ready=False, cluster_refuses="CredentialsRefused", unjoining=True
    )
    verdict = judge(SETTINGS, unjoining, CLEAR, now=5.0)
    assert isinstance(verdict, Move) and verdict.reason == "MemberUnjoined"


def test_a_ready_cluster_ignores_a_stale_refusal():
    """Only a NotReady cluster's refusal counts: once Ready, its job is judged as ever."""
    ready = Observation(cluster_ready=True, job_failed=True, cluster_refuses="CredentialsRefused")
    verdict = judge(SETTINGS, ready, CLEAR, now=0.0)
    assert isinstance(verdict, Stay) and verdict.timers.unhealthy_since == 0.0
    assert verdict.refused is None
