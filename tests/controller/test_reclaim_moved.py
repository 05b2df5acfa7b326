"""A reclaim's victim that had already moved when its eviction is recorded: the core decides
whether it holds its quota where it runs now (docs/queue.md, "Late and moved gangs"); with no
room under max, the eviction is carried out there, and no quota node ends above its max."""

from __future__ import annotations

from fleet.api import constants as c
from fleet.controller.queue.units import key_of_job
from tests.controller.harness import conditions
from tests.controller.test_queue import phase, work
from tests.controller.test_reclaim import borrowed_fleet, reclaim_world, start, unit_message

GPU = "nvidia.com/gpu"
BINDING = (c.FLEET_API_VERSION, "GangBinding")


async def test_a_victim_that_moved_is_evicted_where_it_runs_when_its_quota_has_no_room():
    world = await reclaim_world()
    world.add_member("member-2", gpus=4, nodes=2)
    first, second = await borrowed_fleet(world)
    world.clock.advance(3600)

    b = await start(world, "b1", "b")  # the pass decides: a2 is evicted from member-1
    assert world.kube_queue.eviction_for(key_of_job(second)) is not None
    # Meanwhile a2 had failed over to member-2 (the pass saw where it ran a moment before).
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
    # ... and its copy runs there (the eviction lasts until that copy is observed gone).
    held = world.members["member-1"].copy(second.name)
    assert held is not None
    world.members["member-2"].api.put(
        {**held, "metadata": {k: v for k, v in held["metadata"].items() if k != "uid"}}
    )

    await world.reconcile(second)

    admission = world.kube_queue.admission
    assert admission.usage("root").used[GPU] <= 8  # never above the root's max
    assert phase(world, second) == "Enqueued" and not admission.holds(key_of_job(second))
    recorded = world.binding(second)
    assert recorded is not None
    (task,) = recorded["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["reason"]) == ("member-2", "Reclaimed")
    assert not recorded["spec"].get("clusters")
    assert "it had moved to member-2" in unit_message(world, second)
    assert conditions(world.workload(second))["Scheduled"]["reason"] == "Reclaimed"
    await work(world)  # the gang that reclaimed is released once its room is on record
    assert phase(world, b) == "Dequeued" and phase(world, first) == "Running"
