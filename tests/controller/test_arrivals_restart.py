"""The workload mix the fragmentation score ranks by survives a restart or a leader change: a
controller that starts leading over existing GangBindings rebuilds it from them, equal to the
mix the arrivals built as the gangs were bound."""

from __future__ import annotations

from fleet.api import GangBinding
from fleet.api import constants as c
from fleet.controller import placing
from fleet.controller.arrivals import gang_of_binding, rebuilt
from fleet.controller.bindings import lifecycle_of
from fleet.controller.context import Job
from fleet.controller.operator import Controller
from fleet.core.arrivals import RecentArrivals, mix_of
from fleet.core.kinds import adapter_for, gang_from_workload
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, World

BINDING = (c.FLEET_API_VERSION, "GangBinding")

#: (name, workers, GPUs per pod), bound in this order; their names do not sort in that order
#: (the rebuild goes by creation time).
SHAPES = [("z-big", 1, 4), ("y-wide", 3, 1), ("x-two", 2, 2), ("w-big", 1, 4), ("v-one", 1, 1)]


async def bound_world() -> World:
    """A fleet where five gangs of different shapes were bound, a minute apart."""
    world = World()
    world.add_member("member-1", gpus=8)
    world.apply_policy(gang_policy("gang", NAMESPACE, scoring="fragmentation"))
    for n, (name, workers, gpus) in enumerate(SHAPES):
        key = world.submit(pytorchjob(name, workers=workers, gpus=gpus))
        await world.reconcile(key)
        # (the in-memory server stamps every object with the same time)
        world.fleet_api.merge(
            *BINDING,
            f"pytorchjob-{name}",
            NAMESPACE,
            {"metadata": {"creationTimestamp": f"2025-01-01T00:0{n}:00Z"}},
        )
    return world


async def test_a_controller_started_over_bindings_ranks_with_the_mix_the_arrivals_built():
    world = await bound_world()
    learned = world.shell.arrivals
    assert learned.observed == len(SHAPES) and learned.mix() is not None

    # A second replica over the same API server: a restart, or a standby taking over.
    replica = Controller(
        world.settings, world.fleet_api.client("replica-2"), "replica-2", clock=world.clock
    )
    replica.members.listed = True  # (its members' list is not what this test is about)
    replica.leading.set()
    assert replica.shell.arrivals.mix() is None  # nothing learned yet
    await replica._start_leading()

    restored = replica.shell.arrivals
    assert restored.observed == learned.observed
    assert restored.mix() == learned.mix()

    # Placement on the new leader ranks a new gang by that mix, not by the gang's own shape.
    key = world.submit(pytorchjob("new", workers=1, gpus=2))
    await world.reconcile(key)
    workload = world.workload(key)
    binding = await world.shell.bindings.read(key)
    kind = adapter_for(key.api_version, key.kind)
    assert workload is not None and binding is not None and kind is not None
    gang = gang_from_workload(workload)
    job = Job(key, kind, workload, binding, lifecycle_of(binding, world.clock.now()), gang)
    ranked_by = placing._mix(replica.shell, job)
    assert ranked_by == learned.mix() and ranked_by != mix_of(gang)


async def test_the_mix_is_rebuilt_in_creation_order_whatever_the_list_order():
    world = await bound_world()
    listed = world.fleet_api.list(*BINDING)
    learned = world.shell.arrivals
    for order in (listed, list(reversed(listed))):
        again = rebuilt(RecentArrivals(), order)
        assert again.mix() == learned.mix() and again.observed == len(SHAPES)
    # (the order matters: by name, the same gangs would have built another mix)
    by_name = RecentArrivals()
    for obj in sorted(listed, key=lambda o: o["metadata"]["name"]):
        by_name.observe(gang_of_binding(GangBinding.from_dict(obj)))
    assert by_name.mix() != learned.mix()
