"""The sender: validated input, optional initial NBBO sent to completion, then the paced stream."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

from kafka.errors import KafkaError
from prometheus_client import CollectorRegistry

from .. import metrics as shared_metrics
from ..fixish import NBBO, MessageType
from . import producer_fix
from .delivery import Delivery
from .errors import DeliveryError, SenderError
from .metrics import SenderMetrics
from .pacing import NS_PER_S, Pacer
from .records import RecordBatch, RecordBuilder
from .report import Progress, SendReport
from .settings import SenderSettings
from .source import STREAM_KINDS, FileSource, Source, layout_of

__all__ = ["Sender", "kafka_producer", "MAX_IN_FLIGHT_BYTES"]

log = logging.getLogger(__name__)

# Unacknowledged value bytes the sender allows before it waits (back-pressure, as Giles did).
MAX_IN_FLIGHT_BYTES = 64 << 20
# Longest wait between reconnection attempts to a broker that went away (Java client's default).
RECONNECT_BACKOFF_MAX_MS = 1000
# The initial NBBO file goes out unpaced in chunks of this many messages.
_INITIAL_CHUNK = 10_000


def kafka_producer(settings: SenderSettings):
    """A kafka-python producer configured from the settings (idempotent whenever acks=all allows it)."""
    from kafka import KafkaProducer

    acks = {"all": "all", "1": 1, "0": 0}[settings.acks]
    if settings.acks != "all":
        log.warning("acks=%s: the producer cannot be idempotent; a retried batch may be written twice", settings.acks)
    # Without it, a batch expiring after a long broker outage stops the idempotent producer for good.
    producer_fix.apply()
    delivery_timeout_ms = int(settings.delivery_timeout_seconds * 1000)
    try:
        return KafkaProducer(
            bootstrap_servers=settings.bootstrap_servers.split(","),
            client_id=f"marketspread-sender-{settings.stream}",
            acks=acks,
            enable_idempotence=settings.acks == "all",
            linger_ms=settings.linger_ms,
            batch_size=settings.producer_batch_bytes,
            # Retries are unlimited until then: a broker restart or outage shorter than this loses nothing.
            delivery_timeout_ms=delivery_timeout_ms,
            # Kafka's rule: delivery.timeout.ms >= linger.ms + request.timeout.ms (default 30 s).
            request_timeout_ms=max(1000, min(30_000, delivery_timeout_ms - settings.linger_ms)),
            # The Java client's default: back within a second of a broker restart, not kafka-python's 30 s.
            reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
            **settings.client_config(),
        )
    except KafkaError as error:
        raise SenderError(f"cannot reach Kafka at {settings.bootstrap_servers}: {error}") from None


class Sender:
    """Sends one stream (`settings.stream`) to its topic; `run()` returns a SendReport.

    `registry` receives the marketspread_sender_* metrics (a fresh one by default);
    `producer_factory(settings)` is the Kafka producer (tests may inject their own).
    """

    def __init__(self, settings: SenderSettings, registry: CollectorRegistry | None = None,
                 producer_factory: Callable[[SenderSettings], object] = kafka_producer,
                 clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = SenderMetrics(self.registry)
        self.kind = STREAM_KINDS[settings.stream]
        self.topic = settings.nbbo_topic if self.kind is MessageType.NBBO else settings.orders_topic
        self._producer_factory = producer_factory
        self._clock = clock
        self._phase = "starting"
        self._delivery: Delivery | None = None
        self._behind = 0.0
        self._phase_started = time.monotonic()

    # -- inputs ---------------------------------------------------------------------------

    def open_sources(self) -> tuple[FileSource | None, Source]:
        """Load and validate every input before anything is sent (InputFileError otherwise)."""
        s = self.settings
        initial = FileSource.open(s.initial_nbbo_file, MessageType.NBBO) if s.initial_nbbo_file else None
        if s.file:
            stream = FileSource.open(s.file, self.kind, loop=s.loop)
        else:
            from .generated import generated_source

            stream = generated_source(s, self.kind)
        return initial, stream

    # -- running --------------------------------------------------------------------------

    def progress(self) -> Progress:
        delivery = self._delivery
        return Progress(
            phase=self._phase,
            submitted_messages=delivery.submitted_messages if delivery else 0,
            acknowledged_messages=delivery.messages if delivery else 0,
            send_errors=delivery.failed_records if delivery else 0,
            behind_seconds=self._behind,
            elapsed_seconds=time.monotonic() - self._phase_started,
        )

    def run(self, stop_event: threading.Event | None = None) -> SendReport:
        stop = stop_event if stop_event is not None else threading.Event()
        initial, stream = self.open_sources()
        s = self.settings
        producer = self._producer_factory(s)
        try:
            server = shared_metrics.serve(self.registry, s.metrics_port)
        except OSError as error:
            producer.close()
            raise SenderError(f"cannot serve metrics on port {s.metrics_port}: {error.strerror or error}") from None
        self.metrics.target_rate.labels(topic=self.topic).set(s.rate)
        behind_gauge = self.metrics.behind.labels(topic=self.topic)
        initial_delivery = self.metrics.delivery(s.nbbo_topic, NBBO.size) if initial else None
        delivery = self.metrics.delivery(self.topic, layout_of(self.kind).size)
        first_ns = last_ns = None
        started = time.monotonic()
        try:
            if initial is not None:
                self._enter("initial NBBO", initial_delivery)
                builder = self._builder(producer, s.nbbo_topic)
                while not stop.is_set() and len(wire := initial.take(_INITIAL_CHUNK)):
                    self._send(producer, builder.build(wire, s.nbbo_topic, self._clock()), initial_delivery, stop)
                # The stream must not start before every initial quote is in Kafka.
                producer.flush()
                log.info("initial NBBO: %d messages acknowledged", initial_delivery.messages)
                if initial_delivery.failed_records:
                    # Orders judged without their symbol's initial quote would all be rejected: stop here.
                    raise DeliveryError(f"{initial_delivery.failed_records} records of the initial NBBO "
                                        f"({initial_delivery.failed_messages} messages) were not delivered to "
                                        f"{s.nbbo_topic}; the stream was not started")
            self._enter("stream", delivery)
            started = time.monotonic()
            builder = self._builder(producer, self.topic)
            pacer = Pacer(s.rate, s.batch_size, int(s.start_at * NS_PER_S) if s.start_at else None, self._clock)
            for k in itertools.count():
                want = s.batch_size
                if s.max_messages:
                    want = min(want, s.max_messages - delivery.submitted_messages)
                if want <= 0 or stop.is_set():
                    break
                wire = stream.take(want)
                if not len(wire):
                    break
                intended = pacer.intended_ns(k)
                # Build before waiting, so the records leave as close to their intended time as possible.
                batch = builder.build(wire, self.topic, intended)
                behind = pacer.wait_until(intended, stop)
                if behind is None:
                    break
                self._behind = behind
                behind_gauge.set(behind)
                self._send(producer, batch, delivery, stop)
                first_ns = intended if first_ns is None else first_ns
                last_ns = intended
        finally:
            self._phase = "flushing"
            try:
                self._flush(producer, [d for d in (initial_delivery, delivery) if d is not None])
            finally:
                try:
                    producer.close(timeout=5)
                except KafkaError as error:  # records it gave up on are already counted as failed
                    log.warning("closing the producer: %r", error)
                if server is not None:
                    server.shutdown()
        wall = time.monotonic() - started
        self._phase = "done"
        failed = [d for d in (initial_delivery, delivery) if d is not None]
        return SendReport(
            stream=s.stream, topic=self.topic, record_format=s.record_format,
            initial_messages=initial_delivery.messages if initial_delivery else 0,
            messages=delivery.messages, records=delivery.records, bytes=delivery.bytes,
            send_errors=sum(d.failed_records for d in failed), failed_messages=sum(d.failed_messages for d in failed),
            first_intended_ns=first_ns, last_intended_ns=last_ns, wall_seconds=wall, stopped=stop.is_set(),
        )

    def _flush(self, producer, deliveries: list[Delivery]) -> None:
        """Wait for every record's outcome; the producer gives each one within the delivery timeout, so
        past that (and a margin) whatever is still pending is counted as failed rather than waited for."""
        from kafka.errors import KafkaTimeoutError

        timeout = self.settings.delivery_timeout_seconds + 30
        try:
            producer.flush(timeout=timeout)
        except KafkaTimeoutError:
            for delivery in deliveries:
                delivery.abandon_pending(f"no outcome within {timeout:.0f} s of the final flush")

    def _enter(self, phase: str, delivery: Delivery) -> None:
        self._phase, self._delivery, self._phase_started = phase, delivery, time.monotonic()

    def _builder(self, producer, topic: str) -> RecordBuilder:
        s = self.settings
        try:
            partitions = producer.partitions_for(topic)
        except KafkaError as error:
            raise SenderError(f"cannot find topic {topic} on {s.bootstrap_servers}: {error}") from None
        if not partitions:
            raise SenderError(f"topic {topic} does not exist on {s.bootstrap_servers}")
        # Framed records stay well under the producer's batch size, so a batch never holds one giant record.
        return RecordBuilder(s.record_format, len(partitions), s.shards,
                             max_record_bytes=max(1, s.producer_batch_bytes // 2))

    def _send(self, producer, batch: RecordBatch, delivery: Delivery, stop: threading.Event) -> None:
        delivery.submitted(batch.messages, batch.value_bytes)
        topic, ts = batch.topic, batch.timestamp_ms
        sent = 0
        single = self.settings.record_format == "message"
        try:
            for key, value, partition, count in zip(batch.keys, batch.values, batch.partitions, batch.message_counts):
                future = producer.send(topic, value=value, key=key, partition=partition, timestamp_ms=ts)
                sent += 1
                if single:
                    future.add_callback(delivery.acknowledged_message)
                    future.add_errback(delivery.failed_message)
                else:
                    future.add_callback(delivery.acknowledged, count, len(value))
                    future.add_errback(delivery.failed, count, len(value))
        except KafkaError as error:
            # Records the producer refused outright are failures too, then the run stops.
            for value, count in zip(batch.values[sent:], batch.message_counts[sent:]):
                delivery.failed(count, len(value), error)
            raise SenderError(f"Kafka refused records for {topic}: {error}") from error
        delivery.wait_in_flight_below(MAX_IN_FLIGHT_BYTES, stop)
