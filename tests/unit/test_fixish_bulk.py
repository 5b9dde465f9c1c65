"""Whole buffers at once (fixish/bulk.py): Kafka record values in, numpy event arrays out.

Specified here: the bulk encoders write exactly the bytes of the one-message codec; bulk decoding
of framed and unframed records loses nothing and invents nothing (hypothesis round trips);
Wallaroo's files decode completely; every kind of bad input becomes a `DecodeFailure` with its
reason, record, byte offset and bytes while the valid messages around it survive; and on random
byte mutations the vectorised checks agree exactly with the one-message codec, every input
byte ending up either in a decoded event or in a failure.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.fixish import (
    NBBO, NBBO_EVENT, ORDER, ORDER_EVENT, SEQ_RECORD_SHIFT, DecodeFailure, FixishError, Nbbo,
    OrderResult, Reason, Side, decode, decode_order_result, decode_order_results, decode_records, encode,
    encode_nbbos, encode_order_result, encode_order_results, encode_orders, frame, frame_all, iter_frames,
    split_fixed, split_frames,
)

from fixish_strategies import BAD_MESSAGES, GOOD_NBBO, GOOD_ORDER, TIME, nbbos, orders, prices


def bits(x: float) -> bytes:
    return struct.pack(">d", x)


def nbbo_of_event(event) -> tuple:
    return (bytes(event["symbol"]).decode().lstrip(), bits(event["bid_px"]), bits(event["offer_px"]))


def order_of_event(event) -> tuple:
    return (int(event["side"]), int(event["account"]), bytes(event["order_id"]).decode(),
            bytes(event["symbol"]).decode().lstrip(), bits(event["order_qty"]), bits(event["price"]))


def key_of_message(message) -> tuple:
    """A message as the event arrays keep it (no transact_time), doubles compared bit for bit."""
    if isinstance(message, Nbbo):
        return (message.symbol, bits(message.bid_px), bits(message.offer_px))
    return (int(message.side), message.account, message.order_id, message.symbol, bits(message.order_qty),
            bits(message.price))


def seq(record: int, position: int) -> int:
    return (record << SEQ_RECORD_SHIFT) | position


def events_as_messages(batch) -> list[tuple]:
    """(seq, message key) of every decoded event, in seq order."""
    found = [(int(e["seq"]), nbbo_of_event(e)) for e in batch.nbbo]
    found += [(int(e["seq"]), order_of_event(e)) for e in batch.orders]
    return sorted(found)


def assert_in_seq_order(batch) -> None:
    """Events leave decoding in seq order (send order), whichever path, bulk or one by one, took them."""
    for events in (batch.nbbo, batch.orders):
        assert (np.diff(events["seq"]) > 0).all()


def codec_oracle(values, framed: bool) -> tuple[list[tuple], list[DecodeFailure]]:
    """What decoding record by record, frame by frame, with the one-message codec gives."""
    events, failures = [], []
    for record, value in enumerate(values):
        if not value:
            failures.append(DecodeFailure(record, 0, Reason.EMPTY, "empty record", b""))
            continue
        if not framed:
            try:
                events.append((seq(record, 0), key_of_message(decode(value))))
            except FixishError as error:
                failures.append(DecodeFailure(record, 0, error.reason, error.detail, value))
            continue
        position = 0
        try:
            for offset, payload in iter_frames(value):
                try:
                    events.append((seq(record, position), key_of_message(decode(payload))))
                except FixishError as error:
                    failures.append(DecodeFailure(record, offset, error.reason, error.detail, payload))
                position += 1
        except FixishError as error:
            failures.append(DecodeFailure(record, error.offset, error.reason, error.detail, value[error.offset:]))
    return sorted(events), failures


def assert_every_byte_accounted_for(values, batch, framed: bool) -> None:
    """Each record's length = its decoded messages + the bytes of its failures (plus their frame headers)."""
    for record, value in enumerate(values):
        in_events = sum(NBBO.framed_size if framed else NBBO.size
                        for e in batch.nbbo if e["seq"] >> SEQ_RECORD_SHIFT == record)
        in_events += sum(ORDER.framed_size if framed else ORDER.size
                         for e in batch.orders if e["seq"] >> SEQ_RECORD_SHIFT == record)
        in_failures = sum(len(f.data) + (4 if framed and value and f.reason is not Reason.TRUNCATED_FRAME else 0)
                          for f in batch.failures if f.record == record)
        assert in_events + in_failures == len(value or b""), record


# --- the bulk encoders write the codec's bytes -------------------------------------------------

@settings(deadline=None)
@given(st.lists(nbbos(), min_size=1, max_size=20), st.booleans())
def test_encode_nbbos_writes_exactly_the_bytes_of_the_codec(messages, framed):
    wire = encode_nbbos(np.array([m.symbol.encode().rjust(4) for m in messages], "S4"),
                        np.array([m.bid_px for m in messages]), np.array([m.offer_px for m in messages]),
                        np.array([m.transact_time.encode() for m in messages], "S21"), framed=framed)
    payloads = [encode(m) for m in messages]
    assert wire.tobytes() == (frame_all(payloads) if framed else b"".join(payloads))


@settings(deadline=None)
@given(st.lists(orders(), min_size=1, max_size=20), st.booleans())
def test_encode_orders_writes_exactly_the_bytes_of_the_codec(messages, framed):
    wire = encode_orders(np.array([int(m.side) for m in messages], "u1"), np.array([m.account for m in messages], "u4"),
                         np.array([m.order_id.encode() for m in messages], "S6"),
                         np.array([m.symbol.encode().rjust(4) for m in messages], "S4"),
                         np.array([m.order_qty for m in messages]), np.array([m.price for m in messages]),
                         np.array([m.transact_time.encode() for m in messages], "S21"), framed=framed)
    payloads = [encode(m) for m in messages]
    assert wire.tobytes() == (frame_all(payloads) if framed else b"".join(payloads))


@settings(deadline=None)
@given(st.lists(orders(), min_size=1, max_size=20), st.data(), st.booleans())
def test_order_results_round_trip_in_bulk_and_match_the_codec(messages, data, framed):
    decoded = decode_records([encode(m) for m in messages], framed=False)
    n = len(messages)
    bid = np.array(data.draw(st.lists(prices, min_size=n, max_size=n)))
    offer = np.array(data.draw(st.lists(prices, min_size=n, max_size=n)))
    timestamp = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype=np.uint64)
    wire = encode_order_results(decoded.orders, bid, offer, timestamp, framed=framed)
    expected = [OrderResult.of(m, float(b), float(o), int(t)) for m, b, o, t in zip(messages, bid, offer, timestamp)]
    payloads = [encode_order_result(r) for r in expected]
    assert wire.tobytes() == (frame_all(payloads) if framed else b"".join(payloads))
    back = decode_order_results(wire.tobytes(), framed=framed)
    assert [decode_order_result(row.tobytes()[4:] if framed else row.tobytes()) for row in back] == expected


def test_decode_order_results_refuses_a_partial_or_misframed_buffer():
    one = frame(encode_order_result(OrderResult(Side.BUY, 1, "abc123", "NI", 1.0, 2.0, 3.0, 4.0, 5)))
    with pytest.raises(FixishError) as raised:
        decode_order_results(one + one[:10])
    assert raised.value.reason is Reason.TRUNCATED_FRAME
    with pytest.raises(FixishError) as raised:
        decode_order_results(one + b"\x00\x00\x00\x36" + one[4:])
    assert (raised.value.reason, raised.value.offset) == (Reason.BAD_LENGTH, 59)


def test_split_fixed_cuts_a_buffer_into_equal_messages():
    assert split_fixed(b"abcdefg", 3) == [b"abc", b"def", b"g"]


# --- round trips through decode_records --------------------------------------------------------

@settings(deadline=None)
@given(st.lists(nbbos() | orders(), max_size=40))
def test_one_message_per_record_decodes_to_the_same_messages(messages):
    values = [encode(m) for m in messages]
    batch = decode_records(values, framed=False)
    assert batch.failures == []
    assert batch.message_count == len(messages)
    assert events_as_messages(batch) == [(seq(i, 0), key_of_message(m)) for i, m in enumerate(messages)]
    assert batch.nbbo.dtype == NBBO_EVENT and batch.orders.dtype == ORDER_EVENT


@settings(deadline=None)
@given(st.lists(st.lists(nbbos(), min_size=1, max_size=8) | st.lists(orders(), min_size=1, max_size=8)
                | st.lists(nbbos() | orders(), min_size=1, max_size=8), max_size=8))
def test_framed_records_decode_to_the_same_messages_in_record_and_frame_order(records):
    values = [frame_all(encode(m) for m in record) for record in records]
    batch = decode_records(values, framed=True)
    assert batch.failures == []
    assert events_as_messages(batch) == [(seq(r, p), key_of_message(m))
                                         for r, record in enumerate(records) for p, m in enumerate(record)]


@pytest.mark.parametrize(("name", "count"), [("350", 350), ("700", 700), ("1400", 1400), ("2100", 2100),
                                             ("r3k", 2926)])
def test_each_initial_nbbo_file_decodes_completely_in_bulk(wallaroo_data, name, count):
    data = (wallaroo_data / f"{name}-symbols_initial-nbbo-fixish.msg").read_bytes()
    whole = decode_records([data], framed=True)
    assert (len(whole.nbbo), len(whole.orders), whole.failures) == (count, 0, [])
    assert whole.nbbo["seq"].tolist() == list(range(count))
    one_per_record = decode_records(split_frames(data), framed=False)
    assert (len(one_per_record.nbbo), one_per_record.failures) == (count, [])
    assert [nbbo_of_event(e) for e in one_per_record.nbbo] == [nbbo_of_event(e) for e in whole.nbbo]
    assert [nbbo_of_event(e) for e in whole.nbbo] == [key_of_message(decode(p)) for p in split_frames(data)]


@pytest.mark.parametrize(("name", "nbbo", "orders"), [("1000nbbo", 1000, 0), ("100nbbo", 100, 0),
                                                       ("1000trades", 0, 1000)])
def test_the_historical_streams_decode_completely_in_bulk(wallaroo_data, name, nbbo, orders):
    data = (wallaroo_data / "historical" / f"{name}-fixish.msg").read_bytes()
    for batch in (decode_records([data], framed=True), decode_records(split_frames(data), framed=False),
                  decode_records(split_fixed(data, len(data) // 10), framed=True)):
        assert (len(batch.nbbo), len(batch.orders), batch.failures) == (nbbo, orders, [])
    assert events_as_messages(decode_records([data], framed=True)) == \
        [(i, key_of_message(decode(p))) for i, p in enumerate(split_frames(data))]


# --- bad input ---------------------------------------------------------------------------------

def codec_detail(payload: bytes) -> str:
    with pytest.raises(FixishError) as raised:
        decode(payload)
    return raised.value.detail


@pytest.mark.parametrize(("payload", "reason"), BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_a_bad_record_becomes_a_failure_with_its_reason_and_the_records_around_it_survive(payload, reason):
    batch = decode_records([GOOD_ORDER, payload, GOOD_NBBO], framed=False)
    detail = "empty record" if payload == b"" else codec_detail(payload)
    assert batch.failures == [DecodeFailure(1, 0, reason, detail, payload)]
    assert events_as_messages(batch) == [(seq(0, 0), key_of_message(decode(GOOD_ORDER))),
                                         (seq(2, 0), key_of_message(decode(GOOD_NBBO)))]


@pytest.mark.parametrize(("payload", "reason"), BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_a_bad_frame_becomes_a_failure_at_its_byte_offset_and_the_frames_around_it_survive(payload, reason):
    value = frame(GOOD_NBBO) + frame(payload) + frame(GOOD_ORDER)
    batch = decode_records([value], framed=True)
    assert batch.failures == [DecodeFailure(0, 46, reason, codec_detail(payload), payload)]
    assert events_as_messages(batch) == [(seq(0, 0), key_of_message(decode(GOOD_NBBO))),
                                         (seq(0, 2), key_of_message(decode(GOOD_ORDER)))]


@pytest.mark.parametrize("framed", [False, True])
def test_an_empty_or_null_record_is_an_empty_failure(framed):
    batch = decode_records([b"", None, GOOD_NBBO if not framed else frame(GOOD_NBBO)], framed=framed)
    assert batch.failures == [DecodeFailure(0, 0, Reason.EMPTY, "empty record", b""),
                              DecodeFailure(1, 0, Reason.EMPTY, "empty record", b"")]
    assert events_as_messages(batch) == [(seq(2, 0), key_of_message(decode(GOOD_NBBO)))]


@pytest.mark.parametrize("cut", [1, 3, 4, 20, 56])
def test_a_framed_batch_with_a_truncated_tail_keeps_the_messages_before_it(cut):
    good = [encode(Nbbo(s, 1.0 + i, 1.01 + i, TIME)) for i, s in enumerate(["A", "BB", "CCC"])]
    tail = frame(GOOD_ORDER)[:cut]
    value = frame_all(good) + tail
    batch = decode_records([frame(GOOD_ORDER), value], framed=True)
    assert batch.failures == [DecodeFailure(1, 138, Reason.TRUNCATED_FRAME, batch.failures[0].detail, tail)]
    assert events_as_messages(batch) == [(seq(0, 0), key_of_message(decode(GOOD_ORDER)))] + \
        [(seq(1, p), key_of_message(decode(g))) for p, g in enumerate(good)]


def test_a_whole_record_of_one_kind_with_one_bad_message_keeps_the_others():
    # The vectorised path (a record of NBBO only) with a NaN in the middle.
    messages = [Nbbo(f"S{i}", 1.0, 1.5, TIME) for i in range(10)]
    payloads = [encode(m) for m in messages]
    bad = payloads[4][:26] + bits(math.nan) + payloads[4][34:]
    value = frame_all(payloads[:4] + [bad] + payloads[5:])
    batch = decode_records([value], framed=True)
    assert batch.failures == [DecodeFailure(0, 4 * 46, Reason.BAD_NUMBER, codec_detail(bad), bad)]
    assert [int(s) for s in batch.nbbo["seq"]] == [0, 1, 2, 3, 5, 6, 7, 8, 9]


def test_failures_come_sorted_by_record_then_byte_offset():
    value = frame(GOOD_NBBO) + frame(b"\x09" * 42) + frame(GOOD_NBBO[:-1])
    batch = decode_records([b"", value, b"\x07"], framed=True)
    assert [(f.record, f.offset, f.reason) for f in batch.failures] == [
        (0, 0, Reason.EMPTY), (1, 46, Reason.UNKNOWN_TYPE), (1, 92, Reason.BAD_LENGTH),
        (2, 0, Reason.TRUNCATED_FRAME)]


# --- the vectorised checks agree with the codec on random damage -------------------------------

INTERESTING_BYTES = [0x00, 0x01, 0x02, 0x03, 0x09, 0x20, 0x2E, 0x41, 0x7E, 0x7F, 0x80, 0xC3, 0xFF]
SPECIAL_DOUBLES = [math.nan, math.inf, -math.inf, -0.0, 5e-324]


@st.composite
def damaged_records(draw, framed: bool):
    """Valid records (mostly of one kind, so the vectorised path runs), then random damage."""
    if framed:
        records = draw(st.lists(st.lists(nbbos(), min_size=1, max_size=6) | st.lists(orders(), min_size=1, max_size=6)
                                | st.lists(nbbos() | orders(), min_size=1, max_size=6), min_size=1, max_size=6))
        values = [bytearray(frame_all(encode(m) for m in record)) for record in records]
    else:
        values = [bytearray(encode(m)) for m in draw(st.lists(nbbos() | orders(), min_size=1, max_size=12))]
    for _ in range(draw(st.integers(0, 4))):
        value = values[draw(st.integers(0, len(values) - 1))]
        kind = draw(st.sampled_from(["byte", "double", "truncate", "extend"]))
        if not value:
            continue
        at = draw(st.integers(0, len(value) - 1))
        if kind == "byte":
            value[at] = draw(st.sampled_from(INTERESTING_BYTES) | st.integers(0, 255))
        elif kind == "double":
            value[at:at + 8] = bits(draw(st.sampled_from(SPECIAL_DOUBLES)))[:len(value) - at]
        elif kind == "truncate":
            del value[at:]
        else:
            value.extend(draw(st.binary(min_size=1, max_size=5)))
    return [bytes(v) for v in values]


@settings(max_examples=300, deadline=None)
@given(damaged_records(framed=False))
def test_on_damaged_records_bulk_decoding_agrees_with_the_codec_and_loses_no_byte(values):
    batch = decode_records(values, framed=False)
    events, failures = codec_oracle(values, framed=False)
    assert events_as_messages(batch) == events
    assert_in_seq_order(batch)
    assert batch.failures == failures
    assert_every_byte_accounted_for(values, batch, framed=False)


@settings(max_examples=300, deadline=None)
@given(damaged_records(framed=True))
def test_on_damaged_framed_records_bulk_decoding_agrees_with_the_codec_and_loses_no_byte(values):
    batch = decode_records(values, framed=True)
    events, failures = codec_oracle(values, framed=True)
    assert events_as_messages(batch) == events
    assert_in_seq_order(batch)
    assert batch.failures == failures
    assert_every_byte_accounted_for(values, batch, framed=True)


def test_bytes_accounting_holds_for_a_record_mixing_every_failure_kind():
    value = frame(GOOD_NBBO) + b"\x00\x00\x00\x00" + frame(b"\x05" * 53) + frame(GOOD_ORDER) + b"\x00\x00\x01"
    batch = decode_records([value], framed=True)
    assert [(f.offset, f.reason, f.data) for f in batch.failures] == [
        (46, Reason.EMPTY, b""), (50, Reason.UNKNOWN_TYPE, b"\x05" * 53),
        (164, Reason.TRUNCATED_FRAME, b"\x00\x00\x01")]
    assert_every_byte_accounted_for([value], batch, framed=True)
    assert events_as_messages(batch) == [(seq(0, 0), key_of_message(decode(GOOD_NBBO))),
                                         (seq(0, 3), key_of_message(decode(GOOD_ORDER)))]
