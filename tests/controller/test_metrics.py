"""/metrics as Prometheus reads it: exact values past a million, escaped label values."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fleet.controller.metrics import Metrics, seconds_since_created


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_values_past_a_million_are_exact() -> None:
    metrics = Metrics()
    metrics.dispatches.inc("member-1", 1_234_567)
    metrics.dispatches.inc("member-1")
    metrics.pending.set(123_456_789)
    metrics.request_counts = lambda: {"fleet": {("list", "pods"): 9_876_543_210}}
    metrics.request_seconds = lambda: {"fleet": 2_000_000.25}

    samples = _samples(metrics.render())

    assert samples[("fleet_dispatches_total", (("cluster", "member-1"),))] == 1_234_568
    assert samples[("fleet_pending_jobs", ())] == 123_456_789
    key = (("resource", "pods"), ("server", "fleet"), ("verb", "list"))
    assert samples[("fleet_api_requests_total", key)] == 9_876_543_210
    assert samples[("fleet_api_request_seconds_total", (("server", "fleet"),))] == 2_000_000.25
    assert ("process_cpu_seconds_total", ()) in samples


def test_label_values_are_escaped() -> None:
    metrics = Metrics()
    odd = 'east "1"\\zone\nb'
    metrics.failovers.inc(odd)

    text = metrics.render()

    assert 'reason="east \\"1\\"\\\\zone\\nb"' in text
    assert _samples(text)[("fleet_failovers_total", (("reason", odd),))] == 1


def test_histograms_and_the_names_kept() -> None:
    metrics = Metrics()
    metrics.queue_wait_seconds.observe(42)
    metrics.placement_seconds.observe(3)
    metrics.dispatch_seconds.observe(4)

    families = {f.name for f in text_string_to_metric_families(metrics.render())}

    assert {
        "fleet_dispatches",
        "fleet_failovers",
        "fleet_old_copies_deleted",
        "fleet_orphaned_copies_deleted",
        "fleet_pending_jobs",
        "fleet_reconciles",
        "fleet_leader",
        "fleet_placement_decision_seconds",
        "fleet_placement_seconds",
        "fleet_dispatch_seconds",
        "fleet_queue_wait_seconds",
        "fleet_reservation_attempts",
        "fleet_reservation_failures",
        "fleet_reservation_available_seconds",
    } <= families
    assert metrics.queue_wait_seconds.count == 1 and metrics.queue_wait_seconds.sum == 42


def test_seconds_since_created() -> None:
    obj = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert seconds_since_created(obj, 1767225610.0) == 10.0
    assert seconds_since_created({"metadata": {"creationTimestamp": "nonsense"}}, 0) is None
    assert seconds_since_created({}, 0) is None


def test_the_grafana_dashboard_asks_only_for_metrics_the_controller_serves() -> None:
    import json
    import re
    from pathlib import Path

    board = json.loads((Path(__file__).parents[2] / "docs" / "grafana" / "fleet.json").read_text())
    metrics = Metrics()
    metrics.request_counts = lambda: {"fleet": {("get", "pods"): 1}}
    metrics.request_seconds = lambda: {"fleet": 1.0}
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    served = {
        f.name + suffix
        for f in text_string_to_metric_families(metrics.render())
        for suffix in suffixes.get(f.type, ("",))
    }
    asked = {
        name
        for panel in board["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b((?:fleet|process)_[a-z_]+)\b", target["expr"])
    }
    assert asked and asked <= served, asked - served
