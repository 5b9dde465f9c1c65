"""The fixish wire format, one message at a time (fixish/codec.py), against the reference table.

Specified here: the size and every field offset of NBBO (42 bytes, 46 framed), Order (53, 57) and
OrderResult (55, 59), checked against bytes laid out by hand with `struct` at the offsets of the
reference table (not with our own layout); lossless round trips, framed and unframed; Wallaroo's
own data files decode completely; and every kind of bad input is refused with its `Reason`.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.fixish import (
    FRAME_SIZE, NBBO, ORDER, ORDER_RESULT, FixishError, Nbbo, Order, OrderResult, Reason, Side, decode,
    decode_order_result, encode, encode_order_result, frame, frame_all, iter_frames, split_frames,
)
from marketspread.rule import should_reject

from fixish_strategies import BAD_MESSAGES, GOOD_NBBO, GOOD_ORDER, TIME, nbbos, order_results, orders

# The reference table: (offset, struct code, field) per message, written out independently.
NBBO_TABLE = [(0, ">B", "type"), (1, "4s", "symbol"), (5, "21s", "transact_time"), (26, ">d", "bid_px"),
              (34, ">d", "offer_px")]
ORDER_TABLE = [(0, ">B", "type"), (1, ">B", "side"), (2, ">I", "account"), (6, "6s", "order_id"),
               (12, "4s", "symbol"), (16, ">d", "order_qty"), (24, ">d", "price"), (32, "21s", "transact_time")]
ORDER_RESULT_TABLE = [(0, ">B", "side"), (1, ">I", "account"), (5, "6s", "order_id"), (11, "4s", "symbol"),
                      (15, ">d", "order_qty"), (23, ">d", "price"), (31, ">d", "bid"), (39, ">d", "offer"),
                      (47, ">Q", "timestamp")]


def by_hand(size: int, table, values: dict) -> bytes:
    buffer = bytearray(size)
    for offset, code, name in table:
        struct.pack_into(code, buffer, offset, values[name])
    return bytes(buffer)


def read_by_hand(payload: bytes, table) -> dict:
    return {name: struct.unpack_from(code, payload, offset)[0] for offset, code, name in table}


# --- sizes and offsets -------------------------------------------------------------------------

@pytest.mark.parametrize(("layout", "size", "framed_size"), [(NBBO, 42, 46), (ORDER, 53, 57), (ORDER_RESULT, 55, 59)])
def test_each_message_has_the_reference_size_framed_and_unframed(layout, size, framed_size):
    assert (layout.size, layout.framed_size, FRAME_SIZE) == (size, framed_size, 4)
    assert (layout.dtype.itemsize, layout.framed_dtype.itemsize) == (size, framed_size)


@pytest.mark.parametrize(("layout", "table"), [(NBBO, NBBO_TABLE), (ORDER, ORDER_TABLE),
                                               (ORDER_RESULT, ORDER_RESULT_TABLE)])
def test_the_numpy_dtypes_put_each_field_at_the_reference_offset(layout, table):
    assert {name: layout.dtype.fields[name][1] for name in layout.fields} == {name: off for off, _, name in table}
    assert {name: layout.framed_dtype.fields[name][1] for name in layout.fields} == \
        {name: off + 4 for off, _, name in table}
    assert layout.framed_dtype.fields["frame_length"][1] == 0


def test_an_nbbo_laid_out_by_hand_decodes_field_by_field():
    payload = by_hand(42, NBBO_TABLE, {"type": 2, "symbol": b" TGT", "transact_time": b"20160902-15:47:52.000",
                                       "bid_px": 19.65, "offer_px": 19.7125})
    assert decode(payload) == Nbbo("TGT", 19.65, 19.7125, "20160902-15:47:52.000")


def test_an_order_laid_out_by_hand_decodes_field_by_field():
    payload = by_hand(53, ORDER_TABLE, {"type": 1, "side": 2, "account": 4_000_000_001, "order_id": b"HMtWvd",
                                        "symbol": b"BF.B", "order_qty": 1337900.0, "price": 0.74749102461495,
                                        "transact_time": b"20151204-14:30:00.000"})
    assert decode(payload) == Order(Side.SELL, 4_000_000_001, "HMtWvd", "BF.B", 1337900.0, 0.74749102461495,
                                    "20151204-14:30:00.000")


def test_an_order_result_laid_out_by_hand_decodes_field_by_field():
    payload = by_hand(55, ORDER_RESULT_TABLE, {"side": 1, "account": 7, "order_id": b"000042", "symbol": b"  NI",
                                               "order_qty": 500.0, "price": 10.5, "bid": 10.0, "offer": 11.0,
                                               "timestamp": 1_700_000_000_123_000_000})
    assert decode_order_result(payload) == OrderResult(Side.BUY, 7, "000042", "NI", 500.0, 10.5, 10.0, 11.0,
                                                       1_700_000_000_123_000_000)


def test_the_encoder_writes_each_field_at_the_reference_offset():
    nbbo = encode(Nbbo("NI", 1.25, 1.5, "20160902-15:47:52.000"))
    assert len(nbbo) == 42
    assert read_by_hand(nbbo, NBBO_TABLE) == {"type": 2, "symbol": b"  NI", "transact_time": b"20160902-15:47:52.000",
                                              "bid_px": 1.25, "offer_px": 1.5}
    order = encode(Order(Side.BUY, 300, "abc123", "GOOG", 650.0, 771.5, "20160902-15:47:52.001"))
    assert len(order) == 53
    assert read_by_hand(order, ORDER_TABLE) == {"type": 1, "side": 1, "account": 300, "order_id": b"abc123",
                                                "symbol": b"GOOG", "order_qty": 650.0, "price": 771.5,
                                                "transact_time": b"20160902-15:47:52.001"}
    result = encode_order_result(OrderResult(Side.SELL, 9, "zz9999", "F", 10.0, 12.0, 11.5, 12.5, 2**64 - 1))
    assert len(result) == 55
    assert read_by_hand(result, ORDER_RESULT_TABLE) == {"side": 2, "account": 9, "order_id": b"zz9999",
                                                        "symbol": b"   F", "order_qty": 10.0, "price": 12.0,
                                                        "bid": 11.5, "offer": 12.5, "timestamp": 2**64 - 1}


def test_the_order_result_layout_is_the_reference_struct():
    assert ORDER_RESULT.struct.format == ">BI6s4sddddQ"
    assert struct.calcsize(">BI6s4sddddQ") == 55


def test_a_frame_is_a_four_byte_big_endian_payload_length():
    assert frame(b"x" * 42) == b"\x00\x00\x00\x2a" + b"x" * 42
    assert frame(b"y" * 300) == b"\x00\x00\x01\x2c" + b"y" * 300


# --- round trips -------------------------------------------------------------------------------

@settings(deadline=None)
@given(nbbos())
def test_an_nbbo_survives_encoding_and_decoding(nbbo):
    payload = encode(nbbo)
    assert len(payload) == 42
    assert decode(payload) == nbbo


@settings(deadline=None)
@given(orders())
def test_an_order_survives_encoding_and_decoding(order):
    payload = encode(order)
    assert len(payload) == 53
    assert decode(payload) == order


@settings(deadline=None)
@given(order_results())
def test_an_order_result_survives_encoding_and_decoding(result):
    payload = encode_order_result(result)
    assert len(payload) == 55
    assert decode_order_result(payload) == result


@settings(deadline=None)
@given(st.lists(nbbos() | orders(), max_size=30))
def test_framed_messages_survive_framing_and_unframing(messages):
    payloads = [encode(m) for m in messages]
    buffer = frame_all(payloads)
    assert len(buffer) == sum(46 if isinstance(m, Nbbo) else 57 for m in messages)
    assert [decode(p) for p in split_frames(buffer)] == messages
    offsets = [offset for offset, _ in iter_frames(buffer)]
    assert offsets == [sum(4 + len(p) for p in payloads[:i]) for i in range(len(payloads))]


def test_prices_keep_every_bit_including_negative_zero_and_subnormals():
    for bid, offer in [(-0.0, 0.0), (5e-324, 2.2250738585072014e-308), (1.7976931348623157e308, -1.5)]:
        decoded = decode(encode(Nbbo("X", bid, offer, TIME)))
        assert struct.pack(">dd", decoded.bid_px, decoded.offer_px) == struct.pack(">dd", bid, offer)


# --- Wallaroo's data files ---------------------------------------------------------------------

@pytest.mark.parametrize(("name", "count"), [("350", 350), ("700", 700), ("1400", 1400), ("2100", 2100),
                                             ("r3k", 2926)])
def test_each_initial_nbbo_file_decodes_completely_one_nbbo_per_symbol(wallaroo_data, name, count):
    data = (wallaroo_data / f"{name}-symbols_initial-nbbo-fixish.msg").read_bytes()
    messages = [decode(p) for p in split_frames(data)]
    assert len(data) == 46 * count
    assert len(messages) == count
    assert all(isinstance(m, Nbbo) for m in messages)
    assert len({m.symbol for m in messages}) == count
    # The first 15 symbols are put in the reject state, every other one is not.
    assert [should_reject(m.bid_px, m.offer_px) for m in messages] == [True] * 15 + [False] * (count - 15)
    assert [m.symbol for m in messages[:15]] == ["INSM", "PPHM", "NYCB", "NFX", "TMO", "TGT", "GOOG", "SIAL", "GPS",
                                                 "MYGN", "MDRX", "TTPH", "NI", "IVR", "SLH"]


@pytest.mark.parametrize("name", ["700", "1400", "2100", "r3k"])
def test_the_legal_symbols_file_lists_the_padded_symbols_in_initial_nbbo_order(wallaroo_data, name):
    legal = (wallaroo_data / f"{name}-legal-symbols.msg").read_text().splitlines()
    data = (wallaroo_data / f"{name}-symbols_initial-nbbo-fixish.msg").read_bytes()
    assert [p[1:5].decode("ascii") for p in split_frames(data)] == legal


def test_each_larger_symbol_set_from_700_up_starts_with_the_smaller_one(wallaroo_data):
    def symbols(name):
        return [decode(p).symbol for p in
                split_frames((wallaroo_data / f"{name}-symbols_initial-nbbo-fixish.msg").read_bytes())]

    for smaller, larger in [("700", "1400"), ("1400", "2100"), ("2100", "r3k")]:
        small = symbols(smaller)
        assert symbols(larger)[:len(small)] == small
    # symbols.txt is the 350 set; the 350 set is *not* inside the 700 set (29 symbols differ).
    assert set((wallaroo_data / "symbols.txt").read_text().split()) == set(symbols("350"))
    assert len(set(symbols("350")) - set(symbols("700"))) == 29


@pytest.mark.parametrize(("name", "kind", "count", "symbols"), [
    ("1000nbbo", Nbbo, 1000, 346), ("100nbbo", Nbbo, 100, 87), ("1000trades", Order, 1000, 211),
])
def test_the_historical_demo_streams_decode_completely(wallaroo_data, name, kind, count, symbols):
    messages = [decode(p) for p in split_frames((wallaroo_data / "historical" / f"{name}-fixish.msg").read_bytes())]
    assert len(messages) == count
    assert all(type(m) is kind for m in messages)
    assert len({m.symbol for m in messages}) == symbols


def test_the_first_historical_order_is_the_one_wallaroo_shipped(wallaroo_data):
    first = next(iter(split_frames((wallaroo_data / "historical" / "1000trades-fixish.msg").read_bytes())))
    assert decode(first) == Order(Side.BUY, 57, "HMtWvd", "BTU", 1337900.0, 0.74749102461495, "20151204-14:30:00.000")


# --- bad input ---------------------------------------------------------------------------------

def test_the_bad_inputs_start_from_valid_messages():
    assert decode(GOOD_NBBO) == Nbbo("NI", 10.0, 10.01, TIME)
    assert decode(GOOD_ORDER) == Order(Side.BUY, 1, "abc123", "NI", 100.0, 10.0, TIME)


@pytest.mark.parametrize(("payload", "reason"), BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_decoding_a_bad_message_fails_with_its_reason(payload, reason):
    with pytest.raises(FixishError) as raised:
        decode(payload)
    assert raised.value.reason is reason
    assert raised.value.detail
    assert str(raised.value).startswith(reason.value + ": ")


def test_a_framed_batch_with_a_truncated_tail_yields_the_messages_before_it_then_fails():
    buffer = frame(GOOD_NBBO) + frame(GOOD_ORDER) + frame(GOOD_NBBO)[:30]
    seen = []
    with pytest.raises(FixishError) as raised:
        for offset, payload in iter_frames(buffer):
            seen.append((offset, decode(payload)))
    assert seen == [(0, decode(GOOD_NBBO)), (46, decode(GOOD_ORDER))]
    assert (raised.value.reason, raised.value.offset) == (Reason.TRUNCATED_FRAME, 103)


@pytest.mark.parametrize(("buffer", "reason", "offset"), [
    (b"\x00\x00", Reason.TRUNCATED_FRAME, 0),                        # too short for a frame header
    (frame(GOOD_NBBO) + b"\x00\x00\x00", Reason.TRUNCATED_FRAME, 46),  # a partial header after a frame
    (b"\x00\x00\x00\x2a" + GOOD_NBBO[:41], Reason.TRUNCATED_FRAME, 0),  # one payload byte missing
    (b"\xff\xff\xff\xff" + GOOD_NBBO, Reason.TRUNCATED_FRAME, 0),     # a length far past the end
])
def test_a_broken_frame_is_refused_with_its_reason_and_offset(buffer, reason, offset):
    with pytest.raises(FixishError) as raised:
        split_frames(buffer)
    assert (raised.value.reason, raised.value.offset) == (reason, offset)


def test_a_frame_of_length_zero_is_an_empty_message_and_the_frames_after_it_still_split():
    buffer = frame(GOOD_NBBO) + b"\x00\x00\x00\x00" + frame(GOOD_ORDER)
    assert list(iter_frames(buffer)) == [(0, GOOD_NBBO), (46, b""), (50, GOOD_ORDER)]
    with pytest.raises(FixishError) as raised:
        decode(b"")
    assert raised.value.reason is Reason.EMPTY


def test_an_order_result_of_the_wrong_length_or_side_is_refused():
    good = encode_order_result(OrderResult(Side.BUY, 1, "abc123", "NI", 1.0, 2.0, 3.0, 4.0, 5))
    with pytest.raises(FixishError) as raised:
        decode_order_result(good[:-1])
    assert raised.value.reason is Reason.BAD_LENGTH
    with pytest.raises(FixishError) as raised:
        decode_order_result(b"\x05" + good[1:])
    assert raised.value.reason is Reason.BAD_SIDE


@pytest.mark.parametrize(("message", "reason"), [
    (Nbbo("NI", math.nan, 1.0, TIME), Reason.BAD_NUMBER),
    (Nbbo("NI", 1.0, math.inf, TIME), Reason.BAD_NUMBER),
    (Nbbo("NIKEX", 1.0, 1.0, TIME), Reason.BAD_SYMBOL),
    (Nbbo("", 1.0, 1.0, TIME), Reason.BAD_SYMBOL),
    (Nbbo("NÍ", 1.0, 1.0, TIME), Reason.BAD_SYMBOL),
    (Nbbo("NI", 1.0, 1.0, "2016"), Reason.BAD_TIME),
    (Nbbo("NI", 1.0, 1.0, "2016090215:47:52.000é"), Reason.BAD_TIME),
    (Order(Side.BUY, 1, "abc12", "NI", 1.0, 1.0, TIME), Reason.BAD_ORDER_ID),
    (Order(Side.BUY, 1, "abc12é", "NI", 1.0, 1.0, TIME), Reason.BAD_ORDER_ID),
    (Order(Side.BUY, 1, "abc123", "NI", math.nan, 1.0, TIME), Reason.BAD_NUMBER),
])
def test_encoding_refuses_a_message_that_could_not_be_decoded(message, reason):
    with pytest.raises(FixishError) as raised:
        encode(message)
    assert raised.value.reason is reason
