"""Determinism: sequential runs give bit-identical rejections.msg content, whatever the partitioning.

Four `marketspread run --sequential` runs of the same inputs, each with its own topics, job,
checkpoint and receiver: 1, 2 and 4 partitions per topic, and 2 again. Their rejections.msg files,
read as sorted sets of framed OrderResults, must be byte for byte the same, and equal to what the
reference model predicts, bit for bit.

Bit for bit includes the OrderResult's u64 timestamp, which is the order's intended send time:
every run is given the same schedule (`--start-at T0`, T0 being when this test began, a minute or
two before the runs send, well within the broker's retention), so batch k of the order stream is
due at T0 + k * batch_size / rate in every run, and the job writes that time (Kafka's ms, as ns)
into each OrderResult. Nothing is masked. The NBBO stream re-quotes the rejecting symbols
(`--nbbo-rejected-share`), so each OrderResult carries the last quote its symbol received: a run
that applied one symbol's quotes in a different order would show it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from marketspread.cli import main
from marketspread.fixish import FRAME_SIZE, ORDER_RESULT, Nbbo, Order, decode, encode_order_result, frame
from marketspread.fixish import split_frames
from marketspread.reference import ReferenceModel
from marketspread.sender.pacing import NS_PER_S, Pacer

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

RATE, BATCH = 20_000, 100


def sorted_frames(path: Path) -> list[bytes]:
    """rejections.msg as a sorted set of framed OrderResults."""
    data = path.read_bytes()
    size = FRAME_SIZE + ORDER_RESULT.size
    assert len(data) % size == 0
    return sorted({data[i:i + size] for i in range(0, len(data), size)})


def reference_frames(data: Path, start_at: int) -> list[bytes]:
    """The reference model's OrderResults, each stamped with its order's intended send time as the job does it
    (Kafka record timestamps are whole ms)."""
    initial, nbbo, orders = ([decode(p) for p in split_frames((data / name).read_bytes())]
                             for name in ("initial-nbbo.msg", "nbbo.msg", "orders.msg"))
    assert all(isinstance(m, Nbbo) for m in initial + nbbo) and all(isinstance(m, Order) for m in orders)
    model = ReferenceModel()
    model.feed(initial + nbbo)
    pacer = Pacer(RATE, BATCH, start_at * NS_PER_S)
    results = []
    for i, order in enumerate(orders):
        timestamp_ns = pacer.intended_ns(i // BATCH) // 1_000_000 * 1_000_000
        if (result := model.on_order(order, timestamp_ns)) is not None:
            results.append(frame(encode_order_result(result)))
    return sorted(set(results))


def test_sequential_runs_give_bit_identical_rejections_across_repeats_and_partition_counts(
        tmp_path, kafka_topics, wallaroo_data):
    start_at = int(time.time())  # the one schedule every run follows
    data = tmp_path / "data"
    assert main(["generate", "--symbols", "350", "--nbbo", "10000", "--orders", "10000", "--seed", "77",
                 "--reject-ratio", "0.01", "--nbbo-rejected-share", "0.05", "--out", str(data)]) == 0
    expected = reference_frames(data, start_at)
    assert len(expected) > 50

    contents = {}
    for run, partitions in enumerate((1, 2, 4, 2)):
        topics = kafka_topics(partitions=partitions)
        out = tmp_path / f"run-{run}-{partitions}-partitions"
        code = main(["run", "--bootstrap-servers", topics.bootstrap_servers, "--nbbo-topic", topics.nbbo_topic,
                     "--orders-topic", topics.orders_topic, "--rejections-topic", topics.rejections_topic,
                     "--dead-letter-topic", topics.dead_letter_topic, "--partitions", str(partitions),
                     "--initial-nbbo", str(data / "initial-nbbo.msg"), "--nbbo", str(data / "nbbo.msg"),
                     "--orders", str(data / "orders.msg"), "--sequential", "--start-at", str(start_at),
                     "--rate", str(RATE), "--batch-size", str(BATCH), "--out", str(out), "--no-progress",
                     "--timeout-seconds", "600"])
        assert code == 0
        contents[(run, partitions)] = sorted_frames(out / "rejections.msg")

    first = contents[(0, 1)]
    assert first == expected  # bit for bit, timestamps included
    for key, content in contents.items():
        assert content == first, f"run {key[0]} with {key[1]} partitions differs"
