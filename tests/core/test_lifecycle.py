"""The binding lifecycle: each transition, and invariants over random histories."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core import lifecycle
from fleet.core.failover import CLEAR, FailoverSettings, GiveUp, Move, Timers

DIRECTLY = FailoverSettings(toleration_seconds=0, purge_mode="Directly")
GRACEFULLY = FailoverSettings(
    toleration_seconds=0, purge_mode="Gracefully", grace_period_seconds=60
)


def _moved(binding: lifecycle.Binding, settings: FailoverSettings, now: float, **kw: bool):
    return lifecycle.failed_over(
        binding,
        Move("ApplicationFailure", "failed"),
        settings,
        now,
        old_cluster_reachable=True,
        **kw,
    )


def test_a_cluster_that_refused_the_gang_is_left_avoided_for_a_while_and_charged_nothing():
    placed = lifecycle.scheduled(lifecycle.Binding(), "m", 100.0)
    why = "ConfigMap a/cfg in m is not fleet's"
    left = lifecycle.refused(placed, "m", "DependencyConflict", why, 110.0, retry_after=300)
    assert (left.phase, left.cluster) == ("Pending", None)
    assert left.stays == (lifecycle.Stay("m", 100.0, 110.0, "DependencyConflict"),)
    assert left.failover_count == 0 and left.failovers == ()
    # Placement reports it under its code, not as a failover; until it runs out.
    assert left.excluded(110.0) == {}
    assert left.refusals(110.0) == {"m": ("DependencyConflict", why)}
    assert left.refusals(410.0) == {}
    assert left.next_exclusion_end(110.0) == 410.0


def test_scheduled_records_the_stay_and_the_affinity_group() -> None:
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 100, group="primary")
    assert (b.phase, b.cluster, b.affinity_group) == ("Scheduled", "m1", "primary")
    assert b.stays == (lifecycle.Stay("m1", 100),)
    assert b.clusters_holding_copies() == ["m1"]


def test_the_phase_follows_the_copys_state() -> None:
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 0)
    assert lifecycle.observed(b, "Created").phase == "Dispatched"
    assert lifecycle.observed(b, "Running").phase == "Running"
    assert lifecycle.observed(b, "Failed").phase == "Failed"
    assert lifecycle.health_of("Failed") == "Unhealthy"
    assert lifecycle.health_of("Running") == "Healthy"
    assert lifecycle.health_of(None) == "Unknown"


def test_a_failover_with_directly_deletes_now_and_keeps_the_eviction_until_it_is_gone() -> None:
    b = lifecycle.scheduled(lifecycle.Binding(timers=Timers(unhealthy_since=5)), "m1", 0)
    out = _moved(b, DIRECTLY, 50)
    assert out.delete_old_copy and out.purge_mode == "Directly"
    after = out.binding
    assert (after.phase, after.cluster, after.timers) == ("FailingOver", None, CLEAR)
    assert after.failovers == (lifecycle.FailoverRecord("m1", "ApplicationFailure", 50),)
    assert after.excluded(50) == {"m1": "ApplicationFailure"}
    assert after.stays == (lifecycle.Stay("m1", 0, 50, "ApplicationFailure"),)
    # The record of the copy being deleted: it ends once the copy is observed gone.
    assert [(e.from_cluster, e.purge_mode) for e in after.evictions] == [("m1", "Directly")]


def test_an_unreachable_cluster_keeps_an_eviction_to_fence_the_copy_later() -> None:
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 0)
    out = lifecycle.failed_over(
        b, Move("ClusterLost", "gone"), DIRECTLY, 10, old_cluster_reachable=False
    )
    assert not out.delete_old_copy
    assert [e.from_cluster for e in out.binding.evictions] == ["m1"]
    assert out.binding.clusters_holding_copies() == ["m1"]


def test_never_keeps_the_copy_and_says_so() -> None:
    never = FailoverSettings(purge_mode="Never")
    out = _moved(lifecycle.scheduled(lifecycle.Binding(), "m1", 0), never, 10)
    assert not out.delete_old_copy
    assert [(e.from_cluster, e.purge_mode) for e in out.binding.evictions] == [("m1", "Never")]
    assert "left in place (purgeMode Never)" in out.message


def test_cluster_failover_purges_with_its_own_mode() -> None:
    settings = FailoverSettings(purge_mode="Never", cluster_purge_mode="Directly")
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 0)
    lost = lifecycle.failed_over(
        b, Move("ClusterLost", "gone"), settings, 10, old_cluster_reachable=True
    )
    assert lost.purge_mode == "Directly" and lost.delete_old_copy
    failed = _moved(b, settings, 10)
    assert failed.purge_mode == "Never"


def test_exclusions_run_out_and_say_when() -> None:
    settings = dataclasses.replace(DIRECTLY, cluster_exclusion_seconds=30)
    after = _moved(lifecycle.scheduled(lifecycle.Binding(), "m1", 0), settings, 10).binding
    assert after.excluded(39) == {"m1": "ApplicationFailure"}
    assert after.excluded(40) == {}
    assert after.next_exclusion_end(20) == 40
    assert after.next_exclusion_end(40) is None


def test_gracefully_purges_once_the_successor_runs_or_after_the_grace_period() -> None:
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 0)
    after = lifecycle.scheduled(_moved(b, GRACEFULLY, 100).binding, "m2", 101)
    waiting = lifecycle.purge_plan(after.evictions, successor="Created", now=120)
    assert waiting.delete == () and waiting.recheck_at == 160
    running = lifecycle.purge_plan(after.evictions, successor="Running", now=120)
    assert [e.from_cluster for e in running.delete] == ["m1"]
    late = lifecycle.purge_plan(after.evictions, successor=None, now=160)
    assert [e.from_cluster for e in late.delete] == ["m1"]
    assert lifecycle.evictions_done(after, ["m1"]).evictions == ()


def test_giving_up_fails_it_with_its_history() -> None:
    b = lifecycle.scheduled(
        _moved(lifecycle.scheduled(lifecycle.Binding(), "a", 0), DIRECTLY, 5).binding, "b", 6
    )
    out = lifecycle.gave_up(b, GiveUp("ApplicationFailure", "failed again (maxFailovers 1)"))
    assert out.phase == "Failed" and out.finished
    assert out.gave_up == "failed again (maxFailovers 1); failover history: a (ApplicationFailure)"
    assert lifecycle.observed(out, "Running").phase == "Failed"  # it stays failed


# -- invariants over random histories -----------------------------------------------------------

CLUSTERS = st.sampled_from(["a", "b", "c"])
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), CLUSTERS),
        st.tuples(
            st.just("observe"), st.sampled_from(["Created", "Running", "Failed", "Succeeded"])
        ),
        st.tuples(st.just("fail_over"), st.sampled_from(["ApplicationFailure", "ClusterLost"])),
        st.tuples(st.just("purge"), st.sampled_from([None, "Running"])),
        st.tuples(st.just("wait"), st.floats(min_value=0, max_value=1000)),
    ),
    max_size=30,
)
SETTINGS = st.builds(
    FailoverSettings,
    toleration_seconds=st.just(0.0),
    purge_mode=st.sampled_from(["Directly", "Gracefully", "Never"]),
    grace_period_seconds=st.one_of(st.none(), st.floats(min_value=1, max_value=600)),
    cluster_exclusion_seconds=st.one_of(st.none(), st.floats(min_value=0, max_value=600)),
    cluster_purge_mode=st.one_of(st.none(), st.sampled_from(["Directly", "Gracefully", "Never"])),
)


@settings(max_examples=300, deadline=None)
@given(EVENTS, SETTINGS, st.booleans())
def test_any_history_keeps_the_binding_consistent(events, failover, reachable) -> None:
    b = lifecycle.Binding()
    now = 0.0
    for kind, arg in events:
        if kind == "wait":
            now += arg
        elif kind == "schedule" and b.cluster is None and arg not in b.excluded(now):
            b = lifecycle.scheduled(b, arg, now)
            # The copy there is the gang's now: no pending purge may delete it.
            assert arg not in {e.from_cluster for e in b.evictions}
        elif kind == "observe" and b.cluster is not None:
            b = lifecycle.observed(b, arg)
        elif kind == "fail_over" and b.cluster is not None:
            before = b
            out = lifecycle.failed_over(
                b, Move(arg, "x"), failover, now, old_cluster_reachable=reachable
            )
            b = out.binding
            # Whatever the purge mode, the old copy is on record until it is observed gone.
            assert before.cluster in {e.from_cluster for e in b.evictions}
        elif kind == "purge":
            plan = lifecycle.purge_plan(b.evictions, successor=arg, now=now)
            assert set(plan.delete) | set(plan.keep) == set(b.evictions)
            b = lifecycle.evictions_done(b, [e.from_cluster for e in plan.delete])
        # Invariants after every step:
        open_stays = [s for s in b.stays if s.removed_at is None]
        assert [s.cluster for s in open_stays] == ([b.cluster] if b.cluster else [])
        assert b.failover_count == len(b.failovers)
        assert len({e.cluster for e in b.exclusions}) == len(b.exclusions)
        if b.cluster is not None:
            assert b.cluster in b.clusters_holding_copies()
            assert b.cluster not in {e.from_cluster for e in b.evictions}
        assert {e.from_cluster for e in b.evictions} <= set(b.clusters_holding_copies())


def test_coming_back_to_a_cluster_takes_over_its_pending_eviction() -> None:
    """The gang left `a` (its copy there kept for a graceful purge), the exclusion ran out, and
    it was placed on `a` again: purging the old eviction would delete the copy that now runs."""
    settings = dataclasses.replace(GRACEFULLY, cluster_exclusion_seconds=10)
    b = _moved(lifecycle.scheduled(lifecycle.Binding(), "a", 0), settings, 5).binding
    assert [e.from_cluster for e in b.evictions] == ["a"]
    back = lifecycle.scheduled(b, "a", 20)
    assert back.evictions == ()
    assert lifecycle.purge_plan(back.evictions, successor="Running", now=30).delete == ()


def test_a_failover_off_an_unjoined_member_is_not_counted_against_max_failovers():
    settings = FailoverSettings(max_failovers=1)
    b = lifecycle.scheduled(lifecycle.Binding(), "m1", 0)
    moved = lifecycle.failed_over(
        b, Move("MemberUnjoined", "m1 is being unjoined"), settings, 10, old_cluster_reachable=True
    ).binding
    assert moved.failover_count == 0 and len(moved.failovers) == 1
    again = lifecycle.scheduled(moved, "m2", 11)
    failed = lifecycle.failed_over(
        again, Move("ApplicationFailure", "failed"), settings, 20, old_cluster_reachable=True
    ).binding
    assert failed.failover_count == 1


def test_the_first_running_of_a_stay_dates_it_once_and_a_move_starts_without_it():
    placed = lifecycle.scheduled(lifecycle.Binding(), "m1", 100.0)
    pending = lifecycle.observed(placed, "Created", 130.0)
    assert pending.stays[-1].running_since is None  # placed, its pods not up yet
    ran = lifecycle.observed(pending, "Running", 160.0)
    assert ran.stays[-1].running_since == 160.0
    assert lifecycle.observed(ran, "Running", 900.0).stays[-1].running_since == 160.0
    moved = lifecycle.scheduled(dataclasses.replace(ran, cluster=None), "m2", 1000.0)
    assert moved.stays[-1].cluster == "m2" and moved.stays[-1].running_since is None
    assert moved.stays[0].running_since == 160.0  # the old stay keeps its own


def test_a_binding_running_before_the_field_existed_counts_from_its_placement():
    placed = lifecycle.scheduled(lifecycle.Binding(), "m1", 100.0)
    legacy = dataclasses.replace(placed, phase="Running")  # written without running_since
    assert lifecycle.observed(legacy, "Running", 5000.0).stays[-1].running_since == 100.0
