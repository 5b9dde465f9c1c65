"""Sender input: whole files validated before anything is sent, looping, re-cut generated chunks."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from marketspread.fixish import NBBO, ORDER, MessageType, Nbbo, Order, Side, encode, frame, frame_all
from marketspread.sender.errors import InputFileError
from marketspread.sender.source import ChunkSource, FileSource, load_file

QUOTES = [Nbbo(s, 10.0 + i, 10.01 + i) for i, s in enumerate(("A", "BB", "CCC", "DDDD", "BF.B"))]


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_valid_file_loads_as_an_array_of_framed_records(tmp_path, wallaroo_data):
    path = wallaroo_data / "350-symbols_initial-nbbo-fixish.msg"
    wire = load_file(path, MessageType.NBBO)
    assert wire.dtype == NBBO.framed_dtype
    assert len(wire) == 350
    assert wire.tobytes() == path.read_bytes()


def test_a_file_with_a_bad_side_byte_is_refused_naming_the_file_the_byte_offset_and_the_reason(tmp_path):
    orders = [encode(Order(Side.BUY, 1, f"ID{i:04d}", "AA", 100.0, 10.0)) for i in range(3)]
    bad = bytearray(orders[1])
    bad[1] = 7
    path = write(tmp_path, "orders.msg", frame_all([orders[0], bytes(bad), orders[2]]))
    with pytest.raises(InputFileError) as caught:
        load_file(path, MessageType.ORDER)
    message = str(caught.value)
    assert str(path) in message
    assert f"at byte {ORDER.framed_size}" in message
    assert "bad-side" in message


def test_a_truncated_tail_is_refused_at_the_offset_of_the_broken_frame(tmp_path):
    data = frame_all(encode(q) for q in QUOTES)
    path = write(tmp_path, "nbbo.msg", data[:-10])
    with pytest.raises(InputFileError, match=rf"at byte {4 * NBBO.framed_size}: truncated-frame"):
        load_file(path, MessageType.NBBO)


def test_a_text_file_is_not_fixish(tmp_path, wallaroo_data):
    path = wallaroo_data / "symbols.txt"
    with pytest.raises(InputFileError, match=r"symbols.txt is not a framed fixish file: at byte 0"):
        load_file(path, MessageType.NBBO)


def test_an_nbbo_with_an_infinite_price_is_refused(tmp_path):
    payload = bytearray(encode(QUOTES[0]))
    payload[26:34] = struct.pack(">d", float("inf"))
    path = write(tmp_path, "nbbo.msg", frame_all([encode(QUOTES[1]), bytes(payload)]))
    with pytest.raises(InputFileError, match=rf"at byte {NBBO.framed_size}: bad-number"):
        load_file(path, MessageType.NBBO)


def test_orders_in_a_file_for_the_nbbo_stream_are_refused_with_the_first_offset(tmp_path):
    order = encode(Order(Side.SELL, 7, "ABC123", "AA", 10.0, 5.0))
    path = write(tmp_path, "mixed.msg", frame(encode(QUOTES[0])) + frame(order) + frame(encode(QUOTES[1])))
    with pytest.raises(InputFileError, match=rf"holds 1 ORDER messages, first at byte {NBBO.framed_size}, "
                                             r"but this stream sends only NBBO"):
        load_file(path, MessageType.NBBO)


def test_an_empty_file_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(InputFileError, match="is empty"):
        load_file(write(tmp_path, "empty.msg", b""), MessageType.NBBO)
    with pytest.raises(InputFileError, match="cannot read .*missing.msg"):
        load_file(tmp_path / "missing.msg", MessageType.NBBO)


def wire_of(quotes) -> np.ndarray:
    return np.frombuffer(frame_all(encode(q) for q in quotes), dtype=NBBO.framed_dtype)


def symbols(wire: np.ndarray) -> list[bytes]:
    return [bytes(s) for s in wire["symbol"]]


def test_a_file_source_hands_out_the_file_once_in_the_sizes_asked_for():
    source = FileSource(wire_of(QUOTES), MessageType.NBBO)
    assert symbols(source.take(2)) == [b"   A", b"  BB"]
    assert symbols(source.take(10)) == [b" CCC", b"DDDD", b"BF.B"]
    assert len(source.take(10)) == 0


def test_a_looping_file_source_wraps_around_inside_one_batch():
    source = FileSource(wire_of(QUOTES), MessageType.NBBO, loop=True)
    assert symbols(source.take(4)) == [b"   A", b"  BB", b" CCC", b"DDDD"]
    assert symbols(source.take(7)) == [b"BF.B", b"   A", b"  BB", b" CCC", b"DDDD", b"BF.B", b"   A"]
    assert symbols(source.take(1)) == [b"  BB"]


def test_a_batch_joined_across_the_end_of_the_file_keeps_the_exact_wire_bytes():
    wire = wire_of(QUOTES)
    source = FileSource(wire, MessageType.NBBO, loop=True)
    source.take(3)
    joined = source.take(4)
    assert joined.dtype == NBBO.framed_dtype
    assert joined.tobytes() == wire[3:].tobytes() + wire[:2].tobytes()


def test_a_file_source_of_the_wrong_kind_is_a_programming_error():
    with pytest.raises(TypeError):
        FileSource(wire_of(QUOTES), MessageType.ORDER)


def test_a_chunk_source_re_cuts_generated_chunks_and_ends_with_them():
    wire = wire_of(QUOTES)
    source = ChunkSource(iter([wire[:2], wire[2:3], wire[3:]]), MessageType.NBBO, "test")
    assert symbols(source.take(3)) == [b"   A", b"  BB", b" CCC"]
    assert symbols(source.take(1)) == [b"DDDD"]
    assert symbols(source.take(5)) == [b"BF.B"]
    assert len(source.take(5)) == 0


def test_re_cut_generated_chunks_keep_the_exact_wire_bytes():
    wire = wire_of(QUOTES)
    source = ChunkSource(iter([wire[:2], wire[2:]]), MessageType.NBBO, "test")
    assert source.take(5).tobytes() == wire.tobytes()
