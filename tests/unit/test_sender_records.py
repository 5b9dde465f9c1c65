"""Record building: keys, partitions, framing and timestamps of both record formats."""

from __future__ import annotations

import numpy as np
import pytest

from marketspread.fixish import NBBO, ORDER, Nbbo, decode_records, encode, frame_all
from marketspread.partitioning import shard_key, shard_of
from marketspread.sender.records import RecordBuilder, default_partition, timestamp_ms

INTENDED_NS = 1_700_000_000_123_456_789


@pytest.fixture(scope="module")
def nbbo_wire(wallaroo_data) -> np.ndarray:
    data = (wallaroo_data / "350-symbols_initial-nbbo-fixish.msg").read_bytes()
    return np.frombuffer(data, dtype=NBBO.framed_dtype)


@pytest.fixture(scope="module")
def order_wire(wallaroo_data) -> np.ndarray:
    data = (wallaroo_data / "historical" / "1000trades-fixish.msg").read_bytes()
    return np.frombuffer(data, dtype=ORDER.framed_dtype)


def test_the_timestamp_is_the_intended_time_in_ms_rounded_down():
    assert timestamp_ms(INTENDED_NS) == 1_700_000_000_123
    assert timestamp_ms(1_999_999) == 1
    assert timestamp_ms(2_000_000) == 2


def test_message_format_makes_one_unframed_record_per_message_keyed_by_the_unpadded_symbol(nbbo_wire):
    batch = RecordBuilder("message", partitions=2).build(nbbo_wire, "nbbo", INTENDED_NS)
    assert len(batch) == 350
    assert batch.topic == "nbbo"
    assert batch.message_counts == [1] * 350
    assert batch.messages == 350
    assert batch.value_bytes == 350 * NBBO.size
    assert batch.timestamp_ms == 1_700_000_000_123
    assert batch.keys[:3] == [b"INSM", b"PPHM", b"NYCB"]
    assert batch.keys[3] == b"NFX"
    assert batch.keys[12] == b"NI"
    assert batch.values[0] == nbbo_wire[:1].tobytes()[4:]
    assert all(len(v) == NBBO.size for v in batch.values)


@pytest.mark.parametrize("partitions", [1, 2, 3, 12])
def test_message_format_picks_the_partition_kafkas_default_partitioner_would(nbbo_wire, partitions):
    batch = RecordBuilder("message", partitions=partitions).build(nbbo_wire, "nbbo", INTENDED_NS)
    # The reference: kafka-python's own DefaultPartitioner (the Java client's murmur2) on the same keys.
    from kafka.partitioner.default import DefaultPartitioner

    class Cluster:
        def topics(self):
            return {"nbbo"}

        def partitions_for_topic(self, topic):
            return set(range(partitions))

        def available_partitions_for_topic(self, topic):
            return set(range(partitions))

    partitioner = DefaultPartitioner()
    assert batch.partitions == [partitioner.partition("nbbo", k, k, v, v, Cluster())
                                for k, v in zip(batch.keys, batch.values)]
    assert batch.keys[12] == b"NI" and batch.partitions[12] == default_partition(b"NI", partitions)


def test_message_format_round_trips_through_the_shared_decoder(order_wire):
    batch = RecordBuilder("message", partitions=2).build(order_wire, "orders", INTENDED_NS)
    decoded = decode_records(batch.values, framed=False)
    assert decoded.failures == []
    assert len(decoded.orders) == 1000
    for name in ("side", "account", "order_id", "symbol", "order_qty", "price"):
        assert (decoded.orders[name] == order_wire[name]).all(), name
    assert [k for k in batch.keys] == [bytes(s).lstrip(b" ") for s in order_wire["symbol"]]


def test_message_format_keys_dotted_and_four_letter_symbols_unchanged():
    payloads = [encode(Nbbo(s, 1.0, 1.01)) for s in ("BF.B", "A", "AAPL")]
    wire = np.frombuffer(frame_all(payloads), dtype=NBBO.framed_dtype)
    batch = RecordBuilder("message", partitions=2).build(wire, "nbbo", INTENDED_NS)
    assert batch.keys == [b"BF.B", b"A", b"AAPL"]
    assert batch.values == payloads


@pytest.mark.parametrize("shards, partitions", [(8, 2), (8, 3), (1, 1), (4, 8)])
def test_framed_format_puts_each_shard_in_one_record_on_partition_shard_mod_partitions(
        nbbo_wire, shards, partitions):
    batch = RecordBuilder("framed", partitions, shards=shards).build(nbbo_wire, "nbbo", INTENDED_NS)
    expected_shards = shard_of(nbbo_wire["symbol"], shards)
    present = sorted(set(expected_shards.tolist()))
    assert batch.keys == [shard_key(n) for n in present]
    assert batch.partitions == [n % partitions for n in present]
    assert batch.message_counts == [int((expected_shards == n).sum()) for n in present]
    assert batch.messages == 350
    assert batch.value_bytes == 350 * NBBO.framed_size
    assert batch.timestamp_ms == 1_700_000_000_123
    for key, value in zip(batch.keys, batch.values):
        n = int(key.removeprefix(b"shard-"))
        # The record is exactly that shard's messages, framed, in send order.
        assert value == nbbo_wire[expected_shards == n].tobytes()


def test_framed_records_round_trip_through_the_shared_decoder(order_wire):
    batch = RecordBuilder("framed", 2, shards=8).build(order_wire, "orders", INTENDED_NS)
    decoded = decode_records(batch.values, framed=True)
    assert decoded.failures == []
    assert len(decoded.orders) == 1000
    got = sorted(decoded.orders[["order_id", "symbol", "account"]].tolist())
    want = sorted(order_wire[["order_id", "symbol", "account"]].tolist())
    assert got == want
    shards = shard_of(decoded.orders["symbol"], 8)
    records = decoded.orders["seq"] >> 32
    for record, key in enumerate(batch.keys):
        assert set(shards[records == record].tolist()) == {int(key.removeprefix(b"shard-"))}


def test_framed_records_are_split_to_stay_under_the_size_limit_without_reordering(order_wire):
    limit = 10 * ORDER.framed_size + 5
    batch = RecordBuilder("framed", 2, shards=2, max_record_bytes=limit).build(
        order_wire, "orders", INTENDED_NS)
    assert max(len(v) for v in batch.values) == 10 * ORDER.framed_size
    assert batch.messages == 1000
    shards = shard_of(order_wire["symbol"], 2)
    for n in (0, 1):
        joined = b"".join(v for k, v in zip(batch.keys, batch.values) if k == shard_key(n))
        assert joined == order_wire[shards == n].tobytes()
    assert all(p == int(k.removeprefix(b"shard-")) % 2 for k, p in zip(batch.keys, batch.partitions))


def test_an_empty_batch_makes_no_records(nbbo_wire):
    assert len(RecordBuilder("framed", 2, shards=4).build(nbbo_wire[:0], "nbbo", INTENDED_NS)) == 0
    assert len(RecordBuilder("message", partitions=2).build(nbbo_wire[:0], "nbbo", INTENDED_NS)) == 0


def test_unknown_formats_and_impossible_shard_counts_are_refused():
    with pytest.raises(ValueError):
        RecordBuilder("json", 1)
    with pytest.raises(ValueError):
        RecordBuilder("framed", 1, shards=0)
    with pytest.raises(ValueError):
        RecordBuilder("message", 0)
