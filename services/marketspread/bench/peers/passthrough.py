"""The passthrough: consume both input topics, forward the order records unchanged. The floor.

No decoding, no state, no rule: each order record goes to the passthrough topic with its key,
value, partition number and timestamp (the intended send time) unchanged; NBBO records are
consumed and counted, not forwarded. Its output is thus what Market Spread would emit if every
order were rejected, and the harness's probe (probe.py) measures the latency of every order
as receive time - record timestamp, with the same percentile code as the receiver.

It uses confluent-kafka (librdkafka), the fastest Kafka client Python has, batch consume
and an unbounded-as-possible producer: the least any Python consumer-producer can cost on this
broker. Message counts (for the harness) come from record sizes, not from decoding.
"""

from __future__ import annotations

import logging
import threading

from ...fixish import NBBO, ORDER
from ..settings import PeerSettings
from .counters import PeerCounters

__all__ = ["run", "CONSUME_BATCH", "CONSUME_WAIT"]

log = logging.getLogger(__name__)

CONSUME_BATCH = 10_000
# consume() waits until it has CONSUME_BATCH messages or this long: the most it adds to latency.
CONSUME_WAIT = 0.005


def run(settings: PeerSettings, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, Producer

    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.group_id,
                         "auto.offset.reset": "earliest", "client.id": "peer-passthrough"})
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "client.id": "peer-passthrough"})
    counters = PeerCounters()
    counters.serve(settings.metrics_port)
    orders_topic, out = settings.orders_topic, settings.passthrough_topic
    framed = settings.record_format == "framed"
    sizes = {settings.nbbo_topic: NBBO.framed_size, orders_topic: ORDER.framed_size}

    def assigned(_consumer, partitions) -> None:
        counters.ready = 1

    consumer.subscribe([settings.nbbo_topic, orders_topic], on_assign=assigned)
    try:
        while not stop.is_set():
            batch = consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_WAIT)
            messages = 0
            for record in batch:
                if record.error():
                    log.warning("consume error: %s", record.error())
                    continue
                topic, value = record.topic(), record.value()
                messages += len(value) // sizes[topic] if framed else 1
                if topic == orders_topic:
                    _produce(producer, out, record, value)
                    counters.outputs += 1
                    counters.results += len(value) // sizes[topic] if framed else 1
                counters.offsets[(topic, record.partition())] = record.offset() + 1
            counters.records += len(batch)
            counters.messages += messages
            producer.poll(0)
    finally:
        producer.flush(30)
        consumer.close()
        counters.shutdown()


def _produce(producer, topic: str, record, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=record.key(), partition=record.partition(),
                             timestamp=record.timestamp()[1])
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)
