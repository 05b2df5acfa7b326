"""Prometheus-style metrics, rendered in the text exposition format on /metrics.

Small on purpose: counters by one label, gauges, and a histogram of decision times are all the
controller reports, so no client library is needed.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Callable, Mapping


class Counter:
    def __init__(self, name: str, help_: str, label: str) -> None:
        self.name, self.help, self.label = name, help_, label
        self.values: dict[str, float] = defaultdict(float)

    def inc(self, value: str, amount: float = 1.0) -> None:
        self.values[value] += amount

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        lines += [
            f'{self.name}{{{self.label}="{k}"}} {v:g}' for k, v in sorted(self.values.items())
        ]
        return lines


class Gauge:
    def __init__(self, name: str, help_: str) -> None:
        self.name, self.help, self.value = name, help_, 0.0

    def set(self, value: float) -> None:
        self.value = value

    def render(self) -> list[str]:
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name} {self.value:g}",
        ]


class Histogram:
    def __init__(self, name: str, help_: str, buckets: tuple[float, ...]) -> None:
        self.name, self.help, self.buckets = name, help_, buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, count in zip(self.buckets, self.counts, strict=False):
            running += count
            lines.append(f'{self.name}_bucket{{le="{bound:g}"}} {running}')
        running += self.counts[-1]
        lines += [
            f'{self.name}_bucket{{le="+Inf"}} {running}',
            f"{self.name}_sum {self.sum:g}",
            f"{self.name}_count {running}",
        ]
        return lines


#: Per API server: requests sent so far, by (verb, resource).
RequestCounts = Callable[[], Mapping[str, Mapping[tuple[str, str], int]]]


def _render_requests(counts: Mapping[str, Mapping[tuple[str, str], int]]) -> list[str]:
    name = "fleet_api_requests_total"
    lines = [
        f"# HELP {name} Requests sent to the fleet and member API servers, by verb and resource.",
        f"# TYPE {name} counter",
    ]
    for server, by_call in sorted(counts.items()):
        for (verb, resource), n in sorted(by_call.items()):
            lines.append(f'{name}{{server="{server}",verb="{verb}",resource="{resource}"}} {n}')
    return lines


def _render_seconds(seconds: Mapping[str, float]) -> list[str]:
    name = "fleet_api_request_seconds_total"
    lines = [
        f"# HELP {name} Seconds spent waiting for API servers' answers, summed over requests.",
        f"# TYPE {name} counter",
    ]
    lines += [f'{name}{{server="{server}"}} {s:.6f}' for server, s in sorted(seconds.items())]
    cpu = "process_cpu_seconds_total"
    lines += [
        f"# HELP {cpu} CPU time of the controller process (user and system).",
        f"# TYPE {cpu} counter",
        f"{cpu} {time.process_time():.6f}",
    ]
    return lines


class Metrics:
    def __init__(self) -> None:
        self.dispatches = Counter(
            "fleet_dispatches_total", "Gangs placed in a member cluster.", "cluster"
        )
        self.failovers = Counter(
            "fleet_failovers_total",
            "Failovers, by reason (ApplicationFailure, ClusterLost, TaintUntolerated).",
            "reason",
        )
        self.purges = Counter(
            "fleet_old_copies_deleted_total",
            "Copies deleted from clusters a job moved away from (incl. fenced stale copies).",
            "cluster",
        )
        self.orphans = Counter(
            "fleet_orphaned_copies_deleted_total",
            "Member copies deleted by the sweep because their fleet object was gone.",
            "cluster",
        )
        self.pending = Gauge("fleet_pending_jobs", "Gang jobs waiting for a cluster that fits.")
        self.reconciles = Counter(
            "fleet_reconciles_total", "Reconciles of fleet workloads, by outcome.", "outcome"
        )
        self.leader = Gauge("fleet_leader", "1 while this replica is the active controller.")
        self.decision_seconds = Histogram(
            "fleet_placement_decision_seconds",
            "Time to decide one gang's placement.",
            (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
        )

        self.reservation_attempts = Counter(
            "fleet_reservation_attempts_total",
            "Gangs whose capacity fleet started reserving in a member (Koordinator Reservations).",
            "cluster",
        )
        self.reservation_failures = Counter(
            "fleet_reservation_failures_total",
            "Reservations given up, by kind: Failed (one failed or expired) or Timeout (the "
            "bounded wait ran out).",
            "kind",
        )
        self.reservation_seconds = Histogram(
            "fleet_reservation_available_seconds",
            "From reserving a gang to every Reservation Available.",
            (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
        )

    #: Set by the controller: the request counts of its clients, and their waiting time.
    request_counts: RequestCounts | None = None
    request_seconds: Callable[[], Mapping[str, float]] | None = None

    def render(self) -> str:
        parts: list[Counter | Gauge | Histogram] = [
            self.dispatches,
            self.failovers,
            self.purges,
            self.orphans,
            self.pending,
            self.reconciles,
            self.leader,
            self.decision_seconds,
            self.reservation_attempts,
            self.reservation_failures,
            self.reservation_seconds,
        ]
        lines = [line for p in parts for line in p.render()]
        if self.request_counts is not None:
            lines += _render_requests(self.request_counts())
        if self.request_seconds is not None:
            lines += _render_seconds(self.request_seconds())
        return "\n".join(lines) + "\n"
