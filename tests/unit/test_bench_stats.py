"""The bench's numbers: weighted nearest-rank percentiles, mergeable histograms, robust rates and the lag trend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.bench.stats import (
    HISTOGRAM_EDGES_MS, batch_periods, histogram, histogram_pairs, histogram_percentile_ms, lag_trend,
    least_squares_slope, lower_envelope, merge_histograms, theil_sen_slope, weighted_percentiles_ms,
    windowed_rates,
)
from marketspread.receiver.latency import percentiles_ms

MS = 1_000_000

latencies = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=200)


@given(latencies)
@settings(max_examples=200, deadline=None)
def test_weighted_percentiles_with_unit_weights_are_the_receivers_percentiles(values):
    values = np.array(values, dtype=np.int64)
    assert weighted_percentiles_ms(values, np.ones(len(values), dtype=np.int64)) == percentiles_ms(values)
    assert weighted_percentiles_ms(values) == percentiles_ms(values)


@given(st.lists(st.tuples(st.integers(0, 10**10), st.integers(0, 50)), min_size=1, max_size=100))
@settings(max_examples=200, deadline=None)
def test_a_weight_counts_as_that_many_copies_of_the_value(pairs):
    values = np.array([v for v, _ in pairs], dtype=np.int64)
    weights = np.array([w for _, w in pairs], dtype=np.int64)
    expanded = np.repeat(values, weights)
    expected = percentiles_ms(expanded) if len(expanded) else {"count": 0, "p50": None, "p90": None, "p99": None,
                                                                 "p999": None, "max": None}
    assert weighted_percentiles_ms(values, weights) == expected


def test_weighted_percentiles_pick_measured_values_by_rank():
    # 1,000 messages: 990 in one record at 10 ms, 9 at 500 ms, 1 at 2 s.
    result = weighted_percentiles_ms(np.array([2000, 10, 500]) * MS, np.array([1, 990, 9]))
    assert result == {"count": 1000, "p50": 10.0, "p90": 10.0, "p99": 10.0, "p999": 500.0, "max": 2000.0}


def test_weighted_percentiles_refuse_mismatched_or_negative_weights():
    with pytest.raises(ValueError):
        weighted_percentiles_ms(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError):
        weighted_percentiles_ms(np.array([1, 2]), np.array([1, -1]))


def test_histogram_bins_are_upper_inclusive_and_cover_everything():
    edges = np.array(HISTOGRAM_EDGES_MS)
    values = np.array([0.0, edges[0], edges[0] * 1.01, edges[40], 1e9])
    counts = histogram(values)
    assert len(counts) == len(edges) + 1 and counts.sum() == len(values)
    assert counts[0] == 2  # 0 and exactly the first edge
    assert counts[1] == 1
    assert counts[40] == 1  # exactly an edge: in the bin it closes
    assert counts[-1] == 1  # beyond the last edge
    assert edges[30] == pytest.approx(10.0) and edges[50] == pytest.approx(1000.0)


def test_histograms_merge_by_adding_counts_and_pairs_round_trip():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(3, 1, 500), rng.lognormal(6, 0.5, 300)
    merged = merge_histograms(histogram_pairs(histogram(a)), histogram_pairs(histogram(b)))
    assert (merged == histogram(np.concatenate([a, b]))).all()
    weighted = histogram(np.array([1.0, 100.0]), np.array([3, 7]))
    assert weighted.sum() == 10 and merge_histograms(histogram_pairs(weighted)).tolist() == weighted.tolist()


def test_a_histogram_percentile_is_an_upper_bound_within_one_bin():
    rng = np.random.default_rng(5)
    values_ms = rng.lognormal(4, 1.2, 5_000)
    counts = histogram(values_ms)
    exact = percentiles_ms((values_ms * MS).astype(np.int64))
    for name, (num, den) in {"p50": (50, 100), "p99": (99, 100), "p999": (999, 1000)}.items():
        bound = histogram_percentile_ms(counts, num, den)
        assert exact[name] <= bound <= exact[name] * 10 ** 0.1 * 1.0001
    assert histogram_percentile_ms(np.zeros(5), 1, 2) is None


def test_theil_sen_recovers_a_slope_despite_outliers():
    t = np.arange(100, dtype=float)
    y = 3.0 * t + 7
    y[[5, 50, 77]] = [1e6, -1e6, 5e5]
    assert theil_sen_slope(t, y) == pytest.approx(3.0)
    assert least_squares_slope(t, 3.0 * t + 1) == pytest.approx(3.0)
    assert theil_sen_slope([1.0], [2.0]) == 0.0 and least_squares_slope([1.0, 1.0], [2.0, 3.0]) == 0.0


@pytest.mark.parametrize("phase", [0.0, 0.3, 0.7, 1.3])
def test_a_line_through_a_staircase_does_not_depend_on_where_the_window_cuts_the_stairs(phase):
    # A micro-batch counter: +rate * 1.5 every 1.5 s, sampled every 0.5 s.
    rate, period = 40_000.0, 1.5
    t = np.arange(0, 30, 0.5) + phase
    counter = rate * period * np.floor(t / period)
    steady = (t >= 5) & (t <= 25)
    assert least_squares_slope(t[steady], counter[steady]) == pytest.approx(rate, rel=0.005)


def test_windowed_rates_of_a_counter():
    t = np.arange(0, 10, 0.5)
    rates = windowed_rates(t, 1000 * t, 2.0)
    assert rates[0] == 0 and rates[1:] == pytest.approx(np.full(len(t) - 1, 1000.0))


def sawtooth(rate: float, period: float, seconds: float, drift: float = 0.0, dt: float = 0.5, phase: float = 0.0):
    """Lag of a micro-batch system: grows at `rate` during a batch, drops to rate * period when it commits;
    `drift` (msgs/s) is a backlog that builds underneath."""
    t = np.arange(0, seconds, dt) + phase
    within = np.mod(t, period)
    return t, rate * (period + within) + drift * t


@pytest.mark.parametrize("period, phase", [(1.5, 0.0), (3.5, 0.0), (3.5, 1.7), (0.9, 0.2)])
def test_a_sawtooth_that_keeps_up_is_not_growing(period, phase):
    rate = 200_000.0
    t, lag = sawtooth(rate, period, 30, phase=phase)
    trend = lag_trend(t, lag, rate, since=15, envelope=2 * period + 0.5, batch=period)
    assert not trend.growing


@pytest.mark.parametrize("period", [0.5, 1.5, 3.5])
def test_a_backlog_under_the_sawtooth_is_growing(period):
    rate = 200_000.0
    t, lag = sawtooth(rate, period, 60, drift=0.2 * rate)  # the system processes 80 % of the rate
    trend = lag_trend(t, lag, rate, since=30, envelope=2 * period + 0.5, batch=period)
    assert trend.growing and trend.relative_slope == pytest.approx(0.2, abs=0.05)


def test_steady_noisy_lag_is_not_growing_and_linear_growth_is():
    rng = np.random.default_rng(11)
    t = np.arange(0, 30, 0.5)
    rate = 50_000.0
    flat = 5_000 + rng.normal(0, 2_000, len(t)).clip(-5_000)
    assert not lag_trend(t, flat, rate, since=15, envelope=1.0).growing
    growing = 0.1 * rate * t + rng.normal(0, 2_000, len(t))
    assert lag_trend(t, growing, rate, since=15, envelope=1.0).growing


def test_too_few_points_or_no_rate_is_never_growing():
    t = np.arange(6, dtype=float)
    assert not lag_trend(t, 1e6 * t, 1000.0).growing
    assert not lag_trend(np.arange(20.0), 1e6 * np.arange(20.0), 0.0).growing
    assert lag_trend(np.array([]), np.array([]), 10.0).points == 0


def test_the_lower_envelope_and_batch_periods():
    t = np.arange(10, dtype=float)
    assert lower_envelope(t, np.array([5, 3, 4, 9, 1, 2, 8, 7, 6, 0.0]), 2.0).tolist() == [5, 3, 3, 3, 1, 1, 1, 2,
                                                                                          6, 0]
    counter = np.array([0, 0, 0, 5, 5, 9, 9, 9, 9, 12.0])
    assert batch_periods(t, counter).tolist() == [2.0, 4.0]


def micro_batches(rate: float, capacity: float, overhead: float, seconds: float, dt: float = 0.5):
    """A micro-batch system: each batch takes everything that arrived before it started and needs
    overhead + messages / capacity seconds. Returns sample times, lag and the processed counter."""
    ends, covered, start = [], [], 0.0
    while start < seconds:
        duration = overhead + rate * (start - (covered[-1] if covered else 0.0)) / capacity
        covered.append(start)
        start += duration
        ends.append(start)
    t = np.arange(0, seconds, dt)
    processed = np.array([rate * max((c for e, c in zip(ends, covered) if e <= x), default=0.0) for x in t])
    return t, rate * t - processed, processed


def test_batches_that_lengthen_because_the_system_falls_behind_are_growing_lag():
    # 40,000 msgs/s offered to a system that does 32,000: a few ever longer batches in the window.
    t, lag, processed = micro_batches(40_000, 32_000, overhead=1.0, seconds=30)
    periods = batch_periods(t, processed)
    trend = lag_trend(t, lag, 40_000, since=15, envelope=2 * periods.max() + 0.5, batch=float(np.median(periods)))
    assert trend.growing


def test_batches_that_settle_are_not_growing_lag():
    # The same overhead with capacity to spare: batches settle at overhead / (1 - rate / capacity) = 2 s.
    t, lag, processed = micro_batches(40_000, 80_000, overhead=1.0, seconds=40)
    periods = batch_periods(t, processed)
    trend = lag_trend(t, lag, 40_000, since=20, envelope=2 * periods.max() + 0.5, batch=float(np.median(periods)))
    assert not trend.growing
