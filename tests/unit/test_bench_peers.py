"""The peers' Market Spread step (plain's dict, Quix's state) against the reference model, without Kafka."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from marketspread.bench.peers.counters import PeerCounters
from marketspread.bench.peers.logic import DictMarketSpread, output_value
from marketspread.bench.peers.probe import PROBE_DTYPE, PROBE_FILE, read_probe
from marketspread.bench.peers.quix import framed_step, message_step
from marketspread.fixish import Nbbo, Order, Side, decode, decode_order_result, encode, frame, frame_all, split_frames
from marketspread.fixish.layout import NBBO, ORDER
from marketspread.generate import generate_nbbo, generate_orders, initial_nbbo, load_symbol_set
from marketspread.metrics import parse
from marketspread.reference import ReferenceModel
from marketspread.sender.records import RecordBuilder

TS = 1_800_000_000_123  # ms


def edge_messages():
    return [
        Nbbo("A", 10.0, 10.05), Order(Side.BUY, 1, "ORD001", "A", 100.0, 10.02),  # rejects at the boundary
        Nbbo("LOW", 0.50, 0.53), Order(Side.SELL, 2, "ORD002", "LOW", 10.0, 0.51),  # ratio alone
        Nbbo("CRS", 5.10, 5.00), Order(Side.BUY, 3, "ORD003", "CRS", 20.0, 5.05),  # crossed: accepted
        Nbbo("ZER", 0.0, 0.0), Order(Side.BUY, 4, "ORD004", "ZER", 30.0, 0.0),  # NaN: accepted
        Order(Side.BUY, 6, "ORD006", "NEVR", 50.0, 1.0),  # never quoted: rejected at 0 / 0
        Nbbo("A", 10.0, 10.01), Order(Side.BUY, 7, "ORD007", "A", 1.0, 10.0),  # back to accepting
    ]


def expected(messages):
    return [(r.order_id, r.bid, r.offer, r.timestamp) for r in ReferenceModel().feed(messages)]


def reference_with_ts(messages):
    return [(oid, bid, offer, TS * 1_000_000) for oid, bid, offer, _ in expected(messages)]


def results_of(payloads):
    return [(r.order_id, r.bid, r.offer, r.timestamp) for r in map(decode_order_result, payloads)]


def test_plain_one_message_per_record_matches_the_reference_model():
    book = DictMarketSpread()
    payloads = []
    for message in edge_messages():
        results, count, malformed = book.on_record(encode(message), TS, framed=False)
        assert count == 1 and malformed == 0
        payloads += results
    assert results_of(payloads) == reference_with_ts(edge_messages())


def test_plain_framed_records_match_the_reference_model_and_skip_what_is_not_fixish():
    book = DictMarketSpread()
    messages = edge_messages()
    value = frame_all(encode(m) for m in messages) + frame(b"\x09junk")
    results, count, malformed = book.on_record(value, TS, framed=True)
    assert count == len(messages) and malformed == 1
    assert results_of(results) == reference_with_ts(messages)
    assert book.on_record(b"\x02short", TS, framed=False) == ([], 0, 1)
    [framed] = output_value(results, framed=True)
    assert [decode_order_result(p) for p in split_frames(framed)] == [decode_order_result(p) for p in results]
    assert output_value([], framed=True) == [] and output_value(results, framed=False) == results


class FakeState:
    """Quix's State for one key: get/set of JSON-able values."""

    def __init__(self):
        self.values = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        import json

        self.values[key] = json.loads(json.dumps(value))  # what Quix's JSON state serialisation keeps


def test_quix_steps_with_state_per_key_match_the_reference_model(wallaroo_data):
    symbol_set = load_symbol_set("350", wallaroo_data)
    rng = np.random.default_rng(3)
    stream = (split_frames(initial_nbbo(symbol_set)) + split_frames(generate_nbbo(symbol_set, 2_000, rng).tobytes())
              + split_frames(generate_orders(symbol_set, 2_000, rng, reject_ratio=0.05).tobytes()))
    messages = [decode(p) for p in stream] + edge_messages()
    # message format: state per symbol key
    counters = PeerCounters()
    step = message_step(counters)
    states: dict[str, FakeState] = {}
    out = []
    for message in messages:
        result = step(encode(message), message.symbol.encode(), TS, None, states.setdefault(message.symbol,
                                                                                             FakeState()))
        if result is not None:
            out.append(result)
    assert results_of(out) == reference_with_ts(messages)
    assert counters.messages == len(messages) and counters.results == len(out)
    # framed format: records keyed by shard, state per shard
    builder = RecordBuilder("framed", partitions=2, shards=4)
    counters = PeerCounters()
    step = framed_step(counters)
    shard_states: dict[bytes, FakeState] = {}
    framed_out = []
    for chunk_start in range(0, len(messages), 97):
        chunk = messages[chunk_start:chunk_start + 97]
        nbbo = [m for m in chunk if isinstance(m, Nbbo)]
        orders = [m for m in chunk if isinstance(m, Order)]
        # The topics carry one kind each: NBBO records first, as the job orders ties.
        for kind in (nbbo, orders):
            if not kind:
                continue
            layout = NBBO if isinstance(kind[0], Nbbo) else ORDER
            batch = builder.build(np.frombuffer(frame_all(encode(m) for m in kind), dtype=layout.framed_dtype),
                                  "t", TS * 1_000_000)
            for key, value in zip(batch.keys, batch.values):
                result = step(value, key, TS, None, shard_states.setdefault(key, FakeState()))
                if result is not None:
                    framed_out += split_frames(result)
    expected_ids = sorted(r[0] for r in reference_with_ts(_in_chunk_order(messages)))
    assert sorted(r[0] for r in results_of(framed_out)) == expected_ids
    assert counters.messages == len(messages)


def _in_chunk_order(messages):
    """The order the framed test applies messages: per 97-message chunk, NBBO before orders."""
    ordered = []
    for start in range(0, len(messages), 97):
        chunk = messages[start:start + 97]
        ordered += [m for m in chunk if isinstance(m, Nbbo)] + [m for m in chunk if isinstance(m, Order)]
    return ordered


def test_peer_counters_are_exposed_for_the_harness():
    counters = PeerCounters()
    counters.ready, counters.records, counters.messages = 1, 3, 300
    counters.offsets[("orders", 1)] = 42
    registry = CollectorRegistry()
    registry.register(counters)
    samples = parse(generate_latest(registry).decode())
    assert samples.value("marketspread_peer_ready") == 1
    assert samples.total("marketspread_peer_input_messages_total") == 300
    assert samples.value("marketspread_peer_processed_offset", topic="orders", partition="1") == 42


def test_the_probe_file_reads_back_whole_rows(tmp_path):
    rows = np.array([(1, 2, 3), (4, 5, 6)], dtype=PROBE_DTYPE)
    (tmp_path / PROBE_FILE).write_bytes(rows.tobytes() + b"\x01\x02")  # a torn last write
    assert read_probe(tmp_path).tolist() == rows.tolist()
    assert len(read_probe(tmp_path / "missing")) == 0


@pytest.mark.parametrize("framed", [False, True])
def test_the_step_counts_what_it_could_not_decode(framed):
    counters = PeerCounters()
    step = framed_step(counters) if framed else message_step(counters)
    assert step(b"\x07" + b"x" * 41, b"k", TS, None, FakeState()) is None
    assert counters.malformed == 1
