"""End-to-end latencies: every value kept exactly (for percentiles) and binned (for Prometheus).

Latency = receive wall time - the order's intended send time, both epoch nanoseconds. Values
are kept as int64 nanoseconds in fixed-size numpy chunks, so memory grows by 8 bytes a
result without reallocating, and percentiles are exact rather than read off bucket edges.
"""

from __future__ import annotations

import numpy as np

from ..metrics import LATENCY_BUCKETS

__all__ = ["LatencyRecorder", "PERCENTILES", "percentiles_ms"]

# Name in stats.json -> percentile as an exact fraction (99.9 is not exact in binary floating point).
PERCENTILES = {"p50": (50, 100), "p90": (90, 100), "p99": (99, 100), "p999": (999, 1000)}
_CHUNK = 1 << 20
_NS_PER_MS = 1e6


class LatencyRecorder:
    def __init__(self, buckets_seconds: tuple[float, ...] = LATENCY_BUCKETS):
        self.buckets_seconds = tuple(buckets_seconds)
        # Prometheus buckets are "<= le"; integer edges make that test exact for integer values.
        self._edges_ns = np.array([round(b * 1e9) for b in self.buckets_seconds], dtype=np.int64)
        self._bucket_counts = np.zeros(len(self._edges_ns) + 1, dtype=np.int64)  # last: +Inf only
        self._full: list[np.ndarray] = []
        self._current = np.empty(_CHUNK, dtype=np.int64)
        self._fill = 0
        self.count = 0
        self.sum_ns = 0
        self.max_ns: int | None = None

    def record(self, latencies_ns: np.ndarray) -> None:
        values = np.asarray(latencies_ns, dtype=np.int64)
        if not len(values):
            return
        self._bucket_counts += np.bincount(np.searchsorted(self._edges_ns, values, side="left"),
                                           minlength=len(self._bucket_counts))
        self.count += len(values)
        self.sum_ns += int(values.sum())
        top = int(values.max())
        self.max_ns = top if self.max_ns is None else max(self.max_ns, top)
        start = 0
        while start < len(values):
            take = min(len(values) - start, _CHUNK - self._fill)
            self._current[self._fill:self._fill + take] = values[start:start + take]
            self._fill += take
            start += take
            if self._fill == _CHUNK:
                self._full.append(self._current)
                self._current = np.empty(_CHUNK, dtype=np.int64)
                self._fill = 0

    def values(self) -> np.ndarray:
        """Every latency recorded, in nanoseconds, in the order recorded."""
        return np.concatenate(self._full + [self._current[:self._fill]])

    def percentiles_ms(self) -> dict:
        return percentiles_ms(self.values())

    def cumulative_buckets(self) -> list[tuple[float, int]]:
        """(le in seconds, count of values <= le) for each bucket, then (inf, total)."""
        cumulative = np.cumsum(self._bucket_counts)
        return [(le, int(c)) for le, c in zip(self.buckets_seconds, cumulative[:-1])] + [
            (float("inf"), int(cumulative[-1]))]

    @property
    def sum_seconds(self) -> float:
        return self.sum_ns / 1e9


def percentiles_ms(values_ns: np.ndarray) -> dict:
    """count, p50, p90, p99, p999 and max in ms: nearest-rank percentiles, so each is a measured value.

    The p-th percentile of n values is the ceil(p * n)-th smallest, computed in integers.
    """
    n = len(values_ns)
    if not n:
        return {"count": 0, **{name: None for name in PERCENTILES}, "max": None}
    ranks = [max(1, -(-num * n // den)) - 1 for num, den in PERCENTILES.values()]
    picked = np.partition(values_ns, ranks + [n - 1])
    result: dict = {"count": int(n)}
    result.update({name: float(picked[rank]) / _NS_PER_MS for name, rank in zip(PERCENTILES, ranks)})
    result["max"] = float(picked[n - 1]) / _NS_PER_MS
    return result
