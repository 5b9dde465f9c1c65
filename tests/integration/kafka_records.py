"""Reading a topic back to its end, for tests that check what a component wrote to Kafka."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, TopicPartition

__all__ = ["read_topic"]


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> list:
    """Every record of `topic` up to its end offsets at the time of the call, by partition then offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        records = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"could not read {topic} to its end offsets {end} within {timeout} s"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
