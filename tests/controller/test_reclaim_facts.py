"""The controller's reclaim decides with the facts the simulator gives it (docs/queue.md,
"Checkpoints the controller knows"): when each gang's copy began to run (`runningSince`), its
last checkpoint (`fleet.dev/last-checkpoint` on the job or its member copy) and its declared
limit (`activeDeadlineSeconds`)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.api import format_time
from fleet.api._time import parse_time, to_epoch
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue.units import key_of_job
from tests.controller.harness import NAMESPACE, PYTORCH, World
from tests.controller.test_queue import phase, work
from tests.controller.test_reclaim import (
    borrowed_fleet,
    job,
    reclaim_world,
    running,
    start,
    unit_message,
)

HOUR = 3600.0


def stay(world: World, key: WorkloadKey) -> dict[str, Any]:
    binding = world.binding(key)
    assert binding is not None
    history: list[dict[str, Any]] = binding["status"]["placementHistory"]
    return history[-1]


def evicted(world: World, *keys: WorkloadKey) -> list[str]:
    """The gangs whose binding records a queue eviction."""
    out = []
    for key in keys:
        binding = world.binding(key) or {}
        if (binding.get("spec") or {}).get("gracefulEvictionTasks"):
            out.append(key.name)
    return out


async def test_running_since_is_written_once_when_the_copy_first_reports_running():
    world = await reclaim_world()
    a1 = await start(world, "a1", "a")
    assert "runningSince" not in stay(world, a1)  # placed, not running yet
    world.clock.advance(90)  # pending in the member for a while
    await running(world, a1)
    since = stay(world, a1)["runningSince"]
    assert to_epoch(parse_time(since)) == pytest.approx(world.clock.now(), abs=1)
    assert to_epoch(parse_time(stay(world, a1)["placedAt"])) < world.clock.now() - 80
    world.clock.advance(600)
    await world.reconcile(a1)
    assert stay(world, a1)["runningSince"] == since  # written once


@pytest.mark.parametrize("on", ["job", "copy"])
async def test_a_gang_that_reported_a_checkpoint_loses_only_the_work_since_it(on: str):
    world = await reclaim_world()
    first, second = await borrowed_fleet(world)
    world.clock.advance(10 * HOUR)
    # a1 ran a minute longer than a2, but its training script reported a checkpoint a minute
    # ago: evicting it loses 4 GPUs x 1 minute, a2 would lose 4 GPUs x 10 hours.
    stamp = {
        "metadata": {"annotations": {c.CHECKPOINT_ANNOTATION: format_time(world.clock.now() - 60)}}
    }
    if on == "job":
        world.fleet_api.merge(*PYTORCH, first.name, NAMESPACE, stamp)
    else:
        world.members["member-1"].api.merge(*PYTORCH, first.name, NAMESPACE, stamp)

    b = await start(world, "b1", "b")
    await world.reconcile(first)
    await world.reconcile(second)

    assert evicted(world, first, second) == ["a1"]
    message = unit_message(world, first)
    assert f"reclaimed by {key_of_job(b)}" in message
    assert "(0.07 GPU-hours of work lost)" in message  # 4 GPUs x 1 minute
    await work(world)
    assert phase(world, b) == "Dequeued" and phase(world, second) == "Running"


async def test_without_a_checkpoint_the_gang_that_started_last_loses_least():
    world = await reclaim_world()
    first, second = await borrowed_fleet(world)
    world.clock.advance(10 * HOUR)
    await start(world, "b1", "b")
    await world.reconcile(first)
    await world.reconcile(second)
    assert evicted(world, first, second) == ["a2"]
    assert "(40.00 GPU-hours of work lost)" in unit_message(world, second)  # 4 GPUs x 10 h


async def deadline_fleet(world: World, a2_limit: int | None) -> tuple[WorkloadKey, WorkloadKey]:
    """As `borrowed_fleet`, a2 declaring `runPolicy.activeDeadlineSeconds: a2_limit`."""
    first = await start(world, "a1", "a")
    await running(world, first)
    world.clock.advance(60)
    body = job("a2", "a")
    if a2_limit is not None:
        body["spec"]["runPolicy"] = {"activeDeadlineSeconds": a2_limit}
    second = world.submit(body)
    await world.reconcile(second)
    await work(world)
    await world.reconcile(second)
    world.clock.advance(120)  # pending in the member: its deadline counts from its run
    await running(world, second)
    return first, second


@pytest.mark.parametrize(
    ("limit", "spared"),
    [
        (HOUR + 120, True),  # ends 2 minutes after the claim: within reclaim_min_saving (5 min)
        (10 * HOUR, False),  # ends in 9 hours: the claimant's wait saved outweighs the loss
        (None, False),  # declares none
    ],
)
async def test_a_gang_about_to_end_by_its_declared_limit_is_not_evicted(
    limit: float | None, spared: bool
):
    world = await reclaim_world(queue_reclaim_worth=True)
    first, second = await deadline_fleet(world, None if limit is None else int(limit))
    world.clock.advance(HOUR)

    b = await start(world, "b1", "b")
    await world.reconcile(first)
    await world.reconcile(second)
    await work(world)

    if spared:
        assert evicted(world, first, second) == []
        assert phase(world, b) == "Enqueued"
        assert [phase(world, k) for k in (first, second)] == ["Running", "Running"]
    else:
        assert evicted(world, first, second) == ["a2"]
        assert phase(world, b) == "Dequeued"
