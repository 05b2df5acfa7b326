"""The client-side rate limit: client-go's token bucket, on an injected clock."""

from __future__ import annotations

import pytest

from fleet.kube import RateLimit


def test_a_burst_goes_at_once_then_requests_queue_at_the_rate() -> None:
    now = [100.0]
    limit = RateLimit(10.0, 2, now=lambda: now[0])
    assert [limit.reserve() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.1, 0.2])
    now[0] += 1.0  # a second later: the queue drained and the bucket is full again
    assert [limit.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.1])


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="qps must be positive"):
        RateLimit(0.0, 5)
