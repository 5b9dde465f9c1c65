"""The sender against a real Kafka broker: exactly the file's messages, keys, partitions and timestamps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from kafka.partitioner.default import murmur2
from prometheus_client import generate_latest

from marketspread.fixish import NBBO, ORDER, decode_records
from marketspread.localkafka import end_offsets
from marketspread.metrics import parse, scrape
from marketspread.partitioning import shard_key, shard_of
from marketspread.sender import DeliveryError, InputFileError, Sender, SenderSettings
from marketspread.settings import KafkaSettings
from marketspread.run.stack import free_port

from kafka_records import read_topic

pytestmark = pytest.mark.kafka

NS = 1_000_000_000



def sender_settings(topics: KafkaSettings, **fields) -> SenderSettings:
    return SenderSettings(**topics.model_dump(), metrics_port=0, **fields)


def metric_values(sender: Sender) -> dict:
    samples = parse(generate_latest(sender.registry).decode())
    return {(name, dict(labels).get("topic")): value for (name, labels), value in samples.items()}


def expected_timestamp_ms(start_ns: int, batch: int, batch_size: int, rate: int) -> int:
    return (start_ns + batch * batch_size * NS // rate) // 1_000_000


@pytest.fixture
def initial_file(wallaroo_data) -> Path:
    return wallaroo_data / "350-symbols_initial-nbbo-fixish.msg"


@pytest.fixture
def trades_file(wallaroo_data) -> Path:
    return wallaroo_data / "historical" / "1000trades-fixish.msg"


def test_message_format_sends_each_message_as_one_record_keyed_by_symbol_at_its_intended_time(
        kafka_topics, initial_file):
    topics = kafka_topics(partitions=2)
    start_at = time.time() + 0.5
    start_ns = int(start_at * NS)
    settings = sender_settings(topics, stream="nbbo", file=str(initial_file), rate=7000, batch_size=50,
                               start_at=start_at)
    sender = Sender(settings)
    report = sender.run()
    wire = np.frombuffer(initial_file.read_bytes(), dtype=NBBO.framed_dtype)
    assert (report.messages, report.records, report.bytes, report.send_errors) == (350, 350, 350 * NBBO.size, 0)
    assert report.first_intended_ns == start_ns
    assert report.last_intended_ns == start_ns + 6 * 50 * NS // 7000

    records = read_topic(topics.bootstrap_servers, topics.nbbo_topic)
    assert len(records) == 350
    index_of = {bytes(s).lstrip(b" "): i for i, s in enumerate(wire["symbol"])}
    assert len(index_of) == 350  # each symbol once: a record's key says which message it is
    for record in records:
        i = index_of[record.key]
        assert record.value == wire[i:i + 1].tobytes()[4:]
        assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % 2  # Kafka's default partitioner
        assert record.timestamp_type == 0  # CreateTime: the intended send time, not the broker's clock
        assert record.timestamp == expected_timestamp_ms(start_ns, i // 50, 50, 7000)
    for partition in (0, 1):
        order = [index_of[r.key] for r in records if r.partition == partition]
        assert order == sorted(order)  # send order kept within a partition
    metrics = metric_values(sender)
    assert metrics[("marketspread_sender_messages_total", topics.nbbo_topic)] == 350
    assert metrics[("marketspread_sender_records_total", topics.nbbo_topic)] == 350
    assert metrics[("marketspread_sender_bytes_total", topics.nbbo_topic)] == 350 * NBBO.size
    assert metrics[("marketspread_sender_send_errors_total", topics.nbbo_topic)] == 0
    assert metrics[("marketspread_sender_target_rate_messages_per_second", topics.nbbo_topic)] == 7000


def test_framed_format_sends_one_record_per_shard_and_batch_on_partition_shard_mod_partitions(
        kafka_topics, trades_file):
    topics = kafka_topics(partitions=3, record_format="framed", shards=8)
    start_at = time.time() + 0.5
    start_ns = int(start_at * NS)
    settings = sender_settings(topics, stream="orders", file=str(trades_file), rate=20_000, batch_size=100,
                               start_at=start_at)
    report = Sender(settings).run()
    wire = np.frombuffer(trades_file.read_bytes(), dtype=ORDER.framed_dtype)
    assert (report.messages, report.bytes, report.send_errors) == (1000, 1000 * ORDER.framed_size, 0)

    records = read_topic(topics.bootstrap_servers, topics.orders_topic)
    assert report.records == len(records)
    shards = shard_of(wire["symbol"], 8)
    expected = {}  # (shard, batch) -> the framed bytes that record must hold
    for batch in range(10):
        part = wire[batch * 100:(batch + 1) * 100]
        for n in np.unique(shards[batch * 100:(batch + 1) * 100]).tolist():
            expected[(n, batch)] = part[shards[batch * 100:(batch + 1) * 100] == n].tobytes()
    assert len(records) == len(expected)
    batch_of_timestamp = {expected_timestamp_ms(start_ns, b, 100, 20_000): b for b in range(10)}
    seen = set()
    for record in records:
        n = int(record.key.removeprefix(b"shard-"))
        assert record.key == shard_key(n)
        assert record.partition == n % 3
        batch = batch_of_timestamp[record.timestamp]
        assert record.value == expected[(n, batch)]
        decoded = decode_records([record.value], framed=True)
        assert decoded.failures == [] and set(shard_of(decoded.orders["symbol"], 8).tolist()) == {n}
        seen.add((n, batch))
    assert seen == set(expected)


def test_the_initial_nbbo_is_sent_in_full_before_the_stream_starts(kafka_topics, initial_file, trades_file):
    topics = kafka_topics(partitions=2)
    settings = sender_settings(topics, stream="orders", file=str(trades_file), initial_nbbo_file=str(initial_file),
                               rate=50_000, batch_size=100)
    report = Sender(settings).run()
    assert (report.initial_messages, report.messages, report.send_errors) == (350, 1000, 0)
    initial = read_topic(topics.bootstrap_servers, topics.nbbo_topic)
    orders = read_topic(topics.bootstrap_servers, topics.orders_topic)
    assert len(initial) == 350 and len(orders) == 1000
    assert sorted(r.value for r in initial) == sorted(
        w.tobytes()[4:] for w in np.frombuffer(initial_file.read_bytes(), dtype=NBBO.framed_dtype))
    # The stream's first intended time comes after every initial quote was acknowledged.
    assert max(r.timestamp for r in initial) <= report.first_intended_ns // 1_000_000
    assert min(r.timestamp for r in orders) == report.first_intended_ns // 1_000_000


def test_a_looping_sender_wraps_around_and_stops_at_max_messages(kafka_topics, initial_file):
    topics = kafka_topics(partitions=2)
    settings = sender_settings(topics, stream="nbbo", file=str(initial_file), loop=True, max_messages=800,
                               rate=0, batch_size=64)
    report = Sender(settings).run()
    assert (report.messages, report.records) == (800, 800)
    records = read_topic(topics.bootstrap_servers, topics.nbbo_topic)
    wire = np.frombuffer(initial_file.read_bytes(), dtype=NBBO.framed_dtype)
    counts: dict[bytes, int] = {}
    for record in records:
        counts[record.key] = counts.get(record.key, 0) + 1
    # 800 = 2 x 350 + 100: the first 100 symbols of the file went out three times.
    assert [counts[bytes(s).lstrip(b" ")] for s in wire["symbol"]] == [3] * 100 + [2] * 250


def test_generated_orders_are_the_generators_seeded_stream(kafka_topics):
    from marketspread.generate import OrderStream, load_symbol_set, stream_rngs

    topics = kafka_topics(partitions=2, record_format="framed", shards=4)
    settings = sender_settings(topics, stream="orders", symbols="350", seed=7, max_messages=5000, rate=0,
                               batch_size=1000)
    report = Sender(settings).run()
    assert report.messages == 5000
    expected = OrderStream(load_symbol_set("350"), stream_rngs(7)[1]).take(5000)
    records = read_topic(topics.bootstrap_servers, topics.orders_topic)
    got = b"".join(r.value for r in records)
    assert sorted(np.frombuffer(got, dtype=ORDER.framed_dtype).tolist()) == sorted(expected.tolist())


def test_a_file_that_is_not_fixish_is_refused_before_anything_is_sent(kafka_topics, initial_file, tmp_path):
    topics = kafka_topics(partitions=2)
    broken = tmp_path / "orders.msg"
    data = bytearray((Path(initial_file).parent / "historical" / "1000trades-fixish.msg").read_bytes())
    data[3 * ORDER.framed_size + 5] = 9  # the side byte of the fourth order
    broken.write_bytes(bytes(data))
    settings = sender_settings(topics, stream="orders", file=str(broken), initial_nbbo_file=str(initial_file))
    with pytest.raises(InputFileError) as caught:
        Sender(settings).run()
    assert str(caught.value) == (f"{broken} is not a framed fixish file: at byte {3 * ORDER.framed_size}: "
                                 f"bad-side: side byte 9 is neither Buy (1) nor Sell (2)")
    offsets = end_offsets(topics.bootstrap_servers, [topics.nbbo_topic, topics.orders_topic])
    assert set(offsets.values()) == {0}  # not even the (valid) initial NBBO went out


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketspread", "sender", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_the_command_refuses_a_text_file_with_a_clear_message_and_exit_code_2(kafka_topics, wallaroo_data):
    topics = kafka_topics(partitions=1)
    text_file = wallaroo_data / "symbols.txt"
    done = run_cli("--bootstrap-servers", topics.bootstrap_servers, "--nbbo-topic", topics.nbbo_topic,
                   "--file", str(text_file), "--metrics-port", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"marketspread sender: error: {text_file} is not a framed fixish file: at byte 0: ")
    assert set(end_offsets(topics.bootstrap_servers, [topics.nbbo_topic]).values()) == {0}


def tiny_topic(bootstrap: str) -> str:
    """A topic whose records may not exceed 2,000 bytes."""
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"tiny-{time.time_ns()}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": "2000"})])
    finally:
        admin.close()
    return topic


def test_records_the_broker_refuses_are_counted_and_the_command_exits_1(kafka_broker, initial_file):
    topic = tiny_topic(kafka_broker.bootstrap_servers)
    # One shard: all 350 quotes in records of ~16 kB, each too large for this topic.
    args = ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--nbbo-topic", topic, "--file",
            str(initial_file), "--record-format", "framed", "--shards", "1", "--rate", "0", "--batch-size", "350",
            "--metrics-port", "0"]
    settings = SenderSettings(bootstrap_servers=kafka_broker.bootstrap_servers, nbbo_topic=topic,
                              file=str(initial_file), record_format="framed", shards=1, rate=0, batch_size=350,
                              metrics_port=0)
    sender = Sender(settings)
    report = sender.run()
    assert (report.messages, report.records, report.send_errors, report.failed_messages) == (0, 0, 1, 350)
    assert metric_values(sender)[("marketspread_sender_send_errors_total", topic)] == 1
    done = run_cli(*args)
    assert done.returncode == 1
    assert "FAILED: 1 records (350 messages) not delivered" in done.stdout
    assert "was not delivered" in done.stderr  # each failure is logged
    assert done.stderr.strip().splitlines()[-1] == (
        f"marketspread sender: error: 1 records (350 messages) were not delivered to {topic}; "
        f"see the errors logged above")


def test_an_initial_nbbo_that_kafka_refuses_stops_the_sender_before_the_stream(kafka_topics, initial_file,
                                                                                trades_file):
    topics = kafka_topics(partitions=1, record_format="framed", shards=1)
    nbbo_topic = tiny_topic(topics.bootstrap_servers)
    settings = SenderSettings(**topics.model_dump(exclude={"nbbo_topic"}), nbbo_topic=nbbo_topic, stream="orders",
                              file=str(trades_file), initial_nbbo_file=str(initial_file), metrics_port=0)
    with pytest.raises(DeliveryError, match=rf"1 records of the initial NBBO \(350 messages\) were not delivered "
                                            rf"to {nbbo_topic}; the stream was not started"):
        Sender(settings).run()
    assert set(end_offsets(topics.bootstrap_servers, [topics.orders_topic]).values()) == {0}


def test_sigterm_stops_a_looping_sender_cleanly_with_everything_sent_acknowledged(kafka_topics, initial_file):
    topics = kafka_topics(partitions=2)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "marketspread", "sender", "--bootstrap-servers", topics.bootstrap_servers,
         "--nbbo-topic", topics.nbbo_topic, "--file", str(initial_file), "--loop", "--rate", "2000",
         "--batch-size", "20", "--metrics-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 60
        while sum(end_offsets(topics.bootstrap_servers, [topics.nbbo_topic]).values()) < 500:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the sender sent nothing"
            time.sleep(0.2)
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
        assert samples.value("marketspread_sender_target_rate_messages_per_second", topic=topics.nbbo_topic) == 2000
        assert samples.value("marketspread_sender_messages_total", topic=topics.nbbo_topic) >= 500
        assert samples.value("marketspread_sender_send_errors_total", topic=topics.nbbo_topic) == 0
        assert samples.value("marketspread_sender_behind_schedule_seconds", topic=topics.nbbo_topic) < 1
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "stopped before the end of the stream" in stdout
    sent = int(next(line for line in stdout.splitlines() if line.startswith("sent ")).split()[1].replace(",", ""))
    assert sent == sum(end_offsets(topics.bootstrap_servers, [topics.nbbo_topic]).values())
    assert sent % 20 == 0  # whole batches only
