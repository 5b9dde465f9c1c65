"""Open-loop pacing like Wallaroo's Giles sender: a batch of N messages every N / rate seconds.

Batch k has the intended send time `start + k * interval`, fixed in advance. When the sender
falls behind (a slow broker, a GC pause, back-pressure) it sends the late batches back to back
with their original intended times instead of skipping or re-basing them: latency measured
from intended times then includes the delay the system caused (no coordinated omission).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from fractions import Fraction

__all__ = ["Pacer", "NS_PER_S"]

NS_PER_S = 1_000_000_000


class Pacer:
    """Intended send times for batches 0, 1, 2, ... and waiting for them.

    `rate` is messages per second (0: unpaced, each batch's intended time is when it is built).
    `clock` returns epoch nanoseconds; intended times are epoch nanoseconds because they become
    Kafka record timestamps and, through the job, the OrderResults' timestamps.
    """

    def __init__(self, rate: float, batch_size: int, start_ns: int | None = None,
                 clock: Callable[[], int] = time.time_ns):
        if rate < 0 or batch_size < 1:
            raise ValueError(f"rate {rate} must be >= 0 and batch size {batch_size} >= 1")
        self.rate = rate
        self.batch_size = batch_size
        self.clock = clock
        self.start_ns = clock() if start_ns is None else start_ns
        # Exact rational arithmetic: batch k is due at start + floor(k * batch * 1e9 / rate) ns,
        # so intended times never drift, however long the run.
        self._rate = Fraction(rate)
        self.interval_ns = batch_size * NS_PER_S / rate if rate else 0.0

    @property
    def paced(self) -> bool:
        return self.rate > 0

    def intended_ns(self, k: int) -> int:
        """Intended send time of batch k; unpaced, simply now."""
        if not self.paced:
            return self.clock()
        return self.start_ns + k * self.batch_size * NS_PER_S * self._rate.denominator // self._rate.numerator

    def wait_until(self, intended_ns: int, stop: threading.Event) -> float | None:
        """Sleep until `intended_ns`; return how far behind it we are (s, >= 0), or None if `stop` was set."""
        while True:
            if stop.is_set():
                return None
            delay = intended_ns - self.clock()
            if delay <= 0:
                return -delay / NS_PER_S
            # Event.wait wakes early when stopped, so a stop never waits a whole interval.
            if stop.wait(delay / NS_PER_S):
                return None
