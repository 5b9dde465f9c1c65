"""The receiver against a real Kafka broker: files, exact counts, commits after writing, metrics, restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaProducer
from kafka.errors import CommitFailedError

from marketspread.fixish import ORDER_RESULT, OrderResult, Side, encode_order_result, frame, frame_all, iter_frames
from marketspread.localkafka import end_offsets, group_offsets
from marketspread.metrics import LATENCY_BUCKETS, scrape
from marketspread.receiver import Receiver, ReceiverSettings
from marketspread.receiver.app import kafka_consumer
from marketspread.run.stack import free_port

pytestmark = pytest.mark.kafka

MS = 1_000_000
RECEIVED_AT = 1_800_000_000_000 * MS  # the receivers' fake clock: latencies are exact


def result(order_id: str, latency_ms: int, symbol: str = "NI") -> bytes:
    return encode_order_result(OrderResult(Side.SELL, 42, order_id, symbol, 100.0, 10.25, 10.0, 10.6,
                                           RECEIVED_AT - latency_ms * MS))


def dead_letter_headers(reason: str, source_topic: str, offset: int) -> list[tuple[str, bytes]]:
    return [("marketspread.reason", reason.encode()), ("marketspread.detail", b"because"),
            ("marketspread.source.topic", source_topic.encode()), ("marketspread.source.partition", b"0"),
            ("marketspread.source.offset", str(offset).encode()), ("marketspread.source.byte-offset", b"0")]


def produce(bootstrap: str, records: list[dict]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for record in records:
            producer.send(**record)
        producer.flush()
    finally:
        producer.close()


def receiver_settings(topics, out_dir: Path, group_id: str, **fields) -> ReceiverSettings:
    return ReceiverSettings(**topics.model_dump(), group_id=group_id, out_dir=str(out_dir),
                            stats_interval_seconds=0.5, **fields)


class Running:
    """A Receiver in a thread; `until_consumed()` waits for it to have written out both topics to their end."""

    def __init__(self, receiver: Receiver):
        self.receiver = receiver
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.receiver.run(self.stop)
        except BaseException as error:  # surfaced by finish()
            self.error = error

    def until_consumed(self, timeout: float = 60) -> None:
        s = self.receiver.settings
        targets = end_offsets(s.bootstrap_servers, [s.rejections_topic, s.dead_letter_topic])
        deadline = time.monotonic() + timeout
        while True:
            stats = self.receiver.stats()
            if all(stats.consumed(t, p) == offset for (t, p), offset in targets.items()):
                return
            assert self.thread.is_alive(), f"the receiver died: {self.error!r}"
            assert time.monotonic() < deadline, f"consumed {stats.consumed_offsets}, want {targets}"
            time.sleep(0.05)

    def finish(self, timeout: float = 60):
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the receiver did not stop"
        if self.error is not None:
            raise self.error
        return self.receiver.stats()


class CommitAudit:
    """Wraps the real consumer: every offset commit must already be covered by the files' commit point."""

    def __init__(self, out_dir: Path, fail_commits: bool = False):
        self.out_dir = out_dir
        self.fail_commits = fail_commits
        self.commits: list[dict] = []

    def factory(self, settings: ReceiverSettings):
        consumer = kafka_consumer(settings)
        audit = self

        class Audited:
            def __getattr__(self, name):
                return getattr(consumer, name)

            def commit(self, offsets=None, timeout_ms=None):
                state = json.loads((audit.out_dir / "receiver-state.json").read_text())
                written = (audit.out_dir / "rejections.msg").stat().st_size
                for tp, meta in offsets.items():
                    assert state["offsets"][tp.topic][str(tp.partition)] >= meta.offset
                assert state["sizes"]["rejections.msg"] == written
                audit.commits.append({(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()})
                if audit.fail_commits:
                    raise CommitFailedError("injected by the test")
                return consumer.commit(offsets, timeout_ms=timeout_ms)

        return Audited()


def frames_of(path: Path) -> list[bytes]:
    return [payload for _, payload in iter_frames(path.read_bytes())] if path.stat().st_size else []


def test_the_receiver_writes_counts_commits_after_writing_and_serves_exact_metrics(kafka_topics, tmp_path):
    topics = kafka_topics(partitions=2)
    rejections, dead = topics.rejections_topic, topics.dead_letter_topic
    results = [result("AAAAAA", 10), result("BBBBBB", 20), result("CCCCCC", 30), result("DDDDDD", 40)]
    produce(topics.bootstrap_servers, [
        {"topic": rejections, "key": b"NI", "value": results[0], "partition": 0},
        {"topic": rejections, "key": b"NI", "value": results[1], "partition": 0},
        {"topic": rejections, "key": b"NI", "value": results[2], "partition": 1},
        {"topic": rejections, "key": b"NI", "value": results[3], "partition": 1},
        {"topic": rejections, "key": b"NI", "value": results[0], "partition": 1},  # a duplicate of AAAAAA
        {"topic": rejections, "key": b"NI", "value": b"not an OrderResult", "partition": 0},
        {"topic": dead, "key": b"NI", "value": b"\x01\x07junk", "partition": 0,
         "headers": dead_letter_headers("bad-side", topics.orders_topic, 17)},
        {"topic": dead, "key": b"NI", "value": b"\x01\x09junk", "partition": 1,
         "headers": dead_letter_headers("bad-side", topics.orders_topic, 18)},
        {"topic": dead, "key": b"AA", "value": b"", "partition": 1,
         "headers": dead_letter_headers("empty", topics.nbbo_topic, 3)},
    ])
    out = tmp_path / "out"
    port = free_port()
    group = f"receiver-{uuid.uuid4().hex[:8]}"
    audit = CommitAudit(out)
    receiver = Receiver(receiver_settings(topics, out, group, metrics_port=port), consumer_factory=audit.factory,
                        clock=lambda: RECEIVED_AT)
    running = Running(receiver)
    running.until_consumed()
    samples = scrape(f"http://127.0.0.1:{port}/metrics")
    stats = running.finish()

    assert (stats.received, stats.unique, stats.duplicates, stats.malformed) == (5, 4, 1, 1)
    assert stats.latency_ms == {"count": 4, "p50": 20.0, "p90": 40.0, "p99": 40.0, "p999": 40.0, "max": 40.0}
    assert stats.dead_letters == {"bad-side": 2, "empty": 1}
    assert stats.dead_letters_by_source_topic == {topics.orders_topic: 2, topics.nbbo_topic: 1}
    assert stats.consumed_offsets == {dead: {"0": 1, "1": 2}, rejections: {"0": 3, "1": 3}}

    # The files: every OrderResult as received (framed), the malformed record and the dead letters kept.
    assert sorted(frames_of(out / "rejections.msg")) == sorted(results + [results[0]])
    assert frames_of(out / "malformed.msg") == [b"not an OrderResult"]
    malformed_index = json.loads((out / "malformed.jsonl").read_text())
    assert (malformed_index["topic"], malformed_index["partition"], malformed_index["offset"],
            malformed_index["reason"]) == (rejections, 0, 2, "bad-length")
    dead_index = [json.loads(line) for line in (out / "dead-letters.jsonl").read_text().splitlines()]
    assert sorted((d["partition"], d["offset"], d["headers"]["marketspread.reason"],
                   d["headers"]["marketspread.source.offset"]) for d in dead_index) == [
        (0, 0, "bad-side", "17"), (1, 0, "bad-side", "18"), (1, 1, "empty", "3")]
    dead_bytes = (out / "dead-letters.msg").read_bytes()
    assert sorted(dead_bytes[d["file_offset"]:d["file_offset"] + d["length"]] for d in dead_index) == [
        b"", b"\x01\x07junk", b"\x01\x09junk"]
    assert json.loads((out / "stats.json").read_text()) == {**stats.to_json(), "written_at": pytest.approx(
        json.loads((out / "stats.json").read_text())["written_at"])}

    # Offsets: committed to Kafka, and never before the files held the data (CommitAudit checked each).
    assert audit.commits
    assert group_offsets(topics.bootstrap_servers, group) == {
        (rejections, 0): 3, (rejections, 1): 3, (dead, 0): 1, (dead, 1): 2}

    # The metrics, scraped over HTTP while it ran.
    assert samples.value("marketspread_receiver_rejections_total") == 5
    assert samples.value("marketspread_receiver_duplicates_total") == 1
    assert samples.value("marketspread_receiver_malformed_total") == 1
    assert samples.value("marketspread_receiver_dead_letters_total", reason="bad-side",
                         source_topic=topics.orders_topic) == 2
    assert samples.value("marketspread_receiver_dead_letters_total", reason="empty",
                         source_topic=topics.nbbo_topic) == 1
    for (topic, partition), offset in {(rejections, 0): 3, (rejections, 1): 3, (dead, 0): 1, (dead, 1): 2}.items():
        assert samples.value("marketspread_receiver_consumed_offset", topic=topic, partition=str(partition)) == offset
    assert samples.value("marketspread_receiver_latency_seconds_count") == 4
    assert samples.value("marketspread_receiver_latency_seconds_sum") == pytest.approx(0.1)
    buckets = {float(labels["le"]): v for labels, v in samples.matching("marketspread_receiver_latency_seconds_bucket")}
    assert buckets == {le: sum(1 for ms in (10, 20, 30, 40) if ms / 1000 <= le)
                       for le in (*LATENCY_BUCKETS, float("inf"))}
    assert samples.value("marketspread_receiver_last_receive_timestamp_seconds") == RECEIVED_AT / 1e9


def test_framed_records_of_many_order_results_are_counted_one_by_one(kafka_topics, tmp_path):
    topics = kafka_topics(partitions=1, record_format="framed")
    first = [result(f"F{i:05d}", i) for i in range(1, 101)]
    second = [result(f"S{i:05d}", 1000) for i in range(50)] + [result("F00001", 1)]
    produce(topics.bootstrap_servers, [
        {"topic": topics.rejections_topic, "key": b"shard-3", "value": frame_all(first)},
        {"topic": topics.rejections_topic, "key": b"shard-5", "value": frame_all(second)},
        {"topic": topics.rejections_topic, "key": b"shard-5", "value": frame_all(first[:2])[:-1]},  # truncated
    ])
    out = tmp_path / "out"
    running = Running(Receiver(receiver_settings(topics, out, f"g-{uuid.uuid4().hex[:8]}", metrics_port=0),
                               clock=lambda: RECEIVED_AT))
    running.until_consumed()
    stats = running.finish()
    assert (stats.received, stats.unique, stats.duplicates, stats.malformed) == (151, 150, 1, 1)
    assert stats.latency_ms["count"] == 150
    assert stats.latency_ms["p50"] == 75.0  # 1..100 ms and 50 x 1000 ms: the 75th smallest
    assert stats.latency_ms["max"] == 1000.0
    assert (out / "rejections.msg").read_bytes() == frame_all(first) + frame_all(second)
    assert json.loads((out / "malformed.jsonl").read_text())["reason"] == "truncated-frame"


def test_a_restarted_receiver_resumes_from_its_committed_offsets_without_losing_or_recounting(kafka_topics, tmp_path):
    topics = kafka_topics(partitions=2)
    rejections = topics.rejections_topic
    out = tmp_path / "out"
    group = f"g-{uuid.uuid4().hex[:8]}"
    before = [result(f"B{i:05d}", 5) for i in range(300)]
    produce(topics.bootstrap_servers, [{"topic": rejections, "key": b"K%d" % i, "value": v}
                                       for i, v in enumerate(before)])
    running = Running(Receiver(receiver_settings(topics, out, group, metrics_port=0), clock=lambda: RECEIVED_AT))
    running.until_consumed()
    first_stats = running.finish()
    assert (first_stats.received, first_stats.duplicates) == (300, 0)
    committed = group_offsets(topics.bootstrap_servers, group)
    assert sum(v for (t, _), v in committed.items() if t == rejections) == 300

    # While it is down: 200 new results, and 10 replays of results it already has.
    after = [result(f"A{i:05d}", 7) for i in range(200)] + before[:10]
    produce(topics.bootstrap_servers, [{"topic": rejections, "key": b"K%d" % i, "value": v}
                                       for i, v in enumerate(after)])
    again = Receiver(receiver_settings(topics, out, group, metrics_port=0), clock=lambda: RECEIVED_AT)
    assert again.stats().received == 0
    running = Running(again)
    running.until_consumed()
    stats = running.finish()
    assert (stats.received, stats.unique, stats.duplicates) == (510, 500, 10)
    assert stats.latency_ms["count"] == 500
    assert sorted(frames_of(out / "rejections.msg")) == sorted(before + after)
    assert group_offsets(topics.bootstrap_servers, group) == end_offsets(topics.bootstrap_servers, [rejections])


def test_when_offset_commits_fail_a_restart_resumes_from_the_files_commit_point(kafka_topics, tmp_path):
    topics = kafka_topics(partitions=2)
    out = tmp_path / "out"
    group = f"g-{uuid.uuid4().hex[:8]}"
    values = [result(f"X{i:05d}", 3) for i in range(120)]
    produce(topics.bootstrap_servers, [{"topic": topics.rejections_topic, "key": b"K%d" % i, "value": v}
                                       for i, v in enumerate(values)])
    audit = CommitAudit(out, fail_commits=True)
    running = Running(Receiver(receiver_settings(topics, out, group, metrics_port=0), consumer_factory=audit.factory,
                               clock=lambda: RECEIVED_AT))
    running.until_consumed()
    assert running.finish().received == 120
    assert audit.commits and group_offsets(topics.bootstrap_servers, group) == {}  # Kafka never got them
    running = Running(Receiver(receiver_settings(topics, out, group, metrics_port=0), clock=lambda: RECEIVED_AT))
    running.until_consumed()
    stats = running.finish()
    assert (stats.received, stats.duplicates) == (120, 0)  # nothing read twice
    assert len(frames_of(out / "rejections.msg")) == 120


def test_a_receiver_killed_with_sigkill_and_restarted_holds_every_result_exactly_once(kafka_topics, tmp_path):
    topics = kafka_topics(partitions=2)
    out = tmp_path / "out"
    group = f"g-{uuid.uuid4().hex[:8]}"
    total = 20_000
    values = [result(f"{i:06d}", 1) for i in range(total)]

    def start() -> tuple[subprocess.Popen, int]:
        port = free_port()
        settings = receiver_settings(topics, out, group, metrics_port=port)
        process = subprocess.Popen([sys.executable, "-m", "marketspread", "receiver", *settings.to_args()],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return process, port

    def consumed(port: int) -> float:
        try:
            return scrape(f"http://127.0.0.1:{port}/metrics", timeout=2).total(
                "marketspread_receiver_consumed_offset", topic=topics.rejections_topic)
        except OSError:
            return 0

    producer = threading.Thread(target=produce, args=(topics.bootstrap_servers, [
        {"topic": topics.rejections_topic, "key": b"K%d" % (i % 50), "value": v} for i, v in enumerate(values)]))
    producer.start()
    process, port = start()
    try:
        deadline = time.monotonic() + 90
        while consumed(port) < 1:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        producer.join(120)
        process, port = start()
        while consumed(port) < total:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline + 60
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["received"], stats["unique"], stats["duplicates"]) == (total, total, 0)
    written = (out / "rejections.msg").read_bytes()
    assert len(written) == total * ORDER_RESULT.framed_size
    assert sorted(np.frombuffer(written, ORDER_RESULT.framed_dtype)["order_id"].tolist()) == [
        f"{i:06d}".encode() for i in range(total)]
    assert "received 20,000 OrderResults (20,000 unique, 0 duplicates)" in stdout
    assert frame(values[0]) in written
