"""`fleet simulate` / `python -m fleet.simulate`: replay traces, compare policies, write a report.

python -m fleet.simulate --dataset all --out out/simulate      # both datasets, the report
python -m fleet.simulate --dataset philly --limit 2000          # a quick look
python -m fleet.simulate --dataset custom --fleet f.yaml --trace t.csv
python -m fleet.simulate --dataset philly-teams-x5   # Kube Queue: no queue, Priority, Block
python -m fleet.simulate --dataset philly --queue tree.yaml   # any dataset, your quota tree
python -m fleet.simulate --dataset philly-x5 --policies nodes,nodes+reserve \
    --local-load 20:1,2,4,8:30 --dispatch-latency 2     # reservations against member-local load
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from fleet.core.admission import AdmissionSettings
from fleet.core.domainwait import DEFAULT_WAIT_SECONDS
from fleet.core.failover import FailoverSettings
from fleet.simulate import report
from fleet.simulate.errors import DataError
from fleet.simulate.faults import Faults, parse_duration, parse_outages
from fleet.simulate.kubequeue import parse_queue_modes, quota_tree, replay_queued
from fleet.simulate.localload import parse_local_load
from fleet.simulate.metrics import RunResult, summarize
from fleet.simulate.policies import DEFAULT_POLICIES, make_policy, parse_policies
from fleet.simulate.scenarios import DEFAULT_DATA_DIR, Options, Scenario, build, expand
from fleet.simulate.simulation import SimConfig, simulate


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fleet simulate",
        description="Replay GPU job traces through the real placement code and compare rules.",
    )
    p.add_argument(
        "--dataset",
        default="all",
        help="all, philly, alibaba, alibaba-philly, alibaba-replay or custom; a comma "
        "list; -xN compresses arrivals N times (philly-x5). Default: all "
        "(philly, philly-x5, alibaba, alibaba-philly-x20)",
    )
    p.add_argument("--fleet", type=Path, help="fleet file (CSV or YAML) for --dataset custom")
    p.add_argument("--trace", type=Path, help="trace file (CSV) for --dataset custom")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="folder of the public traces, .csv or .csv.gz (default: $FLEET_SIM_DATA, else the "
        f"copies shipped with fleet; now {DEFAULT_DATA_DIR})",
    )
    p.add_argument(
        "--policies",
        default=None,
        help="comma list: sum, nodes, fgd, fgd-fleet, random, first, or "
        "<best|random|first>@<sum|nodes>, each optionally +reserve (Koordinator Reservations) "
        f"(default {','.join(DEFAULT_POLICIES)}; nodes alone with a quota tree)",
    )
    p.add_argument(
        "--queue",
        type=Path,
        help="ElasticQuotaTree YAML: queue every job with Kube Queue (namespace = trace team)",
    )
    p.add_argument(
        "--queue-policies",
        default="none,Priority,Block",
        help="queue modes compared with a quota tree: none (fleet FIFO), Priority, Block, "
        "FIFO, Priority+reclaim (Priority with reclaim on; the others run without it)",
    )
    p.add_argument(
        "--queue-hold",
        choices=("on", "off"),
        default="on" if AdmissionSettings.hold else "off",
        help="with reclaim: the room an eviction frees is held for its claimant until it is "
        "placed or gives up",
    )
    p.add_argument(
        "--queue-reclaim-unplaced",
        choices=("on", "off"),
        default="on" if AdmissionSettings.reclaim_unplaced else "off",
        help="with reclaim: a dequeued gang no member can place node by node claims too",
    )
    p.add_argument(
        "--queue-reclaim-delay",
        default=str(int(AdmissionSettings.reclaim_delay)),
        help="with node claims: how long a dequeued gang stays unplaced before it may claim "
        "node capacity (e.g. 10, 2m)",
    )
    p.add_argument(
        "--queue-reclaim-worth",
        choices=("on", "off"),
        default="on" if AdmissionSettings.reclaim_worth else "off",
        help="with reclaim: evict only when the work lost is worth the wait saved (docs/queue.md)",
    )
    p.add_argument(
        "--queue-reclaim-lookahead",
        default=str(int(AdmissionSettings.reclaim_lookahead)),
        help="with the worth rule: wait an eviction saves beyond the claimant's wait so far "
        "(e.g. 1800, 30m)",
    )
    p.add_argument(
        "--queue-reclaim-min-saving",
        default=str(int(AdmissionSettings.reclaim_min_saving)),
        help="with the worth rule: no eviction of victims that all end by their declared "
        "limits within this (e.g. 300, 5m)",
    )
    p.add_argument(
        "--queue-reclaim-loss-per-gpu",
        default=_loss_per_gpu_text(AdmissionSettings.reclaim_loss_per_gpu),
        help="with reclaim: one eviction destroys at most this much work per GPU its claimant "
        "asks (e.g. 8h: a 2-GPU claimant evicts gangs that lose at most 16 GPU-hours; off: no "
        "limit)",
    )
    p.add_argument(
        "--checkpoint-interval",
        default="0",
        help="jobs checkpoint this often and their state is preserved: an evicted or "
        "failed-over job reruns from its last checkpoint (e.g. 30m; 0: none, rerun from the "
        "start)",
    )
    p.add_argument(
        "--checkpoint-teams",
        default="",
        help="per team checkpoint intervals, overriding --checkpoint-interval: TEAM=30m,...",
    )
    p.add_argument(
        "--queue-timeout",
        type=float,
        default=AdmissionSettings.placement_timeout,
        help="seconds a dequeued job may stay unplaced before TimeoutBackoff",
    )
    p.add_argument(
        "--queue-backoff",
        type=float,
        default=AdmissionSettings.backoff_seconds,
        help="first TimeoutBackoff in seconds (doubles per attempt)",
    )
    p.add_argument(
        "--no-quota",
        choices=("wait", "bypass"),
        default="wait",
        help="jobs whose team is in no quota node: wait (default) or bypass the queue",
    )
    p.add_argument(
        "--racks",
        type=int,
        default=0,
        help="give every member's nodes racks, N nodes to a rack in list order (label "
        "topology.kubernetes.io/rack); policies +required / +preferred keep gangs in one",
    )
    p.add_argument(
        "--topology-wait",
        default=f"{DEFAULT_WAIT_SECONDS}s",
        help="with +preferred: how long a gang that fits only spread waits for one rack before "
        "it is placed spread, as gangTopology.waitSeconds (30m, 0 = at once; default "
        f"{DEFAULT_WAIT_SECONDS} s, the field's)",
    )
    p.add_argument("--out", type=Path, default=Path("out/simulate"), help="report folder")
    p.add_argument("--seed", type=int, default=0, help="seed for random choices and faults")
    p.add_argument("--limit", type=int, help="replay only the first N jobs")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="compress arrivals this many times (datasets without -xN)",
    )
    p.add_argument(
        "--fill-target",
        type=float,
        default=1.3,
        help="alibaba fill: stop when GPU requests reach this share of capacity",
    )
    p.add_argument(
        "--reservation-ttl",
        type=float,
        default=60.0,
        help="seconds the fleet holds a placement for pods not yet bound",
    )
    p.add_argument(
        "--local-load",
        default="",
        help="member-local pods the fleet does not place: RATE[:GPUS[:MEAN_MINUTES]] per "
        "member per hour (e.g. 20:1,2,4,8:30)",
    )
    p.add_argument(
        "--dispatch-latency",
        type=float,
        default=0.0,
        help="seconds from dispatch until the gang's pods reach the member (the race window)",
    )
    p.add_argument(
        "--reservation-latency",
        type=float,
        default=SimConfig.reservation_latency,
        help="with +reserve policies: seconds until a member reserves a gang that fits",
    )
    p.add_argument(
        "--reservation-wait",
        type=float,
        default=SimConfig.reservation_wait,
        help="with +reserve policies: seconds to wait for all Reservations before falling back",
    )
    p.add_argument(
        "--member-order",
        choices=("backfill", "strict"),
        default="backfill",
        help="how a member tries waiting gangs (default backfill, as coscheduling)",
    )
    p.add_argument(
        "--failures",
        type=float,
        default=0.0,
        help="probability that one run attempt of a job fails",
    )
    p.add_argument(
        "--outages", default="", help="MEMBER@START+DURATION,... (e.g. 6214e9@10d+6h) or random:N"
    )
    p.add_argument("--outage-duration", default="6h", help="duration of random outages")
    p.add_argument("--toleration", default="300", help="failover tolerationSeconds (e.g. 300, 5m)")
    p.add_argument("--max-failovers", type=int, default=3, help="give up after this many")
    p.add_argument(
        "--purge",
        choices=("Directly", "Gracefully", "Never"),
        default="Gracefully",
        help="what happens to a copy left in a lost member",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="policy runs in parallel processes (default 1: the machine is shared)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNGs")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return _run(args)
    except (DataError, ValueError, OSError) as err:
        print(f"fleet simulate: error: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    names = expand(args.dataset)
    modes = parse_queue_modes(args.queue_policies)
    queue_settings = AdmissionSettings(
        placement_timeout=args.queue_timeout,
        backoff_seconds=args.queue_backoff,
        backoff_limit=max(args.queue_backoff, AdmissionSettings.backoff_limit),
        no_quota=args.no_quota,
        hold=args.queue_hold == "on",
        reclaim_unplaced=args.queue_reclaim_unplaced == "on",
        reclaim_delay=parse_duration(args.queue_reclaim_delay),
        reclaim_worth=args.queue_reclaim_worth == "on",
        reclaim_lookahead=parse_duration(args.queue_reclaim_lookahead),
        reclaim_min_saving=parse_duration(args.queue_reclaim_min_saving),
        reclaim_loss_per_gpu=parse_loss_per_gpu(args.queue_reclaim_loss_per_gpu),
    )
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be at least 1")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    options = Options(
        data_dir=args.data_dir,
        seed=args.seed,
        limit=args.limit,
        time_scale=args.time_scale,
        fill_target=args.fill_target,
        fleet=args.fleet,
        trace=args.trace,
        queue=args.queue,
        racks=args.racks,
    )
    settings = FailoverSettings(
        toleration_seconds=parse_duration(args.toleration),
        purge_mode=args.purge,
        max_failovers=args.max_failovers,
    )
    scenarios = [build(name, options) for name in names]
    queued = any(s.quota is not None for s in scenarios)
    policies = parse_policies(args.policies or ("nodes" if queued else ",".join(DEFAULT_POLICIES)))
    configs = {s.name: _config(args, s, settings) for s in scenarios}
    tasks = [
        (s.name, p, m)
        for s in scenarios
        for p in policies
        for m in (modes if s.quota is not None else [None])
    ]
    results: dict[tuple[str, str, str | None], RunResult] = {}
    if args.workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = {
                task: pool.submit(
                    _replay_by_name,
                    task[0],
                    options,
                    task[1],
                    args.seed,
                    configs[task[0]],
                    task[2],
                    queue_settings,
                    len(policies),
                )
                for task in tasks
            }
            for task, future in futures.items():
                results[task] = future.result()
                _progress(results[task], task[0])
    else:
        by_name = {s.name: s for s in scenarios}
        for name, policy, mode in tasks:
            results[(name, policy, mode)] = replay(
                by_name[name],
                policy,
                args.seed,
                configs[name],
                mode=mode,
                queue_settings=queue_settings,
                policy_count=len(policies),
            )
            _progress(results[(name, policy, mode)], name)
    runs = []
    for s in scenarios:
        rs = [results[t] for t in tasks if t[0] == s.name]
        outages = configs[s.name].faults.outages
        runs.append(report.ScenarioRun(s, rs, [summarize(r) for r in rs], outages))
    path = report.write(
        args.out, runs, _settings(args, policies, settings), plots_enabled=not args.no_plots
    )
    print(f"report: {path}")
    return 0


def _config(args: argparse.Namespace, scenario: Scenario, settings: FailoverSettings) -> SimConfig:
    span = scenario.trace[-1].submit if scenario.trace else 0.0
    outages = parse_outages(
        args.outages,
        [m.name for m in scenario.fleet.members],
        span=span,
        seed=args.seed,
        duration=parse_duration(args.outage_duration),
    )
    faults = Faults(args.failures, outages, settings, args.seed)
    return SimConfig(
        args.reservation_ttl,
        args.member_order,
        faults,
        dispatch_latency=args.dispatch_latency,
        local_load=parse_local_load(args.local_load, args.seed),
        reservation_latency=args.reservation_latency,
        reservation_wait=args.reservation_wait,
        checkpoint_interval=parse_duration(args.checkpoint_interval),
        checkpoint_teams=parse_checkpoint_teams(args.checkpoint_teams),
        topology_wait=parse_duration(args.topology_wait),
    )


def parse_loss_per_gpu(text: str) -> float:
    """`--queue-reclaim-loss-per-gpu`: a duration (`8h`), or `off` (no limit)."""
    return math.inf if text.strip() == "off" else parse_duration(text)


def _loss_per_gpu_text(seconds: float) -> str:
    return "off" if math.isinf(seconds) else f"{seconds / 3600:g}h"


def parse_checkpoint_teams(text: str) -> dict[str, float]:
    """`team=30m,other=0` -> seconds per team."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        team, sep, value = part.partition("=")
        if not sep or not team.strip():
            raise ValueError(f"--checkpoint-teams: expected TEAM=INTERVAL, got {part!r}")
        out[team.strip()] = parse_duration(value.strip())
    return out


def replay(
    scenario: Scenario,
    policy: str,
    seed: int,
    config: SimConfig,
    *,
    mode: str | None = None,
    queue_settings: AdmissionSettings | None = None,
    policy_count: int = 1,
) -> RunResult:
    """One policy over one scenario; with a quota tree, under queue `mode` (see kubequeue)."""
    members = [m.name for m in scenario.fleet.members]
    made = make_policy(policy, members, seed, topology_wait=config.topology_wait)
    if mode is None or scenario.quota is None:
        return simulate(scenario.fleet, scenario.trace, made, config)
    return replay_queued(
        scenario.fleet,
        scenario.trace,
        made,
        config,
        tree=quota_tree(scenario.quota, scenario.name),
        mode=mode,
        settings=queue_settings,
        label=mode if policy_count == 1 else f"{policy}, {mode}",
    )


def _replay_by_name(
    name: str,
    options: Options,
    policy: str,
    seed: int,
    config: SimConfig,
    mode: str | None = None,
    queue_settings: AdmissionSettings | None = None,
    policy_count: int = 1,
) -> RunResult:
    return replay(
        build(name, options),
        policy,
        seed,
        config,
        mode=mode,
        queue_settings=queue_settings,
        policy_count=policy_count,
    )


def _progress(result: RunResult, scenario: str) -> None:
    s = summarize(result)
    line = (
        f"{scenario:>22} {result.policy:<8} {s['jobs']:>7,} jobs  p90 wait "
        f"{report.human(s['wait_s']['p90']):>7}  mis-dispatches {s['mis_dispatches']:>6,}  "
        f"never started {s['never_started']:>6,}"
    )
    if s["multi_node_gangs"]:
        line += (
            f"  multi-node gangs in one rack {s['multi_node_in_one_domain']:,}/"
            f"{s['multi_node_gangs']:,}"
        )
    start = s["decision_to_start_s"]
    if result.counters["local_started"] or result.counters["reservation_attempts"]:
        line += (
            f"  started within 30 s of the decision {s['started_within_30s']:.1%}, "
            f"decision to start p50 {report.human(start['p50'])} p99 {report.human(start['p99'])}"
        )
    if result.counters["reservation_attempts"]:
        line += (
            f", reservations {result.counters['reservation_attempts']:,} "
            f"(fallbacks {result.counters['reservation_fallbacks']:,})"
        )
    if result.teams:
        violation = sum(t.get("violation_gpu_hours", 0.0) for t in result.teams.values())
        line += (
            f"  violation {violation:,.0f} GPU-h, evictions "
            f"{result.counters.get('queue_reclaims', 0):,}, work lost {s['lost_gpu_hours']:,.0f} "
            "GPU-h"
        )
    print(f"{line}  ({result.wall_seconds:.0f} s)", file=sys.stderr, flush=True)


def _settings(
    args: argparse.Namespace, policies: Sequence[str], failover: FailoverSettings
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "policies": ",".join(policies),
        "seed": args.seed,
        "reservation TTL (s)": args.reservation_ttl,
        "member order": args.member_order,
    }
    if args.limit:
        out["limit"] = args.limit
    if args.racks:
        out["nodes per rack"] = args.racks
        out["topology wait (s)"] = parse_duration(args.topology_wait)
    if args.queue:
        out["quota tree"] = str(args.queue)
    out["queue modes (with a quota tree)"] = args.queue_policies
    out["queue placement timeout (s)"] = args.queue_timeout
    out["queue backoff (s)"] = args.queue_backoff
    if "Priority+reclaim" in args.queue_policies:
        out["reclaim: hold"] = args.queue_hold
        out["reclaim: unplaced gangs claim"] = args.queue_reclaim_unplaced
        out["reclaim: node claims after (s)"] = parse_duration(args.queue_reclaim_delay)
        out["reclaim: worth rule"] = args.queue_reclaim_worth
        out["reclaim: look-ahead (s)"] = parse_duration(args.queue_reclaim_lookahead)
        out["reclaim: min saving (s)"] = parse_duration(args.queue_reclaim_min_saving)
        out["reclaim: work lost per GPU"] = args.queue_reclaim_loss_per_gpu
    if args.checkpoint_interval not in ("", "0") or args.checkpoint_teams:
        out["checkpoint interval"] = args.checkpoint_interval
        out["checkpoint intervals per team"] = args.checkpoint_teams
    if args.local_load:
        out["member-local load"] = args.local_load
        out["dispatch latency (s)"] = args.dispatch_latency
    if any(p.endswith("+reserve") for p in policies):
        out["reservation latency (s)"] = args.reservation_latency
        out["reservation wait (s)"] = args.reservation_wait
    if args.failures or args.outages:
        out["job failure probability"] = args.failures
        out["outages"] = args.outages
        out["failover toleration (s)"] = failover.toleration_seconds
        out["max failovers"] = failover.max_failovers
        out["purge mode"] = failover.purge_mode
    return out
