"""Rejection records in both record formats -> framed OrderResults, and the malformed ones with reasons."""

from __future__ import annotations

import numpy as np

from marketspread.fixish import ORDER_RESULT, OrderResult, Reason, Side, encode_order_result, frame, frame_all
from marketspread.receiver.decoding import Malformed, decode_rejections

T = 1_700_000_000_000_000_000


def payload(order_id: str, symbol: str = "BF.B", ts: int = T) -> bytes:
    return encode_order_result(OrderResult(Side.SELL, 300, order_id, symbol, 650.0, 123.45, 0.5, 0.53, ts))


def with_byte(data: bytes, index: int, value: int) -> bytes:
    changed = bytearray(data)
    changed[index] = value
    return bytes(changed)


def test_message_records_become_framed_results_in_record_order():
    values = [payload("AAAAAA"), payload("BBBBBB", "NI"), payload("CCCCCC", ts=T + 1)]
    decoded = decode_rejections(values, framed=False)
    assert decoded.malformed == []
    assert decoded.results.dtype == ORDER_RESULT.framed_dtype
    assert decoded.results.tobytes() == frame_all(values)  # byte for byte, big-endian kept
    assert decoded.record_of.tolist() == [0, 1, 2]
    assert decoded.results["timestamp"].tolist() == [T, T, T + 1]


def test_message_records_that_are_not_order_results_are_malformed_with_the_codecs_reason():
    good = payload("AAAAAA")
    values = [good, b"", None, good[:-1], with_byte(good, 0, 3), with_byte(payload("BBBBBB"), 7, 0x01),
              frame(good), payload("CCCCCC")]
    decoded = decode_rejections(values, framed=False)
    assert decoded.record_of.tolist() == [0, 7]
    assert [(m.index, m.reason) for m in decoded.malformed] == [
        (1, Reason.EMPTY), (2, Reason.EMPTY), (3, Reason.BAD_LENGTH), (4, Reason.BAD_SIDE),
        (5, Reason.BAD_ORDER_ID), (6, Reason.BAD_LENGTH)]
    assert decoded.results.tobytes() == frame(good) + frame(payload("CCCCCC"))


def test_a_bad_symbol_is_malformed():
    bad = payload("AAAAAA")[:12] + b"N I " + payload("AAAAAA")[16:]
    decoded = decode_rejections([bad], framed=False)
    assert decoded.malformed == [Malformed(0, Reason.BAD_SYMBOL, decoded.malformed[0].detail)]
    assert len(decoded.results) == 0


def test_framed_records_carry_many_results_each():
    first = frame_all([payload("AAAAAA"), payload("BBBBBB")])
    second = frame_all([payload("CCCCCC")])
    decoded = decode_rejections([first, second], framed=True)
    assert decoded.malformed == []
    assert decoded.results.tobytes() == first + second
    assert decoded.record_of.tolist() == [0, 0, 1]


def test_a_framed_record_with_any_bad_part_is_kept_whole_as_malformed():
    good = frame_all([payload("AAAAAA")])
    truncated = frame_all([payload("BBBBBB"), payload("CCCCCC")])[:-3]
    bad_side = frame_all([payload("DDDDDD"), with_byte(payload("EEEEEE"), 0, 9)])
    wrong_length = frame(payload("FFFFFF") + b"xxxx")[:ORDER_RESULT.framed_size]
    decoded = decode_rejections([good, truncated, bad_side, b"", wrong_length, good], framed=True)
    assert decoded.record_of.tolist() == [0, 5]
    assert [(m.index, m.reason) for m in decoded.malformed] == [
        (1, Reason.TRUNCATED_FRAME), (2, Reason.BAD_SIDE), (3, Reason.EMPTY), (4, Reason.BAD_LENGTH)]


def test_nothing_valid_gives_an_empty_framed_array():
    decoded = decode_rejections([b"junk"], framed=True)
    assert decoded.results.dtype == ORDER_RESULT.framed_dtype
    assert len(decoded.results) == 0 and isinstance(decoded.record_of, np.ndarray)
