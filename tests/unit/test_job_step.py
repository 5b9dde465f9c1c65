"""The Spark job's decisions, without Spark: step.process_records and the stateful processor.

Specified here: one key's records of a micro-batch are applied in send order (timestamp, NBBO
before orders on a tie, partition, offset); the `message` and `framed` record formats give the
same rejections, equal to the reference model's; rejection rows are keyed by the symbol
(message) or the input key (framed) and carry timestamp = record timestamp in ms * 1e6;
dead-letter rows carry the reason, source topic/partition/offset, byte offset and the bytes; a
stats row counts the messages; and both stateful operators keep the quote book between batches
so that a round trip through the state loses nothing: the StatefulProcessor in its ValueState
(checked with pyspark's TwsTester), the applyInPandasWithState function in its GroupState (a real
pyspark GroupState, handed from batch to batch as Spark does), the two giving the same rows.
"""

from __future__ import annotations

import struct
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Row
from pyspark.sql.streaming import TwsTester
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from marketspread.fixish import (
    FixishError, Nbbo, Order, OrderResult, Reason, Side, decode, decode_order_result, encode, frame, frame_all,
    split_frames,
)
from marketspread.partitioning import shard_key, shard_of
from marketspread.quotes import QuoteBook
from marketspread.reference import ReferenceModel
from marketspread_job.processor import (
    GROUP_STATE_SCHEMA, MarketSpreadProcessor, book_from_state, book_to_state, market_spread_with_group_state,
)
from marketspread_job.step import (
    KIND_DEAD_LETTER, KIND_REJECTION, KIND_STATS, OUTPUT_COLUMNS, StepConfig, process_records, sort_records,
)

from fixish_strategies import BAD_MESSAGES, GOOD_NBBO, GOOD_ORDER, prices

NBBO_TOPIC, ORDERS_TOPIC = "nbbo", "orders"
MESSAGE = StepConfig(framed=False, nbbo_topic=NBBO_TOPIC)
FRAMED = StepConfig(framed=True, nbbo_topic=NBBO_TOPIC)


def records(*rows) -> pd.DataFrame:
    """Rows of (key, value, topic, partition, offset, timestamp ms), as the query hands them over."""
    return pd.DataFrame(list(rows), columns=["key", "value", "topic", "partition", "offset", "timestamp"])


def rejections(output: pd.DataFrame) -> list[tuple[bytes, OrderResult]]:
    """(key, OrderResult) of every rejection row, framed runs split, in row order."""
    found = []
    for row in output[output["kind"] == KIND_REJECTION].itertuples():
        if len(row.value) == 55:
            assert row.count == 1
            found.append((row.key, decode_order_result(row.value)))
        else:
            assert len(row.value) == 59 * row.count
            found += [(row.key, result) for result in map(decode_order_result, split_frames(row.value))]
    return found


def nbbo(symbol, bid, offer) -> bytes:
    return encode(Nbbo(symbol, bid, offer))


def order(order_id, symbol, side=Side.BUY) -> bytes:
    return encode(Order(side, 42, order_id, symbol, 100.0, 10.0))


def result(order_id, symbol, bid, offer, timestamp_ms, side=Side.BUY) -> OrderResult:
    return OrderResult(side, 42, order_id, symbol, 100.0, 10.0, bid, offer, timestamp_ms * 1_000_000)


def codec_detail(payload: bytes) -> str:
    with pytest.raises(FixishError) as raised:
        decode(payload)
    return raised.value.detail


# --- send order --------------------------------------------------------------------------------

def test_records_are_sorted_by_timestamp_then_nbbo_first_then_partition_then_offset():
    shuffled = records(
        ("NI", b"", ORDERS_TOPIC, 0, 7, 2000),
        ("NI", b"", NBBO_TOPIC, 1, 3, 2000),
        ("NI", b"", ORDERS_TOPIC, 1, 0, 1000),
        ("NI", b"", NBBO_TOPIC, 0, 9, 2000),
        ("NI", b"", NBBO_TOPIC, 0, 8, 2000),
        ("NI", b"", ORDERS_TOPIC, 0, 6, 2000),
        ("NI", b"", NBBO_TOPIC, 1, 0, 3000),
    )
    ordered = sort_records(shuffled, NBBO_TOPIC)
    assert list(zip(ordered["timestamp"], ordered["topic"], ordered["partition"], ordered["offset"])) == [
        (1000, ORDERS_TOPIC, 1, 0),
        (2000, NBBO_TOPIC, 0, 8), (2000, NBBO_TOPIC, 0, 9), (2000, NBBO_TOPIC, 1, 3),
        (2000, ORDERS_TOPIC, 0, 6), (2000, ORDERS_TOPIC, 0, 7),
        (3000, NBBO_TOPIC, 1, 0),
    ]


@pytest.mark.parametrize("config", [MESSAGE, FRAMED], ids=["message", "framed"])
def test_an_nbbo_with_the_same_timestamp_as_an_order_is_applied_before_it(config):
    wrap = frame if config.framed else bytes
    output, _ = process_records(QuoteBook.empty(), records(
        ("NI", wrap(order("000001", "NI")), ORDERS_TOPIC, 0, 0, 5),   # before the NBBO in every other respect
        ("NI", wrap(nbbo("NI", 10.0, 10.01)), NBBO_TOPIC, 1, 99, 5),  # accepts: 000001 is not rejected
        ("NI", wrap(order("000002", "NI")), ORDERS_TOPIC, 0, 1, 6),
        ("NI", wrap(nbbo("NI", 10.0, 11.0)), NBBO_TOPIC, 1, 100, 6),  # rejects, and 000002 with it
        ("NI", wrap(order("000003", "NI")), ORDERS_TOPIC, 0, 2, 4),   # earliest: never quoted yet
    ), config)
    assert [r for _, r in rejections(output)] == [result("000003", "NI", 0.0, 0.0, 4),
                                                  result("000002", "NI", 10.0, 11.0, 6)]


def test_the_latest_nbbo_in_send_order_wins_even_when_it_arrives_first():
    output, book = process_records(QuoteBook.empty(), records(
        ("NI", nbbo("NI", 10.0, 11.0), NBBO_TOPIC, 0, 1, 7),   # latest: rejects
        ("NI", nbbo("NI", 10.0, 10.01), NBBO_TOPIC, 0, 0, 7),  # same timestamp, earlier offset
        ("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 0, 8),
    ), MESSAGE)
    assert [r for _, r in rejections(output)] == [result("000001", "NI", 10.0, 11.0, 8)]
    assert (book.symbols.tolist(), book.should_reject.tolist(), book.bid.tolist(), book.offer.tolist()) == \
        ([b"  NI"], [True], [10.0], [11.0])


# --- both record formats give the same rejections ----------------------------------------------

symbol_names = st.sampled_from(["F", "NI", "TGT", "GOOG", "BF.B", "B.A", "BRK.", "X"])
quotes = st.sampled_from([(10.0, 10.01), (10.0, 10.5), (0.5, 0.53), (0.0, 0.0), (10.0, 9.0), (10.0, 10.05),
                          (100.0, 100.05)]) | st.tuples(prices, prices)


@st.composite
def ticks(draw):
    """Send ticks (timestamp ms, NBBO, orders), ascending; within a tick NBBO are applied first."""
    counter = iter(range(10**6))
    found = []
    for t in range(draw(st.integers(1, 12))):
        nbbos = [Nbbo(draw(symbol_names), *draw(quotes)) for _ in range(draw(st.integers(0, 4)))]
        orders = [Order(draw(st.sampled_from(list(Side))), draw(st.integers(0, 2**32 - 1)), f"{next(counter):06d}",
                        draw(symbol_names), 1.0, 2.0) for _ in range(draw(st.integers(0, 4)))]
        found.append((1_700_000_000_000 + 10 * t + draw(st.integers(0, 5)), nbbos, orders))
    return found


def reference(ticks) -> list[OrderResult]:
    model, expected = ReferenceModel(), []
    for timestamp, nbbos, orders in ticks:
        for m in nbbos:
            model.on_nbbo(m)
        for o in orders:
            if (r := model.on_order(o, timestamp * 1_000_000)) is not None:
                expected.append(r)
    return expected


def message_records(ticks, partitions: int = 2) -> pd.DataFrame:
    offsets = defaultdict(int)
    rows = []
    for timestamp, nbbos, orders in ticks:
        for topic, messages in ((NBBO_TOPIC, nbbos), (ORDERS_TOPIC, orders)):
            for m in messages:
                partition = sum(m.symbol.encode()) % partitions  # any function of the key will do
                rows.append((m.symbol, encode(m), topic, partition, offsets[topic, partition], timestamp))
                offsets[topic, partition] += 1
    return records(*rows)


def framed_records(ticks, shards: int = 3, partitions: int = 2) -> pd.DataFrame:
    offsets = defaultdict(int)
    rows = []
    for timestamp, nbbos, orders in ticks:
        for topic, messages in ((NBBO_TOPIC, nbbos), (ORDERS_TOPIC, orders)):
            if not messages:
                continue
            shard = shard_of(np.array([m.symbol.encode().rjust(4) for m in messages], "S4"), shards)
            for n in sorted(set(shard.tolist())):
                run = [encode(m) for m, s in zip(messages, shard) if s == n]
                partition = n % partitions
                rows.append((shard_key(n).decode(), frame_all(run), topic, partition, offsets[topic, partition],
                             timestamp))
                offsets[topic, partition] += 1
    return records(*rows)


def run_batches(batches: list[pd.DataFrame], config: StepConfig) -> tuple[list[tuple[bytes, OrderResult]], dict]:
    """Each micro-batch grouped by key, each key with its own book carried from batch to batch."""
    books: dict = {}
    found = []
    for batch in batches:
        for key, group in batch.groupby("key", sort=True):
            output, books[key] = process_records(books.get(key, QuoteBook.empty()), group.reset_index(drop=True),
                                                 config)
            assert output[output["kind"] == KIND_DEAD_LETTER].empty
            found += rejections(output)
    return found, books


@settings(max_examples=150, deadline=None)
@given(ticks(), st.integers(0, 12))
def test_message_and_framed_records_give_the_reference_rejections(stream, split):
    expected = reference(stream)
    by_format = {}
    for name, build, config in (("message", message_records, MESSAGE), ("framed", framed_records, FRAMED)):
        batches = [build(stream[:split]), build(stream[split:])] if 0 < split < len(stream) else [build(stream)]
        found, _ = run_batches(batches, config)
        by_format[name] = sorted((r for _, r in found), key=lambda r: r.order_id)
        # Within one symbol, results come out in send order.
        for symbol in {r.symbol for r in expected}:
            assert [r for _, r in found if r.symbol == symbol] == [r for r in expected if r.symbol == symbol]
        if config.framed:
            shards = shard_of(np.array([r.symbol.encode().rjust(4) for _, r in found], "S4"), 3)
            assert [key for key, _ in found] == [shard_key(int(s)) for s in shards]
        else:
            assert [key for key, _ in found] == [r.symbol.encode() for _, r in found]
    assert by_format["message"] == by_format["framed"] == sorted(expected, key=lambda r: r.order_id)


def test_the_wallaroo_files_give_the_same_rejections_in_both_formats(wallaroo_data):
    initial = [decode(p) for p in split_frames((wallaroo_data / "350-symbols_initial-nbbo-fixish.msg").read_bytes())]
    trades = [decode(p) for p in split_frames((wallaroo_data / "historical" / "1000trades-fixish.msg").read_bytes())]
    stream = [(1000, initial, []), (2000, [], trades)]
    expected = sorted(reference(stream), key=lambda r: r.order_id)
    accepting = {n.symbol for n in initial[15:]}
    assert len(expected) == sum(1 for t in trades if t.symbol not in accepting)
    for build, config in ((message_records, MESSAGE), (framed_records, FRAMED)):
        found, books = run_batches([build(stream[:1]), build(stream[1:])], config)
        assert sorted((r for _, r in found), key=lambda r: r.order_id) == expected
        assert sum(len(b) for b in books.values()) == len({m.symbol for m in initial + trades})


# --- rows: rejections, dead letters, stats -----------------------------------------------------

def test_a_rejection_row_in_message_format_is_one_order_result_keyed_by_its_symbol():
    output, _ = process_records(QuoteBook.empty(), records(
        ("BF.B", nbbo("BF.B", 20.0, 21.0), NBBO_TOPIC, 0, 0, 1_700_000_000_001),
        ("BF.B", order("abc123", "BF.B", Side.SELL), ORDERS_TOPIC, 1, 0, 1_700_000_000_002),
    ), MESSAGE)
    assert list(output.columns) == list(OUTPUT_COLUMNS)
    rows = output.to_dict("records")
    assert rows[0] == {"kind": KIND_REJECTION, "key": b"BF.B", "count": 1, "reason": None, "detail": None,
                       "source_topic": None, "source_partition": None, "source_offset": None, "byte_offset": None,
                       "value": struct.pack(">BI6s4sddddQ", 2, 42, b"abc123", b"BF.B", 100.0, 10.0, 20.0, 21.0,
                                            1_700_000_000_002_000_000)}
    assert (rows[1]["kind"], rows[1]["count"]) == (KIND_STATS, 2)
    assert len(rows) == 2


def test_a_rejection_row_in_framed_format_holds_all_the_keys_results_framed_under_the_input_key():
    value = frame_all([order("000001", "NI"), order("000002", "F"), nbbo("F", 1.0, 1.01), order("000003", "F")])
    output, _ = process_records(QuoteBook.empty(), records(("shard-5", value, ORDERS_TOPIC, 1, 17, 1234)), FRAMED)
    rejection = output[output["kind"] == KIND_REJECTION].to_dict("records")
    assert len(rejection) == 1
    assert (rejection[0]["key"], rejection[0]["count"]) == (b"shard-5", 2)
    assert rejection[0]["value"] == frame_all([
        struct.pack(">BI6s4sddddQ", 1, 42, b"000001", b"  NI", 100.0, 10.0, 0.0, 0.0, 1_234_000_000),
        struct.pack(">BI6s4sddddQ", 1, 42, b"000002", b"   F", 100.0, 10.0, 0.0, 0.0, 1_234_000_000)])
    assert output[output["kind"] == KIND_STATS]["count"].tolist() == [4]


def test_the_order_result_timestamp_is_the_record_timestamp_in_nanoseconds():
    output, _ = process_records(QuoteBook.empty(), records(
        ("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 0, 1),
        ("NI", order("000002", "NI"), ORDERS_TOPIC, 0, 1, 1_799_999_999_999),
        ("NI", order("000003", "NI"), ORDERS_TOPIC, 0, 2, 0),
    ), MESSAGE)
    assert [r.timestamp for _, r in rejections(output)] == [0, 1_000_000, 1_799_999_999_999_000_000]


@pytest.mark.parametrize(("payload", "reason"), BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_a_bad_message_record_becomes_a_dead_letter_row_with_its_source(payload, reason):
    output, _ = process_records(QuoteBook.empty(), records(
        ("NI", nbbo("NI", 10.0, 10.5), NBBO_TOPIC, 1, 40, 100),
        ("NI", payload, ORDERS_TOPIC, 0, 77, 101),
        ("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 78, 102),
    ), MESSAGE)
    dead = output[output["kind"] == KIND_DEAD_LETTER].to_dict("records")
    detail = "empty record" if payload == b"" else codec_detail(payload)
    assert dead == [{"kind": KIND_DEAD_LETTER, "key": b"NI", "value": payload, "count": 1, "reason": reason.value,
                     "detail": detail, "source_topic": ORDERS_TOPIC, "source_partition": 0, "source_offset": 77,
                     "byte_offset": 0}]
    assert [r for _, r in rejections(output)] == [result("000001", "NI", 10.0, 10.5, 102)]
    assert output[output["kind"] == KIND_STATS]["count"].tolist() == [2]


def test_bad_frames_become_dead_letter_rows_with_their_byte_offsets_and_the_good_frames_count():
    truncated_tail = frame(GOOD_ORDER)[:20]
    value = frame(GOOD_NBBO) + frame(b"\x07" * 42) + frame(GOOD_ORDER) + truncated_tail
    output, _ = process_records(QuoteBook.empty(), records(
        ("shard-1", None, NBBO_TOPIC, 1, 3, 50),
        ("shard-1", value, ORDERS_TOPIC, 1, 9, 51),
    ), FRAMED)
    dead = output[output["kind"] == KIND_DEAD_LETTER][["value", "reason", "source_topic", "source_partition",
                                                        "source_offset", "byte_offset", "key"]]
    assert dead.to_dict("records") == [
        {"value": b"", "reason": Reason.EMPTY.value, "source_topic": NBBO_TOPIC, "source_partition": 1,
         "source_offset": 3, "byte_offset": 0, "key": b"shard-1"},
        {"value": b"\x07" * 42, "reason": Reason.UNKNOWN_TYPE.value, "source_topic": ORDERS_TOPIC,
         "source_partition": 1, "source_offset": 9, "byte_offset": 46, "key": b"shard-1"},
        {"value": truncated_tail, "reason": Reason.TRUNCATED_FRAME.value, "source_topic": ORDERS_TOPIC,
         "source_partition": 1, "source_offset": 9, "byte_offset": 149, "key": b"shard-1"},
    ]
    # The NBBO (NI 10.0/10.01, accepting) and the order after the bad frame are processed.
    assert rejections(output) == []
    assert output[output["kind"] == KIND_STATS]["count"].tolist() == [2]


def test_a_key_with_only_bad_records_still_reports_zero_messages():
    output, book = process_records(QuoteBook.empty(), records(("NI", b"\x09", ORDERS_TOPIC, 0, 0, 1)), MESSAGE)
    assert output["kind"].tolist() == [KIND_DEAD_LETTER, KIND_STATS]
    assert output[output["kind"] == KIND_STATS]["count"].tolist() == [0]
    assert len(book) == 0


# --- the processor and its state ---------------------------------------------------------------

@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["F", "NI", "BF.B", "B.A", "GOOG", "A", "Z.Z"]), st.booleans(), prices,
                          prices), max_size=7, unique_by=lambda t: t[0]))
def test_the_quote_book_survives_a_round_trip_through_the_state_schema(rows):
    book = QuoteBook.from_columns([r[0].encode().rjust(4) for r in rows], [r[1] for r in rows],
                                  [r[2] for r in rows], [r[3] for r in rows])
    state = book_to_state(book)
    assert state == ([s.decode() for s in book.symbols], book.should_reject.tolist(), book.bid.tolist(),
                     book.offer.tolist())
    back = book_from_state(state)
    assert back.symbols.dtype == np.dtype("S4") and back.should_reject.dtype == bool
    assert back.symbols.tolist() == book.symbols.tolist()
    assert back.should_reject.tolist() == book.should_reject.tolist()
    assert back.bid.tobytes() == book.bid.tobytes() and back.offer.tobytes() == book.offer.tobytes()


def test_the_processor_keeps_each_keys_quotes_in_its_value_state_between_batches():
    tester = TwsTester(MarketSpreadProcessor(MESSAGE), outputMode="Update")
    first = tester.testInPandas(("NI",), records(("NI", nbbo("NI", 10.0, 10.5), NBBO_TOPIC, 0, 0, 1)))
    assert first["kind"].tolist() == [KIND_STATS]
    assert tester.peekValueState("quote_book", ("NI",)) == (["  NI"], [True], [10.0], [10.5])
    second = tester.testInPandas(("NI",), records(("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 0, 2)))
    assert [r for _, r in rejections(second)] == [result("000001", "NI", 10.0, 10.5, 2)]
    assert second.dtypes[["count", "source_partition", "source_offset", "byte_offset"]].astype(str).tolist() == \
        ["int64", "Int32", "Int64", "Int32"]
    # Another key starts from nothing: its order is rejected at 0.0/0.0.
    other = tester.testInPandas(("F",), records(("F", order("000002", "F"), ORDERS_TOPIC, 1, 0, 3)))
    assert [r for _, r in rejections(other)] == [result("000002", "F", 0.0, 0.0, 3)]
    assert tester.peekValueState("quote_book", ("NI",)) == (["  NI"], [True], [10.0], [10.5])
    assert tester.peekValueState("quote_book", ("F",)) == (["   F"], [True], [0.0], [0.0])


# --- the same step under applyInPandasWithState ----------------------------------------------------

def group_state(value: tuple | None) -> GroupState:
    """What Spark hands the function for one key and micro-batch: the state the key's last batch left."""
    return GroupState(optionalValue=Row(*value) if value is not None else Row(), batchProcessingTimeMs=0,
                      eventTimeWatermarkMs=GroupState.NO_TIMESTAMP, timeoutConf=GroupStateTimeout.NoTimeout,
                      hasTimedOut=False, watermarkPresent=False, defined=value is not None, updated=False,
                      removed=False, timeoutTimestamp=GroupState.NO_TIMESTAMP, keyAsUnsafe=b"",
                      valueSchema=GROUP_STATE_SCHEMA)


class GroupStateRunner:
    """Calls the function as Spark does: once per key and batch, the key's rows in Arrow-sized chunks."""

    def __init__(self, config: StepConfig):
        self.apply = market_spread_with_group_state(config)
        self.states: dict[str, tuple] = {}

    def batch(self, key: str, frame: pd.DataFrame, chunk: int = 10_000) -> pd.DataFrame:
        state = group_state(self.states.get(key))
        chunks = [frame.iloc[i:i + chunk].reset_index(drop=True) for i in range(0, max(len(frame), 1), chunk)]
        [output] = self.apply((key,), iter(chunks), state)
        self.states[key] = state.getOption
        return output

    def book(self, key: str) -> QuoteBook:
        return QuoteBook.from_bytes(self.states[key][0])


def test_the_group_state_function_keeps_each_keys_quotes_in_its_state_between_batches():
    runner = GroupStateRunner(MESSAGE)
    first = runner.batch("NI", records(("NI", nbbo("NI", 10.0, 10.5), NBBO_TOPIC, 0, 0, 1)))
    assert first["kind"].tolist() == [KIND_STATS]
    assert book_to_state(runner.book("NI")) == (["  NI"], [True], [10.0], [10.5])
    second = runner.batch("NI", records(("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 0, 2)))
    assert [r for _, r in rejections(second)] == [result("000001", "NI", 10.0, 10.5, 2)]
    assert second.dtypes[["count", "source_partition", "source_offset", "byte_offset"]].astype(str).tolist() == \
        ["int64", "Int32", "Int64", "Int32"]
    # Another key starts from nothing: its order is rejected at 0.0/0.0.
    other = runner.batch("F", records(("F", order("000002", "F"), ORDERS_TOPIC, 1, 0, 3)))
    assert [r for _, r in rejections(other)] == [result("000002", "F", 0.0, 0.0, 3)]
    assert book_to_state(runner.book("NI")) == (["  NI"], [True], [10.0], [10.5])
    assert book_to_state(runner.book("F")) == (["   F"], [True], [0.0], [0.0])


def test_a_keys_rows_split_into_several_arrow_chunks_are_one_step_in_send_order():
    """Spark cuts a key's rows into Arrow batches (maxRecordsPerBatch); the order that follows its
    NBBO in another chunk, and an NBBO sent earlier but delivered in a later chunk, still count."""
    frame = records(("NI", order("000001", "NI"), ORDERS_TOPIC, 0, 0, 3),
                    ("NI", nbbo("NI", 10.0, 10.01), NBBO_TOPIC, 0, 0, 2),
                    ("NI", nbbo("NI", 10.0, 10.5), NBBO_TOPIC, 0, 1, 4),
                    ("NI", order("000002", "NI"), ORDERS_TOPIC, 0, 1, 5))
    output = GroupStateRunner(MESSAGE).batch("NI", frame, chunk=1)
    assert [r for _, r in rejections(output)] == [result("000002", "NI", 10.0, 10.5, 5)]
    assert output[output["kind"] == KIND_STATS]["count"].tolist() == [4]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["NI", "F", "GOOG"]), st.booleans(), prices, prices),
                         min_size=0, max_size=6), min_size=1, max_size=5))
def test_both_state_operators_give_the_same_output_and_state_batch_after_batch(batches):
    """applyInPandasWithState (the default) and transformWithStateInPandas wrap one step: the same
    batches give the same rows and leave the same book, whichever keeps the state."""
    tws, group = TwsTester(MarketSpreadProcessor(MESSAGE), outputMode="Update"), GroupStateRunner(MESSAGE)
    ts = 0
    for batch in batches:
        rows = []
        for symbol, is_order, bid, spread in batch:
            ts += 1
            rows.append((symbol, order(f"{ts:06d}", symbol), ORDERS_TOPIC, 0, ts, ts) if is_order else
                        (symbol, nbbo(symbol, bid, bid + spread), NBBO_TOPIC, 0, ts, ts))
        for symbol in sorted({r[0] for r in rows}):
            frame = records(*[r for r in rows if r[0] == symbol])
            expected = tws.testInPandas((symbol,), frame).reset_index(drop=True)
            pd.testing.assert_frame_equal(group.batch(symbol, frame).reset_index(drop=True), expected)
            assert book_to_state(group.book(symbol)) == tws.peekValueState("quote_book", (symbol,))
