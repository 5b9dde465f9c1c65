"""One message at a time: encode, decode (with a precise reason when it fails), frame and unframe."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from .errors import FixishError, Reason
from .layout import FRAME, FRAME_SIZE, NBBO, ORDER, ORDER_RESULT, MessageType, Side
from .messages import Message, Nbbo, Order, OrderResult
from .symbols import pad_symbol, unpad_symbol

__all__ = [
    "encode",
    "encode_order_result",
    "decode",
    "decode_order_result",
    "frame",
    "iter_frames",
    "split_frames",
    "frame_all",
]

_LENGTH_BY_TYPE = {MessageType.NBBO: NBBO.size, MessageType.ORDER: ORDER.size}


def _ascii(value: str, size: int, reason: Reason, what: str) -> bytes:
    try:
        raw = value.encode("ascii")
    except UnicodeEncodeError:
        raise FixishError(reason, f"{what} {value!r} is not ASCII") from None
    if len(raw) != size:
        raise FixishError(reason, f"{what} {value!r} is not {size} characters")
    return raw


def _finite(*values: float) -> None:
    if not all(math.isfinite(v) for v in values):
        raise FixishError(Reason.BAD_NUMBER, f"non-finite number in {values}")


def encode(message: Message) -> bytes:
    """The unframed payload of an NBBO or an Order."""
    if isinstance(message, Nbbo):
        _finite(message.bid_px, message.offer_px)
        return NBBO.struct.pack(
            MessageType.NBBO,
            pad_symbol(message.symbol),
            _ascii(message.transact_time, NBBO.dtype["transact_time"].itemsize, Reason.BAD_TIME, "time"),
            message.bid_px,
            message.offer_px,
        )
    if isinstance(message, Order):
        _finite(message.order_qty, message.price)
        return ORDER.struct.pack(
            MessageType.ORDER,
            Side(message.side),
            message.account,
            _ascii(message.order_id, ORDER.dtype["order_id"].itemsize, Reason.BAD_ORDER_ID, "order id"),
            pad_symbol(message.symbol),
            message.order_qty,
            message.price,
            _ascii(message.transact_time, ORDER.dtype["transact_time"].itemsize, Reason.BAD_TIME, "time"),
        )
    raise TypeError(f"not a fixish message: {message!r}")


def encode_order_result(result: OrderResult) -> bytes:
    return ORDER_RESULT.struct.pack(
        Side(result.side),
        result.account,
        _ascii(result.order_id, ORDER_RESULT.dtype["order_id"].itemsize, Reason.BAD_ORDER_ID, "order id"),
        pad_symbol(result.symbol),
        result.order_qty,
        result.price,
        result.bid,
        result.offer,
        result.timestamp,
    )


def _text(raw: bytes, reason: Reason, what: str) -> str:
    if not all(0x20 <= b <= 0x7E for b in raw):
        raise FixishError(reason, f"{what} {raw!r} is not printable ASCII")
    return raw.decode("ascii")


def _symbol(raw: bytes) -> str:
    try:
        return unpad_symbol(pad_symbol(raw))
    except (FixishError, UnicodeDecodeError):
        raise FixishError(Reason.BAD_SYMBOL, f"symbol {raw!r} is not 1-4 printable ASCII characters, left-padded") from None


def decode(payload: bytes) -> Message:
    """Decode one unframed NBBO or Order; FixishError says exactly what is wrong."""
    if not payload:
        raise FixishError(Reason.EMPTY, "empty message")
    try:
        kind = MessageType(payload[0])
    except ValueError:
        raise FixishError(Reason.UNKNOWN_TYPE, f"type byte {payload[0]} is neither Order (1) nor NBBO (2)") from None
    expected = _LENGTH_BY_TYPE[kind]
    if len(payload) != expected:
        raise FixishError(Reason.BAD_LENGTH, f"{kind.name} of {len(payload)} bytes, expected {expected}")
    if kind is MessageType.NBBO:
        _, symbol, time, bid, offer = NBBO.struct.unpack(payload)
        _finite(bid, offer)
        return Nbbo(_symbol(symbol), bid, offer, _text(time, Reason.BAD_TIME, "transact time"))
    _, side, account, order_id, symbol, qty, price, time = ORDER.struct.unpack(payload)
    if side not in (Side.BUY, Side.SELL):
        raise FixishError(Reason.BAD_SIDE, f"side byte {side} is neither Buy (1) nor Sell (2)")
    _finite(qty, price)
    return Order(Side(side), account, _text(order_id, Reason.BAD_ORDER_ID, "order id"), _symbol(symbol), qty, price,
                 _text(time, Reason.BAD_TIME, "transact time"))


def decode_order_result(payload: bytes) -> OrderResult:
    if len(payload) != ORDER_RESULT.size:
        raise FixishError(Reason.BAD_LENGTH, f"OrderResult of {len(payload)} bytes, expected {ORDER_RESULT.size}")
    side, account, order_id, symbol, qty, price, bid, offer, ts = ORDER_RESULT.struct.unpack(payload)
    if side not in (Side.BUY, Side.SELL):
        raise FixishError(Reason.BAD_SIDE, f"side byte {side} is neither Buy (1) nor Sell (2)")
    return OrderResult(Side(side), account, _text(order_id, Reason.BAD_ORDER_ID, "order id"), _symbol(symbol), qty,
                       price, bid, offer, ts)


def frame(payload: bytes) -> bytes:
    return FRAME.pack(len(payload)) + payload


def iter_frames(buffer: bytes | memoryview) -> Iterator[tuple[int, bytes]]:
    """Yield (offset, payload) for each frame; a frame that runs past the end raises TRUNCATED_FRAME.

    A frame of length 0 is well delimited: it is yielded as an empty payload (which `decode`
    refuses as EMPTY) and the frames after it are still split.
    """
    view = memoryview(buffer)
    offset = 0
    end = len(view)
    while offset < end:
        if end - offset < FRAME_SIZE:
            raise FixishError(Reason.TRUNCATED_FRAME, f"{end - offset} bytes left, too few for a frame header", offset)
        (length,) = FRAME.unpack_from(view, offset)
        start = offset + FRAME_SIZE
        if start + length > end:
            raise FixishError(Reason.TRUNCATED_FRAME, f"frame of {length} bytes with {end - start} left", offset)
        yield offset, bytes(view[start:start + length])
        offset = start + length


def split_frames(buffer: bytes | memoryview) -> list[bytes]:
    return [payload for _, payload in iter_frames(buffer)]


def frame_all(payloads: Iterable[bytes]) -> bytes:
    return b"".join(frame(p) for p in payloads)
