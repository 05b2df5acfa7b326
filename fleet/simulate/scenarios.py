"""Named pairings of a fleet and a load, so one command reproduces the published figures.

* `philly` — the Philly trace on its 11 virtual clusters as members (352 nodes x 8 GPUs).
* `alibaba` — the Alibaba v2023 GPU nodes, one member per GPU model, filled FGD-style with pods
  drawn from the v2023 pod list until their GPU requests reach 130% of capacity.
* `alibaba-philly` — the same nodes under the Philly trace's gangs.
* `alibaba-replay` — the pod list replayed by its own timestamps (light: ~1% of the GPUs).
* `philly-teams` — `philly` with a quota tree: each VC a team with min = its GPUs and max twice
  that (`fleet.simulate.kubequeue.philly_teams_tree`), all sharing the pooled members; runs
  compare no queue with Kube Queue's policies.
* `custom` — `--fleet` and `--trace` files.

`--queue FILE` puts an ElasticQuotaTree on any scenario.

A `-xN` suffix compresses arrivals N times (`philly-x5`): more load on the same fleet, the
same jobs. The recorded Philly load never fills the pooled fleet, so the contention figures
come from compressed replays.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleet.simulate.csvio import locate
from fleet.simulate.fleets import (
    FleetSpec,
    alibaba_fleet,
    load_fleet,
    philly_fleet,
    with_racks,
)
from fleet.simulate.kubequeue import fleet_vcs, load_tree, philly_teams_tree
from fleet.simulate.trace import (
    JobSpec,
    fill_workload,
    load_alibaba_pods,
    load_philly,
    load_trace,
    prepare,
    replay_pods,
)

#: The public traces ship inside the package, gzip-compressed, with their sources and licences
#: (`data/README.md`), so a clone or an installed wheel can replay them; FLEET_SIM_DATA (or
#: `--data-dir`) names another copy, compressed or not.
PACKAGED_DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_DATA_DIR = Path(os.environ.get("FLEET_SIM_DATA") or PACKAGED_DATA_DIR)
PHILLY_JOBS = "philly-jobs.csv"
PHILLY_VCS = "philly-vcs.csv"
ALIBABA_NODES = "alibaba-v2023-gpu-nodes.csv"
ALIBABA_PODS = "alibaba-v2023-pods-default.csv"

#: What `--dataset all` runs: both datasets, as recorded and under contention.
ALL = ("philly", "philly-x5", "alibaba", "alibaba-philly-x20")
BASES = ("philly", "philly-teams", "alibaba", "alibaba-philly", "alibaba-replay", "custom")
SOURCES = {
    "philly": "Microsoft Philly trace (Sep-Dec 2017), via petuum/adaptdl `osdi21-artifact` "
    "`simulator/traces/philly.csv` (derived from msr-fiddle/philly-traces, Apache-2.0); VC "
    "sizes from S-Lab-System-Group/HeliosArtifact `philly_vc.csv`",
    "alibaba": "Alibaba PAI GPU cluster trace v2023 (alibaba/clusterdata, "
    '`cluster-trace-gpu-v2023`; ATC\'23 "Beware of Fragmentation")',
}


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    fleet: FleetSpec
    trace: list[JobSpec]
    #: "time" (jobs arrive and leave) or "fill" (they arrive and never leave).
    kind: str
    load: str
    source: str
    time_scale: float = 1.0
    #: An ElasticQuotaTree spec: runs then compare queue modes (`fleet.simulate.kubequeue`).
    quota: dict[str, Any] | None = None


@dataclass(frozen=True)
class Options:
    data_dir: Path = DEFAULT_DATA_DIR
    seed: int = 0
    limit: int | None = None
    time_scale: float = 1.0
    fill_target: float = 1.3
    fleet: Path | None = None
    trace: Path | None = None
    queue: Path | None = None
    #: Nodes per rack (0: no racks): each member's nodes, in list order, 8 to a rack by
    #: default (`fleets.with_racks`).
    racks: int = 0


_SUFFIX = re.compile(r"^(?P<base>[a-z-]+?)(?:-x(?P<scale>\d+(?:\.\d+)?))?$")


def expand(text: str) -> list[str]:
    """`all` or a comma list of scenario names (`philly,alibaba-philly-x20`), checked."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        names = list(ALL) if part == "all" else [part]
        for name in names:
            match = _SUFFIX.match(name)
            if match is None or match.group("base") not in BASES:
                raise ValueError(
                    f"unknown dataset {name!r} (expected all, {', '.join(BASES)}, "
                    "optionally with -xN to compress arrivals N times)"
                )
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("no dataset given")
    return out


def build(name: str, options: Options) -> Scenario:
    scenario = _build(name, options)
    if options.queue is not None:
        scenario = replace(scenario, quota=load_tree(options.queue))
    if options.racks:
        scenario = replace(scenario, fleet=with_racks(scenario.fleet, options.racks))
    return scenario


def _build(name: str, options: Options) -> Scenario:
    match = _SUFFIX.match(name)
    if match is None:
        raise ValueError(f"unknown dataset {name!r}")
    base = match.group("base")
    scale = float(match.group("scale")) if match.group("scale") else options.time_scale
    data = options.data_dir
    if base == "philly":
        fleet = philly_fleet(locate(data, PHILLY_VCS))
        jobs = prepare(
            load_philly(locate(data, PHILLY_JOBS)), limit=options.limit, time_scale=scale
        )
        return Scenario(
            name,
            "Philly trace on its 11 virtual clusters",
            fleet,
            jobs,
            "time",
            _scaled(f"{len(jobs):,} jobs", scale),
            SOURCES["philly"],
            scale,
        )
    if base == "philly-teams":
        fleet = philly_fleet(locate(data, PHILLY_VCS))
        jobs = prepare(
            load_philly(locate(data, PHILLY_JOBS)), limit=options.limit, time_scale=scale
        )
        tree = philly_teams_tree(fleet_vcs(fleet), {j.team for j in jobs}, fleet.total())
        return Scenario(
            name,
            "Philly's virtual clusters as teams with quotas, sharing the pooled members",
            fleet,
            jobs,
            "time",
            _scaled(f"{len(jobs):,} jobs, each in its VC's namespace", scale),
            SOURCES["philly"],
            scale,
            tree,
        )
    if base == "alibaba-philly":
        fleet = alibaba_fleet(locate(data, ALIBABA_NODES))
        jobs = prepare(
            load_philly(locate(data, PHILLY_JOBS)), limit=options.limit, time_scale=scale
        )
        return Scenario(
            name,
            "Philly gangs on the Alibaba v2023 GPU nodes",
            fleet,
            jobs,
            "time",
            _scaled(f"{len(jobs):,} Philly jobs", scale),
            f"{SOURCES['alibaba']}; {SOURCES['philly']}",
            scale,
        )
    if base == "alibaba":
        fleet = alibaba_fleet(locate(data, ALIBABA_NODES))
        pods = load_alibaba_pods(locate(data, ALIBABA_PODS))
        jobs = fill_workload(pods, fleet.total(), target=options.fill_target, seed=options.seed)
        if options.limit is not None:
            jobs = jobs[: options.limit]
        load = (
            f"{len(jobs):,} pods drawn at random (seed {options.seed}) from the "
            f"{len(pods):,}-pod list, one a second, never leaving, until their GPU requests "
            f"reach {options.fill_target:.0%} of capacity (the FGD paper's experiment)"
        )
        return Scenario(
            name,
            "Alibaba v2023 GPU nodes filled with the v2023 pod list",
            fleet,
            jobs,
            "fill",
            load,
            SOURCES["alibaba"],
            1.0,
        )
    if base == "alibaba-replay":
        fleet = alibaba_fleet(locate(data, ALIBABA_NODES))
        jobs = prepare(
            replay_pods(load_alibaba_pods(locate(data, ALIBABA_PODS))),
            limit=options.limit,
            time_scale=scale,
        )
        return Scenario(
            name,
            "Alibaba v2023 pod list replayed by its timestamps",
            fleet,
            jobs,
            "time",
            _scaled(f"{len(jobs):,} pods", scale),
            SOURCES["alibaba"],
            scale,
        )
    if options.fleet is None or options.trace is None:
        raise ValueError("the custom dataset needs --fleet FILE and --trace FILE")
    fleet = load_fleet(options.fleet)
    jobs = prepare(load_trace(options.trace), limit=options.limit, time_scale=scale)
    return Scenario(
        name,
        f"{options.trace.name} on {options.fleet.name}",
        fleet,
        jobs,
        "time",
        _scaled(f"{len(jobs):,} jobs", scale),
        f"{options.trace} and {options.fleet}",
        scale,
    )


def _scaled(what: str, scale: float) -> str:
    if scale == 1:
        return f"{what} at their recorded arrival times"
    return f"{what} with arrivals compressed {scale:g}x (durations unchanged)"
