"""Whole buffers at once: decode Kafka records into numpy event arrays, encode results in bulk.

The hot path of every component. A record holding messages of one kind (the normal case:
the NBBO topic carries NBBO, the orders topic carries orders) is decoded as one numpy view
and validated with vector operations; anything else falls back to the one-at-a-time codec,
which also supplies the precise reason for every message that fails. Nothing is dropped:
each input byte ends up either in an event array or in a `DecodeFailure`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .codec import decode, iter_frames
from .errors import FixishError, Reason
from .layout import FRAME_SIZE, NBBO, ORDER, ORDER_RESULT, MessageType, Side
from .messages import Nbbo
from .symbols import rows_all, valid_symbols

__all__ = [
    "NBBO_EVENT",
    "ORDER_EVENT",
    "SEQ_RECORD_SHIFT",
    "DecodeFailure",
    "DecodedBatch",
    "decode_records",
    "encode_nbbos",
    "encode_orders",
    "encode_order_results",
    "decode_order_results",
    "split_fixed",
]

# Events in native byte order, ready for arithmetic. `seq` orders events: record index in the
# high 32 bits, position inside the record in the low 32.
SEQ_RECORD_SHIFT = 32
NBBO_EVENT = np.dtype([("seq", "i8"), ("symbol", "S4"), ("bid_px", "f8"), ("offer_px", "f8")])
ORDER_EVENT = np.dtype([
    ("seq", "i8"), ("side", "u1"), ("account", "u4"), ("order_id", "S6"), ("symbol", "S4"),
    ("order_qty", "f8"), ("price", "f8"),
])


@dataclass(frozen=True, slots=True)
class DecodeFailure:
    """Bytes that are not fixish: which record, where in it, why, and the bytes themselves."""

    record: int
    offset: int
    reason: Reason
    detail: str
    data: bytes


@dataclass(slots=True)
class DecodedBatch:
    nbbo: np.ndarray
    orders: np.ndarray
    failures: list[DecodeFailure] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.nbbo) + len(self.orders)


def _printable(column: np.ndarray) -> np.ndarray:
    width = column.dtype.itemsize
    raw = np.frombuffer(np.ascontiguousarray(column).tobytes(), dtype=np.uint8).reshape(-1, width)
    return rows_all((raw >= 0x20) & (raw <= 0x7E))


def _valid_nbbo(wire: np.ndarray) -> np.ndarray:
    return (
        (wire["type"] == MessageType.NBBO)
        & valid_symbols(wire["symbol"])
        & _printable(wire["transact_time"])
        & np.isfinite(wire["bid_px"]) & np.isfinite(wire["offer_px"])
    )


def _valid_orders(wire: np.ndarray) -> np.ndarray:
    return (
        (wire["type"] == MessageType.ORDER)
        & ((wire["side"] == Side.BUY) | (wire["side"] == Side.SELL))
        & _printable(wire["order_id"])
        & valid_symbols(wire["symbol"])
        & _printable(wire["transact_time"])
        & np.isfinite(wire["order_qty"]) & np.isfinite(wire["price"])
    )


def _nbbo_events(wire: np.ndarray, seq: np.ndarray) -> np.ndarray:
    events = np.empty(len(wire), NBBO_EVENT)
    events["seq"] = seq
    for name in ("symbol", "bid_px", "offer_px"):
        events[name] = wire[name]
    return events


def _order_events(wire: np.ndarray, seq: np.ndarray) -> np.ndarray:
    events = np.empty(len(wire), ORDER_EVENT)
    events["seq"] = seq
    for name in ("side", "account", "order_id", "symbol", "order_qty", "price"):
        events[name] = wire[name]
    return events


class _Collector:
    """Gathers wire arrays, their sequence numbers and failures, then validates in one pass."""

    def __init__(self) -> None:
        self.wire: dict[MessageType, list[np.ndarray]] = {MessageType.NBBO: [], MessageType.ORDER: []}
        self.seq: dict[MessageType, list[np.ndarray]] = {MessageType.NBBO: [], MessageType.ORDER: []}
        self.offsets: dict[MessageType, list[np.ndarray]] = {MessageType.NBBO: [], MessageType.ORDER: []}
        self.failures: list[DecodeFailure] = []

    def add(self, kind: MessageType, wire: np.ndarray, seq: np.ndarray, offsets: np.ndarray) -> None:
        self.wire[kind].append(wire)
        self.seq[kind].append(seq)
        self.offsets[kind].append(offsets)

    def add_one(self, record: int, position: int, offset: int, payload: bytes) -> None:
        """One payload through the precise codec: a valid message or a failure with its reason."""
        try:
            message = decode(payload)
        except FixishError as error:
            self.failures.append(DecodeFailure(record, offset, error.reason, error.detail, payload))
            return
        seq = np.array([(record << SEQ_RECORD_SHIFT) | position], dtype=np.int64)
        kind = MessageType.NBBO if isinstance(message, Nbbo) else MessageType.ORDER
        layout = NBBO if kind is MessageType.NBBO else ORDER
        self.add(kind, np.frombuffer(payload, dtype=layout.dtype), seq, np.array([offset]))

    def finish(self) -> DecodedBatch:
        results = {}
        for kind, layout, valid, to_events, empty in (
            (MessageType.NBBO, NBBO, _valid_nbbo, _nbbo_events, NBBO_EVENT),
            (MessageType.ORDER, ORDER, _valid_orders, _order_events, ORDER_EVENT),
        ):
            if not self.wire[kind]:
                results[kind] = np.empty(0, empty)
                continue
            # dtype= keeps the wire's big-endian fields: concatenate would otherwise switch them to
            # native order, and a failure's bytes would no longer be the bytes received.
            wire = np.concatenate([w.astype(layout.dtype, copy=False) for w in self.wire[kind]], dtype=layout.dtype)
            seq = np.concatenate(self.seq[kind])
            offsets = np.concatenate(self.offsets[kind])
            if len(seq) > 1 and (np.diff(seq) < 0).any():
                # Records decoded one message at a time were added after the bulk ones: events
                # leave here in seq order, whichever path decoded them.
                order = np.argsort(seq, kind="stable")
                wire, seq, offsets = wire[order], seq[order], offsets[order]
            ok = valid(wire)
            if not ok.all():
                for i in np.flatnonzero(~ok):
                    payload = wire[i:i + 1].tobytes()
                    try:
                        decode(payload)
                    except FixishError as error:
                        record = int(seq[i] >> SEQ_RECORD_SHIFT)
                        self.failures.append(
                            DecodeFailure(record, int(offsets[i]), error.reason, error.detail, payload))
                    else:  # pragma: no cover - the vector check and the codec must agree
                        raise AssertionError(f"vector validation rejected a valid {layout.name}: {payload!r}")
                wire, seq = wire[ok], seq[ok]
            results[kind] = to_events(wire, seq)
        failures = sorted(self.failures, key=lambda f: (f.record, f.offset))
        return DecodedBatch(results[MessageType.NBBO], results[MessageType.ORDER], failures)


def _bulk_framed(values: Sequence[bytes | None], collector: _Collector) -> None:
    # All records of one kind are joined and checked as one array: per-record numpy calls cost
    # more than the messages themselves at a few hundred messages a record. A record takes the
    # fast path only if every frame in it is a whole message of the kind its first frame names.
    n = len(values)
    lengths = np.fromiter((len(v) if v else 0 for v in values), dtype=np.int64, count=n)
    first_type = np.fromiter((v[FRAME_SIZE] if v and len(v) > FRAME_SIZE else -1 for v in values),
                             dtype=np.int64, count=n)
    handled = np.zeros(n, dtype=bool)
    for kind, layout in ((MessageType.NBBO, NBBO), (MessageType.ORDER, ORDER)):
        candidates = np.flatnonzero((lengths > 0) & (lengths % layout.framed_size == 0) & (first_type == kind))
        if not len(candidates):
            continue
        wire = np.frombuffer(b"".join([values[i] for i in candidates]), dtype=layout.framed_dtype)
        counts = lengths[candidates] // layout.framed_size
        starts = np.cumsum(counts) - counts
        whole = (wire["frame_length"] == layout.size) & (wire["type"] == kind)
        good = np.logical_and.reduceat(whole, starts)
        keep = np.repeat(good, counts)
        positions = np.arange(len(wire), dtype=np.int64) - np.repeat(starts, counts)
        seq = (np.repeat(candidates.astype(np.int64), counts) << SEQ_RECORD_SHIFT) | positions
        if not keep.all():
            wire, seq, positions = wire[keep], seq[keep], positions[keep]
        collector.add(kind, wire[list(layout.fields)], seq, positions * layout.framed_size)
        handled[candidates[good]] = True
    for record in np.flatnonzero(~handled).tolist():
        value = values[record]
        if not value:
            collector.failures.append(DecodeFailure(record, 0, Reason.EMPTY, "empty record", b""))
        else:
            _slow_framed(record, value, collector)


def _slow_framed(record: int, value: bytes, collector: _Collector) -> None:
    position = 0
    try:
        for offset, payload in iter_frames(value):
            collector.add_one(record, position, offset, payload)
            position += 1
    except FixishError as error:
        # Framing is lost from here on: keep every remaining byte in the failure.
        collector.failures.append(
            DecodeFailure(record, error.offset, error.reason, error.detail, bytes(value[error.offset:])))


def _bulk_messages(values: Sequence[bytes | None], collector: _Collector) -> None:
    n = len(values)
    lengths = np.fromiter((len(v) if v else 0 for v in values), dtype=np.int64, count=n)
    types = np.fromiter((v[0] if v else 0 for v in values), dtype=np.int64, count=n)
    handled = np.zeros(n, dtype=bool)
    for kind, layout in ((MessageType.NBBO, NBBO), (MessageType.ORDER, ORDER)):
        records = np.flatnonzero((lengths == layout.size) & (types == kind))
        if len(records):
            wire = np.frombuffer(b"".join([values[i] for i in records]), dtype=layout.dtype)
            collector.add(kind, wire, records.astype(np.int64) << SEQ_RECORD_SHIFT, np.zeros(len(records), np.int64))
            handled[records] = True
    for record in np.flatnonzero(~handled):
        value = values[record]
        if not value:
            collector.failures.append(DecodeFailure(int(record), 0, Reason.EMPTY, "empty record", b""))
        else:
            collector.add_one(int(record), 0, 0, bytes(value))


def decode_records(values: Sequence[bytes | None], framed: bool) -> DecodedBatch:
    """Decode Kafka record values: one message each, or (`framed`) a run of framed messages each."""
    collector = _Collector()
    (_bulk_framed if framed else _bulk_messages)(values, collector)
    return collector.finish()


def _encode(layout, columns: dict, framed: bool) -> np.ndarray:
    # Constants (the type byte) broadcast; the message count comes from the array columns.
    n = max(len(column) for column in columns.values() if np.ndim(column))
    out = np.empty(n, layout.framed_dtype if framed else layout.dtype)
    if framed:
        out["frame_length"] = layout.size
    for name, column in columns.items():
        out[name] = column
    return out


def encode_nbbos(symbols, bid_px, offer_px, transact_time, framed: bool = True) -> np.ndarray:
    """Padded S4 symbols and prices -> wire records (call `.tobytes()` for the buffer)."""
    return _encode(NBBO, {"type": MessageType.NBBO, "symbol": symbols, "transact_time": transact_time,
                          "bid_px": bid_px, "offer_px": offer_px}, framed)


def encode_orders(side, account, order_id, symbols, order_qty, price, transact_time, framed: bool = True) -> np.ndarray:
    return _encode(ORDER, {"type": MessageType.ORDER, "side": side, "account": account, "order_id": order_id,
                           "symbol": symbols, "order_qty": order_qty, "price": price,
                           "transact_time": transact_time}, framed)


def encode_order_results(orders: np.ndarray, bid: np.ndarray, offer: np.ndarray, timestamp: np.ndarray,
                         framed: bool = False) -> np.ndarray:
    """Order events (ORDER_EVENT) plus the quote that rejected each and its timestamp -> wire records."""
    columns = {name: orders[name] for name in ("side", "account", "order_id", "symbol", "order_qty", "price")}
    columns.update(bid=bid, offer=offer, timestamp=timestamp)
    return _encode(ORDER_RESULT, columns, framed)


def decode_order_results(buffer: bytes, framed: bool = True) -> np.ndarray:
    """A buffer of OrderResults -> wire array; raises FixishError if it is not whole OrderResults."""
    layout_dtype = ORDER_RESULT.framed_dtype if framed else ORDER_RESULT.dtype
    if len(buffer) % layout_dtype.itemsize:
        raise FixishError(Reason.TRUNCATED_FRAME,
                          f"{len(buffer)} bytes is not a whole number of {layout_dtype.itemsize}-byte OrderResults")
    wire = np.frombuffer(buffer, dtype=layout_dtype)
    if framed and not (wire["frame_length"] == ORDER_RESULT.size).all():
        bad = int(np.flatnonzero(wire["frame_length"] != ORDER_RESULT.size)[0])
        raise FixishError(Reason.BAD_LENGTH, f"frame {bad} is not an OrderResult", bad * layout_dtype.itemsize)
    return wire


def split_fixed(buffer: bytes, size: int) -> list[bytes]:
    """One bytes object per fixed-size message: what a one-message-per-record producer sends."""
    return [buffer[i:i + size] for i in range(0, len(buffer), size)]

