"""`marketspread k8s status`: the receiver's figures read from Prometheus text, and the quantile estimate."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from marketspread.k8s.status import histogram_quantile, receiver_figures
from marketspread.metrics import parse


def test_the_quantile_is_interpolated_within_the_bucket_holding_its_rank_as_prometheus_does():
    buckets = [(0.1, 2.0), (0.2, 6.0), (0.4, 10.0), (float("inf"), 10.0)]
    # rank 5 of 10 lies in (0.1, 0.2], 3 of its 4 observations in: 0.1 + 0.1 * 3/4
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.175)
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.05)  # the first bucket starts at 0
    assert histogram_quantile(1.0, buckets) == pytest.approx(0.4)


def test_a_rank_in_the_infinite_bucket_gives_the_largest_finite_bound_and_an_empty_histogram_none():
    assert histogram_quantile(0.99, [(0.1, 1.0), (1.0, 2.0), (float("inf"), 10.0)]) == 1.0
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def test_the_figures_come_from_the_receivers_own_metric_names():
    import numpy as np

    from marketspread.fixish import ORDER_RESULT
    from marketspread.receiver.metrics import ReceiverMetrics
    from marketspread.receiver.tally import Tally

    tally = Tally()
    registry = CollectorRegistry()
    ReceiverMetrics(tally, registry)
    results = np.zeros(3, dtype=ORDER_RESULT.dtype)
    results["order_id"] = [b"A", b"B", b"A"]
    results["timestamp"] = [1_000_000_000, 1_000_000_000, 1_000_000_000]
    tally.add_results(results, 1_020_000_000)  # 20 ms each
    tally.add_dead_letter("bad-side", "orders", 2)
    tally.consumed("rejections", 0, 3)
    figures = receiver_figures((parse(generate_latest(registry).decode()), "here", None))
    assert (figures.received, figures.unique, figures.duplicates, figures.malformed) == (3, 2, 1, 0)
    assert (figures.dead_letters, figures.dead_letters_by_reason) == (2, {"bad-side": 2})
    assert figures.latency_count == 2
    assert figures.latency_mean_ms == pytest.approx(20.0)
    assert figures.consumed == {"rejections": 3}
    assert figures.last_receive_time == pytest.approx(1.02)


def test_an_unreachable_receiver_is_reported_not_raised():
    figures = receiver_figures((None, "service x", "connection refused"))
    assert (figures.source, figures.error, figures.received) == ("service x", "connection refused", None)
