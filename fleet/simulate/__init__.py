"""`fleet simulate`: replay GPU job traces through the real placement code, compare rules.

The fleet side is `fleet.core` unchanged (placement, estimators, snapshots, reservations,
failover); the simulator adds only what the real system has and the core does not: simulated
time, member clusters that start a gang when it really fits, traces, faults and the report.
See docs/simulate.md.
"""

from fleet.simulate.errors import DataError
from fleet.simulate.faults import Faults, Outage
from fleet.simulate.fleets import FleetSpec, MemberSpec, alibaba_fleet, load_fleet, philly_fleet
from fleet.simulate.metrics import RunResult, summarize
from fleet.simulate.policies import PlacementPolicy, make_policy
from fleet.simulate.queueing import FifoQueue, FleetQueue
from fleet.simulate.simulation import SimConfig, Simulation, simulate
from fleet.simulate.trace import (
    JobSpec,
    Shape,
    fill_workload,
    load_alibaba_pods,
    load_philly,
    load_trace,
    philly_shape,
)

__all__ = [
    "DataError",
    "Faults",
    "FifoQueue",
    "FleetQueue",
    "FleetSpec",
    "JobSpec",
    "MemberSpec",
    "Outage",
    "PlacementPolicy",
    "RunResult",
    "Shape",
    "SimConfig",
    "Simulation",
    "alibaba_fleet",
    "fill_workload",
    "load_alibaba_pods",
    "load_fleet",
    "load_philly",
    "load_trace",
    "make_policy",
    "philly_fleet",
    "philly_shape",
    "simulate",
    "summarize",
]
