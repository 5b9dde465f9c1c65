"""The plain peer: Market Spread in one kafka-python process, a dict, one message at a time.

What a Python developer writes first: a consumer subscribed to both topics with default
settings, a producer with default settings, the shared codec and rule, a dict of quotes.
Rejections go to the rejections topic exactly as the Spark job writes them (record format
`message`: one OrderResult per record keyed by symbol; `framed`: per input record, one record
of framed OrderResults with the input's key), so the same receiver measures it.
"""

from __future__ import annotations

import logging
import threading

from ..settings import PeerSettings
from .counters import PeerCounters
from .logic import DictMarketSpread, output_value

__all__ = ["run"]

log = logging.getLogger(__name__)


def run(settings: PeerSettings, stop: threading.Event) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    servers = settings.bootstrap_servers.split(",")
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=settings.group_id, auto_offset_reset="earliest",
                             client_id="peer-plain")
    # Subscribing before the client has the topics' metadata can leave the first assignment empty
    # until the next metadata refresh (5 minutes): ask for it first.
    topics = (settings.nbbo_topic, settings.orders_topic)
    while not stop.is_set() and not all(consumer.partitions_for_topic(t) for t in topics):
        stop.wait(0.2)
    consumer.subscribe(topics)
    producer = KafkaProducer(bootstrap_servers=servers, client_id="peer-plain")
    counters = PeerCounters()
    counters.serve(settings.metrics_port)
    book = DictMarketSpread(bulk=settings.system == "plain-bulk")
    framed = settings.record_format == "framed"
    out = settings.rejections_topic
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=100)
            if not counters.ready and consumer.assignment():
                counters.ready = 1
            for tp, records in batch.items():
                for record in records:
                    results, messages, malformed = book.on_record(record.value, record.timestamp, framed)
                    for value in output_value(results, framed):
                        producer.send(out, key=record.key, value=value)
                        counters.outputs += 1
                    counters.results += len(results)
                    counters.messages += messages
                    counters.malformed += malformed
                counters.records += len(records)
                counters.offsets[(tp.topic, tp.partition)] = records[-1].offset + 1
    finally:
        producer.flush()
        producer.close()
        consumer.close()
        counters.shutdown()
