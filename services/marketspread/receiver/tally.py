"""What the receiver has seen: counts, duplicates by order id, latencies, dead letters, offsets.

Pure bookkeeping, no Kafka and no files: the receiver feeds it what it has written out, the
metrics and stats.json read it, and a restart rebuilds it from the files.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from .latency import LatencyRecorder, percentiles_ms

__all__ = ["Tally", "ReceiverStats", "UNKNOWN"]

# Label value for a dead letter whose headers lack the reason or the source topic.
UNKNOWN = "unknown"


@dataclass(frozen=True)
class ReceiverStats:
    """A consistent snapshot; `to_json()` is the content of stats.json."""

    received: int
    unique: int
    duplicates: int
    latency_ms: dict
    dead_letters: dict[str, int]
    dead_letters_by_source_topic: dict[str, int]
    malformed: int
    consumed_offsets: dict[str, dict[str, int]]
    last_receive_time: float | None
    written_at: float = field(default_factory=time.time)

    @property
    def dead_letters_total(self) -> int:
        return sum(self.dead_letters.values())

    def to_json(self) -> dict:
        return asdict(self) | {"dead_letters_total": self.dead_letters_total}

    def consumed(self, topic: str, partition: int) -> int | None:
        return self.consumed_offsets.get(topic, {}).get(str(partition))


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received = 0
        self.duplicates = 0
        self._seen: set[bytes] = set()
        self.latency = LatencyRecorder()
        self.dead_letters: Counter[tuple[str, str]] = Counter()  # (reason, source topic)
        self.malformed = 0
        self.offsets: dict[tuple[str, int], int] = {}
        self.last_receive_ns: int | None = None

    @property
    def unique(self) -> int:
        return len(self._seen)

    def add_results(self, results: np.ndarray, receive_ns: int | np.ndarray) -> np.ndarray:
        """Count OrderResults (wire records with `order_id` and `timestamp`); return the mask of first arrivals.

        Latency is recorded for an order's first OrderResult only: a duplicate is a replay of a
        result already delivered (after a job restart), not a second wait for the same order.
        """
        receive = np.broadcast_to(np.asarray(receive_ns, dtype=np.int64), (len(results),))
        first = np.zeros(len(results), dtype=bool)
        with self.lock:
            seen = self._seen
            for i, order_id in enumerate(results["order_id"].tolist()):
                if order_id not in seen:
                    seen.add(order_id)
                    first[i] = True
            self.received += len(results)
            self.duplicates += len(results) - int(first.sum())
            timestamps = results["timestamp"][first].astype(np.int64)
            self.latency.record(receive[first] - timestamps)
            if len(results):
                latest = int(receive.max())
                self.last_receive_ns = latest if self.last_receive_ns is None else max(self.last_receive_ns, latest)
        return first

    def add_dead_letter(self, reason: str | None, source_topic: str | None, count: int = 1) -> None:
        with self.lock:
            self.dead_letters[(reason or UNKNOWN, source_topic or UNKNOWN)] += count

    def add_malformed(self, count: int = 1) -> None:
        with self.lock:
            self.malformed += count

    def consumed(self, topic: str, partition: int, next_offset: int) -> None:
        """Everything before `next_offset` of this partition is written out."""
        with self.lock:
            self.offsets[(topic, partition)] = next_offset

    def snapshot(self) -> ReceiverStats:
        with self.lock:
            by_reason: Counter[str] = Counter()
            by_topic: Counter[str] = Counter()
            for (reason, topic), n in self.dead_letters.items():
                by_reason[reason] += n
                by_topic[topic] += n
            offsets: dict[str, dict[str, int]] = {}
            for (topic, partition), offset in sorted(self.offsets.items()):
                offsets.setdefault(topic, {})[str(partition)] = offset
            latencies = self.latency.values()  # a copy: percentiles are computed outside the lock
            counts = (self.received, self.unique, self.duplicates, self.malformed, self.last_receive_ns)
        received, unique, duplicates, malformed, last_ns = counts
        return ReceiverStats(
            received=received, unique=unique, duplicates=duplicates, latency_ms=percentiles_ms(latencies),
            dead_letters=dict(sorted(by_reason.items())), dead_letters_by_source_topic=dict(sorted(by_topic.items())),
            malformed=malformed, consumed_offsets=offsets,
            last_receive_time=None if last_ns is None else last_ns / 1e9,
        )
