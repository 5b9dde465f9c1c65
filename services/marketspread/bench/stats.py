"""The numbers of a benchmark, as pure functions over numpy arrays (no Kafka, no processes).

- Percentiles are nearest-rank, exactly as the receiver computes them
  (`receiver.latency.percentiles_ms`): the p-th percentile of n values is the ceil(p * n)-th
  smallest, so every percentile is a measured value. The weighted form counts a value `w`
  times (one Kafka record carrying `w` messages that share one intended send time).
- Histograms have fixed edges (10 per decade from 10 µs to 1,000 s), so histograms of
  different steps or systems merge by adding counts; percentiles are never averaged.
- Trends are robust: lag is judged by its lower envelope (the troughs of a micro-batch
  system's sawtooth), its Theil-Sen slope (the median of pairwise slopes), and a second,
  level-based check must agree before lag counts as growing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..receiver.latency import PERCENTILES, percentiles_ms

__all__ = [
    "HISTOGRAM_EDGES_MS", "weighted_percentiles_ms", "histogram", "histogram_pairs", "merge_histograms",
    "histogram_percentile_ms", "theil_sen_slope", "least_squares_slope", "windowed_rates", "LagTrend", "lag_trend",
    "LAG_TOLERANCE", "batch_periods", "lower_envelope",
]

_NS_PER_MS = 1e6
# Upper edges ("<= edge") in ms: 10^(k/10) for k = -20 .. 60, i.e. 0.01 ms .. 1,000,000 ms.
HISTOGRAM_EDGES_MS = tuple(float(10 ** (k / 10)) for k in range(-20, 61))
# Lag that grows by more than this share of the offered rate (and visibly so) is growing.
LAG_TOLERANCE = 0.03


def weighted_percentiles_ms(values_ns, weights=None) -> dict:
    """count, p50, p90, p99, p999, max in ms; `weights[i]` copies of `values_ns[i]` (None: one each)."""
    values = np.asarray(values_ns, dtype=np.int64)
    if weights is None:
        return percentiles_ms(values)
    weights = np.asarray(weights, dtype=np.int64)
    if len(weights) != len(values):
        raise ValueError(f"{len(values)} values but {len(weights)} weights")
    if (weights < 0).any():
        raise ValueError("weights must be >= 0")
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    n = int(weights.sum())
    if not n:
        return {"count": 0, **{name: None for name in PERCENTILES}, "max": None}
    order = np.argsort(values, kind="stable")
    values, cumulative = values[order], np.cumsum(weights[order])
    result: dict = {"count": n}
    for name, (num, den) in PERCENTILES.items():
        rank = max(1, -(-num * n // den))  # ceil in integers: 99.9 is not exact in binary floating point
        result[name] = float(values[int(np.searchsorted(cumulative, rank, side="left"))]) / _NS_PER_MS
    result["max"] = float(values[-1]) / _NS_PER_MS
    return result


def histogram(values_ms, weights=None) -> np.ndarray:
    """Counts per bin: [<= edge 0], (edge 0, edge 1], ..., (last edge, inf): len(edges) + 1 bins."""
    values = np.asarray(values_ms, dtype=np.float64)
    bins = np.searchsorted(np.asarray(HISTOGRAM_EDGES_MS), values, side="left")
    w = None if weights is None else np.asarray(weights, dtype=np.int64)
    return np.bincount(bins, weights=w, minlength=len(HISTOGRAM_EDGES_MS) + 1).astype(np.int64)


def histogram_pairs(counts) -> list[list[float]]:
    """Non-empty bins as [upper edge in ms (inf for the last), count]: compact enough for bench.json."""
    edges = list(HISTOGRAM_EDGES_MS) + [float("inf")]
    return [[edges[i], int(c)] for i, c in enumerate(np.asarray(counts)) if c]


def merge_histograms(*pairs_lists: list[list[float]]) -> np.ndarray:
    """Histograms as `histogram_pairs` -> one counts array (bins add up)."""
    edges = list(HISTOGRAM_EDGES_MS) + [float("inf")]
    index = {edge: i for i, edge in enumerate(edges)}
    counts = np.zeros(len(edges), dtype=np.int64)
    for pairs in pairs_lists:
        for edge, count in pairs:
            counts[index[float(edge)]] += int(count)
    return counts


def histogram_percentile_ms(counts, num: int, den: int) -> float | None:
    """Upper edge of the bin holding the nearest-rank percentile num/den (an upper bound on it)."""
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if not n:
        return None
    rank = max(1, -(-num * n // den))
    i = int(np.searchsorted(np.cumsum(counts), rank, side="left"))
    return (list(HISTOGRAM_EDGES_MS) + [float("inf")])[i]


def _evenly(n: int, limit: int) -> np.ndarray:
    return np.arange(n) if n <= limit else np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))


def theil_sen_slope(t, y, max_points: int = 400) -> float:
    """Median of the slopes between every pair of points (points thinned evenly to `max_points`)."""
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(t) != len(y):
        raise ValueError("t and y must have the same length")
    keep = _evenly(len(t), max_points)
    t, y = t[keep], y[keep]
    i, j = np.triu_indices(len(t), 1)
    dt = t[j] - t[i]
    ok = dt > 0
    if not ok.any():
        return 0.0
    return float(np.median((y[j] - y[i])[ok] / dt[ok]))


def least_squares_slope(t, y) -> float:
    """Ordinary least-squares slope; 0 for fewer than two distinct times."""
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(t) < 2 or np.ptp(t) == 0:
        return 0.0
    tc = t - t.mean()
    return float((tc * (y - y.mean())).sum() / (tc * tc).sum())


def windowed_rates(t, counter, window: float) -> np.ndarray:
    """Rate of a cumulative counter at each sample, over the trailing `window` seconds (0 at the start)."""
    t = np.asarray(t, dtype=np.float64)
    c = np.asarray(counter, dtype=np.float64)
    start = np.searchsorted(t, t - window, side="left")
    dt = t - t[start]
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(dt > 0, (c - c[start]) / dt, 0.0)
    return np.maximum(rates, 0.0)


@dataclass(frozen=True)
class LagTrend:
    """How lag moved over a window: the slope of its lower envelope, and that envelope's early and late levels."""

    slope_msgs_per_s: float  # growth of the lag's lower envelope, messages per second
    relative_slope: float  # that growth as a share of the offered rate
    early_lag: float  # median envelope over the window's first quarter
    late_lag: float  # ... and over its last quarter
    envelope_seconds: float  # width of the rolling minimum
    points: int
    growing: bool

    def to_dict(self) -> dict:
        return asdict(self)


def batch_periods(t, processed) -> np.ndarray:
    """How long the processed counter stood still between increases (micro-batch lengths; for a
    system that never pauses, about the sampling interval)."""
    t = np.asarray(t, dtype=np.float64)
    processed = np.asarray(processed, dtype=np.float64)
    moved = t[np.flatnonzero(np.diff(processed) > 0) + 1]
    return np.diff(moved)


def lower_envelope(t, y, width: float) -> np.ndarray:
    """Rolling minimum of y over the trailing `width` seconds at each sample."""
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    start = np.searchsorted(t, t - width, side="left")
    return np.array([y[a:i + 1].min() for i, a in enumerate(start)]) if len(t) else y


def lag_trend(t, lag, rate: float, since: float | None = None, envelope: float = 0.0, batch: float = 0.0,
              tolerance: float = LAG_TOLERANCE) -> LagTrend:
    """Is lag growing from `since` on (t seconds, lag messages) at offered `rate` msgs/s?

    A micro-batch system's lag is a sawtooth: it rises at the full rate while a batch runs and
    drops when the batch commits, to the data that arrived during that batch (rate * its
    length). Raw slopes over a few batches mean little; the test looks at the lower envelope
    (the rolling minimum over `envelope` seconds, a few batches: the troughs), which stays flat
    when the system keeps up and rises when a backlog builds. Growing means both: the envelope's
    Theil-Sen slope exceeds `tolerance` * rate, and its last quarter's median exceeds its first
    quarter's by that slope's worth plus one typical `batch` (seconds) of data, the jitter that
    batch lengths alone put into the troughs (at most a quarter of the window: batches that long
    are themselves a sign of falling behind). Fewer than 8 points is too little evidence.
    """
    t = np.asarray(t, dtype=np.float64)
    lag = np.asarray(lag, dtype=np.float64)
    width = max(envelope, 1e-9)
    env = lower_envelope(t, lag, width)
    if since is not None:
        keep = t >= since
        t, env = t[keep], env[keep]
    n = len(t)
    if n < 8 or rate <= 0:
        level = float(np.median(env)) if n else 0.0
        return LagTrend(0.0, 0.0, level, level, width, n, False)
    slope = theil_sen_slope(t, env)
    quarter = max(2, n // 4)
    early, late = float(np.median(env[:quarter])), float(np.median(env[-quarter:]))
    span = float(np.median(t[-quarter:]) - np.median(t[:quarter]))
    relative = slope / rate
    jitter = min(batch, span / 4)  # never so much that a few long batches hide a backlog
    growing = relative > tolerance and (late - early) > rate * (tolerance * span + jitter)
    return LagTrend(slope, relative, early, late, width, n, bool(growing))
