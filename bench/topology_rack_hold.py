"""Experiment, not fleet's rule: what a preferred gang's wait for a rack buys when the gang also
HOLDS the rack closest to holding it while it waits (issue 27; docs/placement.md).

The product's wait (`fleet.core.domainwait`) holds nothing, and the nodes that free in a rack
meanwhile are taken by younger jobs. Here the simulator is subclassed so that a gang waiting for
a rack reserves, in the fleet's views, every free resource of the nodes of the rack whose room
holds most of its pods (`domains.largest`), taken again at each retry (so the rack's freed room
accumulates for it) and released when it is placed or its wait ends. The members' schedulers do
not see the hold (a pinned small job may still land on a held node there). One replay:

    nice .venv/bin/python bench/topology_rack_hold.py --racks 8 --topology-wait 30m
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.core.assignment import Assignment, Slot
from fleet.core.domains import largest
from fleet.core.domainwait import waiting_rule
from fleet.simulate.faults import parse_duration
from fleet.simulate.jobs import SimJob
from fleet.simulate.metrics import summarize
from fleet.simulate.policies import EnginePolicy, make_policy
from fleet.simulate.report import human
from fleet.simulate.scenarios import Options, build
from fleet.simulate.simulation import Simulation


class RackHoldSimulation(Simulation):
    """The simulation with a waiting preferred gang holding its nearest rack."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rack_holds: dict[SimJob, str] = {}
        self.counters["rack_holds"] = 0

    def _try_dispatch(self, job: SimJob) -> bool:
        held = self._rack_holds.pop(job, None)
        if held is not None:  # the gang sees its own held room
            self.views[held].release(_key(job))
        if super()._try_dispatch(job):
            self._freed = self._freed or held is not None
            return True
        policy = self.policy
        assert isinstance(policy, EnginePolicy)
        gang = job.spec.shape.gang.with_default_topology(policy.topology)
        rule = waiting_rule(gang)
        since = job.life.domain_wait_since
        if since is None or rule is None or self.now >= since + rule.wait_seconds:
            self._freed = self._freed or held is not None
            return False
        best: tuple[tuple[int, int], str, str] | None = None
        for view in self._view_list:
            room = None if view.name in self._down else largest(view, gang, rule)
            if room is not None and (best is None or (room.holds, room.accelerator_free) > best[0]):
                best = ((room.holds, room.accelerator_free), view.name, room.value)
        if best is None:
            return False
        _, name, value = best
        view = self.views[name]
        slots = []
        for node in view.domain_nodes(rule.level).get(value, {}):
            free = view.free(node)
            if free is not None and any(v > 0 for r, v in free.items() if r != "pods"):
                slots.append(Slot("hold", node, 1, free))
        if slots:
            view.reserve(_key(job), Assignment(tuple(slots)), since + rule.wait_seconds)
            self._rack_holds[job] = name
            self.counters["rack_holds"] += 1
        return False

    def _on_domain_wait_end(self, payload: tuple[SimJob, float]) -> None:
        job, _ = payload
        held = self._rack_holds.pop(job, None)
        if held is not None and self.views[held].release(_key(job)):
            self._freed = True
        super()._on_domain_wait_end(payload)


def _key(job: SimJob) -> str:
    return f"rack-hold:{job.key}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="philly-x5")
    parser.add_argument("--racks", type=int, default=8, help="nodes per rack")
    parser.add_argument("--topology-wait", default="30m")
    parser.add_argument("--limit", type=int, help="replay only the first N jobs")
    args = parser.parse_args()
    scenario = build(args.dataset, Options(limit=args.limit, seed=0, racks=args.racks))
    members = [m.name for m in scenario.fleet.members]
    wait = parse_duration(args.topology_wait)
    policy = make_policy("nodes+preferred", members, 0, topology_wait=wait)
    result = RackHoldSimulation(scenario.fleet, scenario.trace, policy).run()
    s = summarize(result)
    w = s["multi_node_wait_s"]
    print(
        f"{args.dataset}, {args.racks} nodes per rack, preferred with a rack hold, wait "
        f"{human(wait)}: {s['multi_node_in_one_domain']} / {s['multi_node_gangs']} "
        f"({s['multi_node_in_one_domain_share']:.0%}) multi-node gangs in one rack, their wait "
        f"p50 {human(w['p50'])} p90 {human(w['p90'])}; all jobs p90 {human(s['wait_s']['p90'])}; "
        f"{result.counters['rack_holds']} holds taken; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
