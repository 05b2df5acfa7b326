"""A reclaim's victim that had already moved when its eviction is recorded (docs/queue.md, "Late
and moved gangs"): the eviction is carried out only in the cluster whose room the claimant's
proof needs, the one it left; where it runs now it is not evicted, and the core charges it
there, above the max when there is no room under it."""

from __future__ import annotations

from fleet.api import constants as c
from fleet.controller.queue.units import key_of_job
from tests.controller.harness import conditions
from tests.controller.test_queue import phase, placed_on, work
from tests.controller.test_reclaim import (
    borrowed_fleet,
    pods_gone,
    reclaim_world,
    start,
    unit_message,
)

GPU = "nvidia.com/gpu"
BINDING = (c.FLEET_API_VERSION, "GangBinding")


async def test_a_victim_that_moved_is_not_evicted_where_it_runs_now_and_is_charged_there():
    world = await reclaim_world()
    world.add_member("member-2", gpus=4, nodes=2)
    first, second = await borrowed_fleet(world)
    world.clock.advance(3600)

    b = await start(world, "b1", "b")  # the pass decides: a2 is evicted from member-1
    assert world.kube_queue.eviction_for(key_of_job(second)) is not None
    # Meanwhile a2 had failed over to member-2 (the pass saw where it ran a moment before):
    # its pods left member-1, and its copy runs in member-2.
    binding = world.binding(second)
    assert binding is not None
    moved = binding["spec"]["clusters"]
    moved[0]["name"] = "member-2"
    world.fleet_api.merge(
        *BINDING,
        binding["metadata"]["name"],
        binding["metadata"]["namespace"],
        {"spec": {"clusters": moved}},
    )
    held = world.members["member-1"].copy(second.name)
    assert held is not None
    world.members["member-2"].api.put(
        {**held, "metadata": {k: v for k, v in held["metadata"].items() if k != "uid"}}
    )
    pods_gone(world, second)

    await world.reconcile(second)

    # Not evicted in member-2: evicting it there frees nothing b1's proof (member-1) needs.
    recorded = world.binding(second)
    assert recorded is not None
    assert not recorded["spec"].get("gracefulEvictionTasks")
    assert [c["name"] for c in recorded["spec"]["clusters"]] == ["member-2"]
    assert world.members["member-2"].copy(second.name) is not None
    assert not world.events("Reclaimed", second)
    # Charged where it runs, above the root's max of 8 GPUs (b1 holds its 4 already).
    admission = world.kube_queue.admission
    assert phase(world, second) == "Running" and admission.holds(key_of_job(second))
    assert admission.usage("root").used[GPU] == 12
    message = unit_message(world, second)
    assert "runs in member-2" in message and "frees nothing its claimant needs" in message
    assert conditions(world.workload(second))["Scheduled"]["reason"] != "Reclaimed"
    await work(world)  # the gang that reclaimed is released: its victim is accounted for
    assert phase(world, b) == "Dequeued" and phase(world, first) == "Running"
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1"  # the room its proof named
