"""The controller's metrics, served on /metrics in Prometheus' text format by prometheus_client.

prometheus_client renders what a hand-written exposition got wrong: values past a million in
full (`1234567`, not `1.23457e+06`, which made a busy counter look frozen), label values escaped
(a quote or backslash in a cluster name), and the process' own CPU and memory. Each `Metrics`
has its own registry, so two controllers in one test process do not share counters.

The small wrappers keep one label per counter (the controller's call sites say
`metrics.dispatches.inc(cluster)`) and let tests read a value back without scraping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleet.api import parse_time, to_epoch

# `<name>_created` series double every counter and answer no question fleet has.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: Histogram buckets for waits that range from a second to hours (queue wait, placement).
WAIT_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)


class Counter:
    """A counter with one label."""

    def __init__(self, registry: CollectorRegistry, name: str, help_: str, label: str) -> None:
        self.name, self.label = name, label
        self._metric = prometheus_client.Counter(name, help_, [label], registry=registry)

    def inc(self, value: str, amount: float = 1.0) -> None:
        self._metric.labels(value).inc(amount)

    @property
    def values(self) -> dict[str, float]:
        """Label value -> count, for tests and the dashboard."""
        return {
            s.labels[self.label]: s.value
            for m in self._metric.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }


class PairCounter:
    """A counter with two labels (a member and why)."""

    def __init__(
        self, registry: CollectorRegistry, name: str, help_: str, labels: tuple[str, str]
    ) -> None:
        self.name, self.labels = name, labels
        self._metric = prometheus_client.Counter(name, help_, list(labels), registry=registry)

    def inc(self, first: str, second: str, amount: float = 1.0) -> None:
        self._metric.labels(first, second).inc(amount)

    @property
    def values(self) -> dict[tuple[str, str], float]:
        """(label values) -> count, for tests and the dashboard."""
        return {
            (s.labels[self.labels[0]], s.labels[self.labels[1]]): s.value
            for m in self._metric.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }


class LabeledGauge:
    """A gauge with one label."""

    def __init__(self, registry: CollectorRegistry, name: str, help_: str, label: str) -> None:
        self.name, self.label = name, label
        self._metric = prometheus_client.Gauge(name, help_, [label], registry=registry)

    def set(self, value: str, amount: float) -> None:
        self._metric.labels(value).set(amount)

    @property
    def values(self) -> dict[str, float]:
        return {s.labels[self.label]: s.value for m in self._metric.collect() for s in m.samples}


class Gauge:
    def __init__(self, registry: CollectorRegistry, name: str, help_: str) -> None:
        self._metric = prometheus_client.Gauge(name, help_, registry=registry)

    def set(self, value: float) -> None:
        self._metric.set(value)

    @property
    def value(self) -> float:
        return next(s.value for m in self._metric.collect() for s in m.samples)


class Histogram:
    def __init__(
        self, registry: CollectorRegistry, name: str, help_: str, buckets: tuple[float, ...]
    ) -> None:
        self.name = name
        self._metric = prometheus_client.Histogram(name, help_, buckets=buckets, registry=registry)

    def observe(self, value: float) -> None:
        self._metric.observe(value)

    def _sample(self, suffix: str) -> float:
        return next(
            s.value for m in self._metric.collect() for s in m.samples if s.name.endswith(suffix)
        )

    @property
    def sum(self) -> float:
        return self._sample("_sum")

    @property
    def count(self) -> float:
        return self._sample("_count")


#: Per API server: requests sent so far, by (verb, resource).
RequestCounts = Callable[[], Mapping[str, Mapping[tuple[str, str], int]]]


class _ClientCollector(Collector):
    """The API clients' own tallies, read at scrape time (they count; nothing is copied)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        counts, seconds = self.metrics.request_counts, self.metrics.request_seconds
        if counts is not None:
            requests = CounterMetricFamily(
                "fleet_api_requests",
                "Requests sent to the fleet and member API servers, by verb and resource.",
                labels=["server", "verb", "resource"],
            )
            for server, by_call in sorted(counts().items()):
                for (verb, resource), n in sorted(by_call.items()):
                    requests.add_metric([server, verb, resource], n)
            yield requests
        if seconds is not None:
            waited = CounterMetricFamily(
                "fleet_api_request_seconds",
                "Seconds spent waiting for API servers' answers, summed over requests.",
                labels=["server"],
            )
            for server, s in sorted(seconds().items()):
                waited.add_metric([server], s)
            yield waited


class OutsideCopies(Collector):
    """Copies of jobs outside their target, per cluster and state (the ledger's
    Unreachable, Overlap, Deleting): `fleet_copies_outside_target`. Kept per job and summed at
    scrape time, so a job whose copies are gone simply drops out."""

    def __init__(self) -> None:
        self.by_job: dict[str, dict[tuple[str, str], int]] = {}

    def set(self, job: str, outside: Iterable[tuple[str, str]]) -> None:
        """The (cluster, state) of every copy `job` has outside its target now."""
        counts: dict[tuple[str, str], int] = {}
        for pair in outside:
            counts[pair] = counts.get(pair, 0) + 1
        if counts:
            self.by_job[job] = counts
        else:
            self.by_job.pop(job, None)

    @property
    def totals(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for counts in self.by_job.values():
            for pair, n in counts.items():
                out[pair] = out.get(pair, 0) + n
        return out

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "fleet_copies_outside_target",
            "Copies of jobs still in a cluster other than their target: Unreachable (unfenced: "
            "the cluster does not answer or left the fleet), Overlap (kept by purgeMode "
            "Gracefully or Never), Deleting (pods not gone yet).",
            labels=["cluster", "state"],
        )
        for (cluster, state), n in sorted(self.totals.items()):
            gauge.add_metric([cluster, state], n)
        yield gauge


def seconds_since_created(obj: Mapping[str, Any], now: float) -> float | None:
    """Seconds from an object's creationTimestamp to `now` (None without a readable one)."""
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return max(0.0, now - to_epoch(parse_time(stamp)))
    except ValueError:
        return None


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.dispatches = Counter(
            registry, "fleet_dispatches_total", "Gangs placed in a member cluster.", "cluster"
        )
        self.failovers = Counter(
            registry,
            "fleet_failovers_total",
            "Failovers, by reason (ApplicationFailure, GangUnschedulable, ClusterLost, "
            "TaintUntolerated, MemberUnjoined).",
            "reason",
        )
        self.purges = Counter(
            registry,
            "fleet_old_copies_deleted_total",
            "Copies deleted from clusters a job moved away from (incl. fenced stale copies).",
            "cluster",
        )
        self.orphans = Counter(
            registry,
            "fleet_orphaned_copies_deleted_total",
            "Member copies deleted by the collector because their fleet object was gone.",
            "cluster",
        )
        self.pending = Gauge(
            registry, "fleet_pending_jobs", "Gang jobs waiting for a cluster that fits."
        )
        self.reconciles = Counter(
            registry,
            "fleet_reconciles_total",
            "Reconciles of fleet workloads, by outcome.",
            "outcome",
        )
        self.leader = Gauge(
            registry, "fleet_leader", "1 while this replica is the active controller."
        )
        self.decision_seconds = Histogram(
            registry,
            "fleet_placement_decision_seconds",
            "Time to decide one gang's placement.",
            (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
        )
        self.placement_seconds = Histogram(
            registry,
            "fleet_placement_seconds",
            "From a job's creation to fleet choosing its member (first placement only; includes "
            "time queued and time held for capacity).",
            WAIT_BUCKETS,
        )
        self.dispatch_seconds = Histogram(
            registry,
            "fleet_dispatch_seconds",
            "From a job's creation on the fleet to its copy created in the member (first "
            "placement only).",
            WAIT_BUCKETS,
        )
        self.queue_wait_seconds = Histogram(
            registry,
            "fleet_queue_wait_seconds",
            "From a QueueUnit's creation to its first dequeue (Kube Queue).",
            WAIT_BUCKETS,
        )
        self.reservation_attempts = Counter(
            registry,
            "fleet_reservation_attempts_total",
            "Gangs whose capacity fleet started reserving in a member (Koordinator Reservations).",
            "cluster",
        )
        self.reservation_failures = Counter(
            registry,
            "fleet_reservation_failures_total",
            "Reservations given up, by kind: Failed (one failed or expired) or Timeout (the "
            "bounded wait ran out).",
            "kind",
        )
        self.reservation_seconds = Histogram(
            registry,
            "fleet_reservation_available_seconds",
            "From reserving a gang to every Reservation Available.",
            (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
        )
        self.token_renewals = Counter(
            registry,
            "fleet_token_renewals_total",
            "Bound member tokens the leader renewed, by member.",
            "cluster",
        )
        self.token_renewal_failures = PairCounter(
            registry,
            "fleet_token_renewal_failures_total",
            "Refused or failed renewals of a member's bound token, by member and reason (the API "
            "server's: Forbidden, Unauthorized; or Unreachable).",
            ("cluster", "reason"),
        )
        self.token_expiry = LabeledGauge(
            registry,
            "fleet_member_token_expiry_timestamp_seconds",
            "When the bound token fleet holds for a member expires (Unix time): alert well "
            "before it, the member turns NotReady then.",
            "cluster",
        )
        self.outside_copies = OutsideCopies()
        registry.register(self.outside_copies)
        registry.register(_ClientCollector(self))
        # process_cpu_seconds_total and the process' memory, from /proc (Linux only).
        ProcessCollector(registry=registry)

    #: Set by the controller: the request counts of its clients, and their waiting time.
    request_counts: RequestCounts | None = None
    request_seconds: Callable[[], Mapping[str, float]] | None = None

    def render(self) -> str:
        return prometheus_client.generate_latest(self.registry).decode()
