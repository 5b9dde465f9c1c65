"""Records that are not fixish, written onto the input topics in the middle of a real run.

`marketspread run` streams generated data concurrently through the real broker, Spark job,
receiver and senders. Once a quarter of each stream is acknowledged, the test writes bad records
straight onto the input topics with kafka-python: wrong length, unknown type byte, bad side
byte, non-ASCII symbol, NaN and infinite prices, an empty record and, in `framed` format, each
bad message between two valid ones plus a framed batch with a truncated tail (keys and
partitions from `marketspread.partitioning`, like the sender's).

Specified: each bad message lands on the dead-letter topic with its reason and its source topic,
partition, offset and byte offset in headers; the receiver counts them by reason and source topic
(stats.json and /metrics); the job counts them in marketspread_job_dead_letters_total;
summary.json's `dead_letters` and the printed report (the same `render` `marketspread demo`
prints) count them; the job never stops (one process, one query start, still active at the end);
and every valid message is processed: the job decoded every valid message sent (the stream's and
the valid neighbours of bad frames) and the rejections equal the reference model's exactly.
"""

from __future__ import annotations

import json
import struct
import time
from collections import Counter

import numpy as np
import pytest
from kafka import KafkaProducer

from marketspread.cli import main
from marketspread.fixish import Nbbo, Order, Side, encode, frame
from marketspread.localkafka import end_offsets
from marketspread.metrics import Samples
from marketspread.partitioning import shard_key, shard_of
from marketspread.run.orchestrator import Run
from marketspread.run.settings import RunSettings
from marketspread.run.stack import offsets_from
from marketspread.run.summary import render

from kafka_records import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

STREAM = 20_000
SHARDS = 8
PARTITIONS = 2
DEADLINE = 120


def patched(payload: bytes, offset: int, raw: bytes) -> bytes:
    return payload[:offset] + raw + payload[offset + len(raw):]


NAN, INF = struct.pack(">d", float("nan")), struct.pack(">d", float("inf"))
TIME = "20260101-12:00:00.000"
NBBO_NI = encode(Nbbo("NI", 10.0, 10.5, TIME))
ORDER_NI = encode(Order(Side.BUY, 1, "BAD001", "NI", 100.0, 10.0, TIME))

# (topic, bad message, reason): every way of being bad the issue names, on the topic it would come from.
BAD = [
    ("nbbo", NBBO_NI[:-1], "bad-length"),                          # wrong length
    ("nbbo", patched(NBBO_NI, 0, b"\x07"), "unknown-type"),        # unknown type byte
    ("nbbo", patched(NBBO_NI, 1, b"  N\xc9"), "bad-symbol"),       # non-ASCII symbol
    ("nbbo", patched(NBBO_NI, 26, NAN), "bad-number"),             # NaN bid
    ("nbbo", patched(NBBO_NI, 34, INF), "bad-number"),             # infinite offer
    ("orders", ORDER_NI + b"\x00", "bad-length"),                  # wrong length
    ("orders", patched(ORDER_NI, 1, b"\x09"), "bad-side"),         # bad side byte
    ("orders", patched(ORDER_NI, 24, NAN), "bad-number"),          # NaN price
    ("orders", patched(ORDER_NI, 24, b"\xff\xf0" + bytes(6)), "bad-number"),  # -infinite price
    ("orders", b"", "empty"),                                      # empty record
]

# Valid neighbours of the bad frames in `framed` records: a symbol no stream quotes, quoted tightly (so its
# orders are accepted: if its NBBO were lost, its orders would be rejected at 0.0/0.0 and show up as unexpected).
NEIGHBOUR = "ZZZZ"


def neighbour_nbbo(i: int) -> bytes:
    return encode(Nbbo(NEIGHBOUR, 20.0 + i, 20.01 + i, TIME))


def neighbour_order(i: int) -> bytes:
    return encode(Order(Side.SELL, 7, f"ZZ{i:04d}", NEIGHBOUR, 10.0, 20.0, TIME))


class Injection:
    """The bad records: built, written mid-stream, and what they should become."""

    def __init__(self, record_format: str):
        self.framed = record_format == "framed"
        self.records: list[tuple[str, bytes, bytes, int | None]] = []  # (topic kind, key, value, partition)
        self.expected: list[tuple[str, str, int]] = []  # (topic kind, reason, byte offset) per record, in order
        self.valid_messages = 0
        if not self.framed:
            for kind, value, reason in BAD:
                self.records.append((kind, b"NI", value, None))  # Kafka's partitioner, like the sender's
                self.expected.append((kind, reason, 0))
            return
        shard = int(shard_of(np.array([NEIGHBOUR.encode().rjust(4)], "S4"), SHARDS)[0])
        key, partition = shard_key(shard), shard % PARTITIONS
        nbbo_first = sorted(BAD, key=lambda bad: bad[0] != "nbbo")  # the neighbour's quote before its orders
        for i, (kind, value, reason) in enumerate(nbbo_first):
            if not value:  # an empty record is a whole record
                self.records.append((kind, key, b"", partition))
                self.expected.append((kind, reason, 0))
                continue
            before, after = (neighbour_nbbo(i), neighbour_nbbo(i)) if kind == "nbbo" else \
                (neighbour_order(2 * i), neighbour_order(2 * i + 1))
            self.records.append((kind, key, frame(before) + frame(value) + frame(after), partition))
            self.expected.append((kind, reason, 4 + len(before)))
            self.valid_messages += 2
        # A framed batch whose last frame is cut short: the order before it is valid, the tail a dead letter.
        head = frame(neighbour_order(99))
        self.records.append(("orders", key, head + frame(neighbour_order(100))[:30], partition))
        self.expected.append(("orders", "truncated-frame", len(head)))
        self.valid_messages += 1

    def write(self, stack, senders) -> list:
        """Once a quarter of each stream is acknowledged: produce the records, in order; their metadata."""

        def acknowledged(sender) -> float:
            return (sender.metrics() or Samples()).total("marketspread_sender_messages_total")

        stack.wait_until(lambda: all(acknowledged(s) >= STREAM / 4 for s in senders), "a quarter of each stream")
        topics = {"nbbo": stack.kafka.nbbo_topic, "orders": stack.kafka.orders_topic}
        producer = KafkaProducer(bootstrap_servers=stack.kafka.bootstrap_servers, acks="all")
        try:
            now = int(time.time() * 1000)
            futures = [producer.send(topics[kind], key=key, value=value, partition=partition, timestamp_ms=now + i)
                       for i, (kind, key, value, partition) in enumerate(self.records)]
            producer.flush()
            return [f.get(timeout=DEADLINE) for f in futures]
        finally:
            producer.close()



@pytest.mark.parametrize("record_format", ["message", "framed"])
def test_bad_records_mid_stream_are_dead_lettered_counted_everywhere_and_lose_no_valid_message(
        tmp_path, kafka_topics, wallaroo_data, record_format):
    topics = kafka_topics(partitions=PARTITIONS, record_format=record_format, shards=SHARDS)
    data = tmp_path / "data"
    assert main(["generate", "--symbols", "350", "--nbbo", str(STREAM), "--orders", str(STREAM), "--seed", "23",
                 "--reject-ratio", "0.005", "--out", str(data)]) == 0
    injection = Injection(record_format)
    seen: dict = {}

    def during_streams(stack, senders) -> None:
        seen["job_pid"] = stack.service("job").pid
        seen["sent"] = injection.write(stack, senders)

    def before_stop(stack) -> None:
        job, receiver = stack.service("job"), stack.service("receiver")
        seen["job_alive"] = job.running() and job.pid == seen["job_pid"]
        seen["job"], seen["receiver"] = job.metrics(), receiver.metrics()
        seen["input_end"] = end_offsets(stack.kafka.bootstrap_servers, [stack.kafka.nbbo_topic,
                                                                          stack.kafka.orders_topic])

    settings = RunSettings(**topics.model_dump(), initial_nbbo=str(data / "initial-nbbo.msg"),
                           nbbo=str(data / "nbbo.msg"), orders=str(data / "orders.msg"), out=str(tmp_path / "out"),
                           rate=2_000, batch_size=200, partitions=PARTITIONS, progress=False,
                           timeout_seconds=600)
    summary = Run(settings, during_streams=during_streams, before_stop=before_stop).execute()

    bad = len(injection.expected)
    names = {"nbbo": topics.nbbo_topic, "orders": topics.orders_topic}
    # Every bad message on the dead-letter topic, with the record it came from.
    expected = sorted((names[kind], meta.partition, meta.offset, offset, reason)
                      for (kind, reason, offset), meta in zip(injection.expected, seen["sent"]))
    letters = read_topic(topics.bootstrap_servers, topics.dead_letter_topic)
    headers = [{k: v.decode() for k, v in letter.headers} for letter in letters]
    assert sorted((h["marketspread.source.topic"], int(h["marketspread.source.partition"]),
                   int(h["marketspread.source.offset"]), int(h["marketspread.source.byte-offset"]),
                   h["marketspread.reason"]) for h in headers) == expected
    # ... written during the stream: every partition they were written to received valid records after them.
    for meta in seen["sent"]:
        assert seen["input_end"][(meta.topic, meta.partition)] > meta.offset + 1
    # Counted by the receiver by reason and source topic, in stats.json and on /metrics.
    reasons = Counter(reason for _, reason, _ in injection.expected)
    by_topic = Counter(names[kind] for kind, _, _ in injection.expected)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["dead_letters"] == dict(reasons) and stats["dead_letters_by_source_topic"] == dict(by_topic)
    assert stats["dead_letters_total"] == bad
    metric = Counter()
    for labels, value in seen["receiver"].matching("marketspread_receiver_dead_letters_total"):
        metric[(labels["reason"], labels["source_topic"])] += value
    assert metric == Counter((reason, names[kind]) for kind, reason, _ in injection.expected)
    # Counted by the job, which never stopped and decoded every valid message sent.
    job = seen["job"]
    assert seen["job_alive"] and job.value("marketspread_job_query_active") == 1.0
    assert job.value("marketspread_job_dead_letters_total") == bad
    assert job.value("marketspread_job_input_messages_total") == 350 + 2 * STREAM + injection.valid_messages
    assert offsets_from(job, "marketspread_job_committed_offset") == seen["input_end"]
    job_log = (tmp_path / "out" / "logs" / "job.log").read_text()
    assert job_log.count(" started: ") == 1
    # And in summary.json and the report `marketspread run` and `marketspread demo` print.
    assert summary["dead_letters"] == bad
    assert f"dead letters {bad:,}" in render(summary)
    assert summary["correct"] and summary["missing"] == 0 and summary["unexpected"] == 0
    assert summary["rejections_unique"] == summary["rejections_expected"] > 0
    assert bad == (10 if record_format == "message" else 11)
