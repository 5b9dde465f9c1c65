"""The receiver: rejections and dead letters from Kafka to files, counts, latency and offsets.

Each poll is handled as a unit: decode, append to the files, flush and record a commit point
(files.py), mark the offsets as written out, then commit them to Kafka. Nothing is
committed before it is written, so a crash at any moment loses nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
from kafka import TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry

from .. import metrics as shared_metrics
from ..fixish import FixishError, decode_order_results
from .decoding import decode_rejections
from .errors import ReceiverError
from .files import OutputFiles, Restored
from .metrics import ReceiverMetrics
from .settings import ReceiverSettings
from .tally import ReceiverStats, Tally

__all__ = ["Receiver", "kafka_consumer", "REASON_HEADER", "SOURCE_TOPIC_HEADER"]

log = logging.getLogger(__name__)

# Dead-letter headers the job writes (docs/architecture.md).
REASON_HEADER = "marketspread.reason"
SOURCE_TOPIC_HEADER = "marketspread.source.topic"
_POLL_MS = 200
# How often to look for partitions or topics that did not exist at start.
_REFRESH_SECONDS = 5.0
_LOG_FIRST_MALFORMED = 10


def kafka_consumer(settings: ReceiverSettings):
    from kafka import KafkaConsumer

    try:
        return KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers.split(","),
            group_id=settings.group_id,
            client_id="marketspread-receiver",
            enable_auto_commit=False,
            auto_offset_reset="earliest" if settings.from_beginning else "latest",
            max_poll_records=5000,
            # The Java client's default: back within a second of a broker restart, not kafka-python's 30 s.
            reconnect_backoff_max_ms=1000,
            **settings.client_config(),
        )
    except KafkaError as error:
        raise ReceiverError(f"cannot reach Kafka at {settings.bootstrap_servers}: {error}") from None


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


class _Assignment:
    """Every partition of both topics, assigned by hand: one receiver per group reads them all.

    Manual assignment instead of group subscription: a receiver restarted after a crash starts
    at once, instead of waiting for the dead member's session to expire (45 s by default).
    """

    def __init__(self, consumer, topics: tuple[str, ...], resume: dict[tuple[str, int], int]):
        self.consumer = consumer
        self.topics = topics
        self.resume = resume
        self.partitions: set[TopicPartition] = set()
        self.unresolved: set[TopicPartition] = set()

    def refresh(self) -> None:
        """Take on partitions (and topics) that appeared; each starts at its commit point if it has one."""
        try:
            wanted = {TopicPartition(topic, p) for topic in self.topics
                      for p in self.consumer.partitions_for_topic(topic) or ()}
        except KafkaError as error:  # the broker is away (restarting): keep what we have, look again later
            log.warning("cannot list the partitions of %s: %r", ", ".join(self.topics), error)
            return
        new = wanted - self.partitions
        if not new:
            return
        self.consumer.assign(sorted(wanted | self.partitions))
        for tp in new:
            offset = self.resume.get((tp.topic, tp.partition))
            if offset is not None:
                self.consumer.seek(tp, offset)
        self.partitions |= new
        self.unresolved |= new


class Receiver:
    """Consumes `rejections_topic` and `dead_letter_topic` until `run()`'s stop event is set.

    `stats()` is a snapshot at any time (from any thread); `assigned` is set once the consumer
    has all partitions of both topics and knows where it starts in each.
    """

    def __init__(self, settings: ReceiverSettings, registry: CollectorRegistry | None = None,
                 consumer_factory: Callable[[ReceiverSettings], object] = kafka_consumer,
                 clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tally = Tally()
        self.metrics = ReceiverMetrics(self.tally, self.registry)
        self.assigned = threading.Event()
        self._consumer_factory = consumer_factory
        self._clock = clock
        self._framed = settings.record_format == "framed"

    def stats(self) -> ReceiverStats:
        return self.tally.snapshot()

    # -- running --------------------------------------------------------------------------

    def run(self, stop_event: threading.Event | None = None) -> ReceiverStats:
        stop = stop_event if stop_event is not None else threading.Event()
        s = self.settings
        files = OutputFiles(s.out_dir) if s.out_dir else None
        resume: dict[tuple[str, int], int] = {}
        if files is not None:
            restored = files.open(s.group_id)
            if restored is not None:
                self._restore(restored)
                resume = restored.offsets
        consumer = server = None
        try:
            consumer = self._consumer_factory(s)
            try:
                server = shared_metrics.serve(self.registry, s.metrics_port)
            except OSError as error:
                raise ReceiverError(f"cannot serve metrics on port {s.metrics_port}: {error.strerror or error}") \
                    from None
            assignment = _Assignment(consumer, (s.rejections_topic, s.dead_letter_topic), resume)
            assignment.refresh()
            log.info("receiving %s and %s as group %s (%s records)%s", s.rejections_topic, s.dead_letter_topic,
                     s.group_id, s.record_format, f", writing to {s.out_dir}" if files else "")
            next_stats = next_refresh = time.monotonic()
            while not stop.is_set():
                if time.monotonic() >= next_refresh:
                    assignment.refresh()
                    next_refresh = time.monotonic() + _REFRESH_SECONDS
                batch = consumer.poll(timeout_ms=_POLL_MS) if assignment.partitions else {}
                if not assignment.partitions:
                    stop.wait(_POLL_MS / 1000)
                receive_ns = self._clock()
                if batch:
                    self._handle(consumer, batch, receive_ns, files)
                self._resolve_positions(consumer, assignment)
                if files is not None and time.monotonic() >= next_stats:
                    files.write_stats(self.stats().to_json())
                    next_stats = time.monotonic() + s.stats_interval_seconds
        finally:
            try:
                if files is not None:
                    files.write_stats(self.stats().to_json())
            finally:
                if consumer is not None:
                    consumer.close(autocommit=False)
                if server is not None:
                    server.shutdown()
                if files is not None:
                    files.close()
        return self.stats()

    def _restore(self, restored: Restored) -> None:
        try:
            results = decode_order_results(restored.results, framed=True)
        except FixishError as error:
            raise ReceiverError(f"{self.settings.out_dir}: the rejections file is damaged ({error}); "
                                f"remove the directory's receiver-state.json to start afresh") from None
        if len(results) != len(restored.receive_ns):
            raise ReceiverError(f"{self.settings.out_dir}: {len(results)} OrderResults but "
                                f"{len(restored.receive_ns)} receive times; remove receiver-state.json to start afresh")
        self.tally.add_results(results, restored.receive_ns.astype(np.int64))
        for entry in restored.dead_letters:
            headers = entry.get("headers") or {}
            self.tally.add_dead_letter(headers.get(REASON_HEADER), headers.get(SOURCE_TOPIC_HEADER))
        self.tally.add_malformed(len(restored.malformed))
        for (topic, partition), offset in restored.offsets.items():
            self.tally.consumed(topic, partition, offset)
        log.info("resuming from the last commit point: %d OrderResults, %d dead letters, %d malformed, offsets %s",
                 len(results), len(restored.dead_letters), len(restored.malformed), restored.offsets)

    def _handle(self, consumer, batch: dict, receive_ns: int, files: OutputFiles | None) -> None:
        done: dict = {}
        for tp, records in batch.items():
            if not records:
                continue
            if tp.topic == self.settings.rejections_topic:
                self._rejections(tp, records, receive_ns, files)
            else:
                self._dead_letters(tp, records, files)
            done[tp] = records[-1].offset + 1
        if files is not None:
            with self.tally.lock:
                offsets = dict(self.tally.offsets)
            offsets.update({(tp.topic, tp.partition): offset for tp, offset in done.items()})
            files.commit_point(self.settings.group_id, offsets)
        for tp, offset in done.items():
            self.tally.consumed(tp.topic, tp.partition, offset)
        try:
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in done.items()})
        except KafkaError as error:
            # The files' commit point is what a restart resumes from; the next commit catches Kafka up.
            log.warning("offset commit failed (will be retried with the next poll): %r", error)

    def _rejections(self, tp, records, receive_ns: int, files: OutputFiles | None) -> None:
        decoded = decode_rejections([r.value for r in records], self._framed)
        results = decoded.results
        if len(results):
            self.tally.add_results(results, receive_ns)
            if files is not None:
                files.append_results(results.tobytes(), np.full(len(results), receive_ns, dtype=np.int64))
        for bad in decoded.malformed:
            record = records[bad.index]
            self.tally.add_malformed()
            if self.tally.malformed <= _LOG_FIRST_MALFORMED:
                log.warning("%s[%d]@%d is not an OrderResult: %s: %s", tp.topic, tp.partition, record.offset,
                            bad.reason.value, bad.detail)
            if files is not None:
                files.append_malformed(record.value or b"", {
                    "topic": tp.topic, "partition": tp.partition, "offset": record.offset,
                    "timestamp_ms": record.timestamp, "key": _text(record.key), "reason": bad.reason.value,
                    "detail": bad.detail})

    def _dead_letters(self, tp, records, files: OutputFiles | None) -> None:
        for record in records:
            headers = {key: _text(value) for key, value in (record.headers or [])}
            self.tally.add_dead_letter(headers.get(REASON_HEADER), headers.get(SOURCE_TOPIC_HEADER))
            if files is not None:
                files.append_dead_letter(record.value or b"", {
                    "topic": tp.topic, "partition": tp.partition, "offset": record.offset,
                    "timestamp_ms": record.timestamp, "key": _text(record.key), "headers": headers})

    def _resolve_positions(self, consumer, assignment: _Assignment) -> None:
        """Partitions with nothing consumed yet: where they start is what has been written out."""
        for tp in list(assignment.unresolved):
            try:
                position = consumer.position(tp, timeout_ms=1000)
            except KafkaError as error:  # the broker is away: try again after the next poll
                log.debug("no position for %s yet: %r", tp, error)
                continue
            if position is None:
                continue
            with self.tally.lock:
                known = self.tally.offsets.get((tp.topic, tp.partition))
            if known is None or position > known:
                self.tally.consumed(tp.topic, tp.partition, position)
            assignment.unresolved.discard(tp)
        if assignment.partitions and not assignment.unresolved:
            self.assigned.set()
