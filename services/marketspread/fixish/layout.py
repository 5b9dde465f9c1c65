"""The fixish byte layout: the one place it is written down.

Wallaroo's Market Spread messages (lib/wallaroo_labs/new_fix/fixish_messages.pony), all
numbers big-endian, each message optionally framed by a 4-byte big-endian payload length.
Both the struct formats (one message at a time) and the numpy dtypes (whole buffers at once)
are derived from the same field tables below, so the two can never disagree.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import numpy as np

__all__ = [
    "FRAME",
    "FRAME_SIZE",
    "MessageType",
    "Side",
    "SYMBOL_SIZE",
    "TIME_SIZE",
    "ORDER_ID_SIZE",
    "NBBO_FIELDS",
    "ORDER_FIELDS",
    "ORDER_RESULT_FIELDS",
    "NBBO",
    "ORDER",
    "ORDER_RESULT",
    "Layout",
]


class MessageType(IntEnum):
    ORDER = 1
    NBBO = 2


class Side(IntEnum):
    BUY = 1
    SELL = 2


SYMBOL_SIZE = 4
TIME_SIZE = 21
ORDER_ID_SIZE = 6

FRAME = struct.Struct(">I")
FRAME_SIZE = FRAME.size

# (name, struct code, numpy dtype); order is wire order.
NBBO_FIELDS = (
    ("type", "B", "u1"),
    ("symbol", f"{SYMBOL_SIZE}s", f"S{SYMBOL_SIZE}"),
    ("transact_time", f"{TIME_SIZE}s", f"S{TIME_SIZE}"),
    ("bid_px", "d", ">f8"),
    ("offer_px", "d", ">f8"),
)
ORDER_FIELDS = (
    ("type", "B", "u1"),
    ("side", "B", "u1"),
    ("account", "I", ">u4"),
    ("order_id", f"{ORDER_ID_SIZE}s", f"S{ORDER_ID_SIZE}"),
    ("symbol", f"{SYMBOL_SIZE}s", f"S{SYMBOL_SIZE}"),
    ("order_qty", "d", ">f8"),
    ("price", "d", ">f8"),
    ("transact_time", f"{TIME_SIZE}s", f"S{TIME_SIZE}"),
)
# The OrderResult has no type byte: it only ever travels on the rejections topic.
ORDER_RESULT_FIELDS = (
    ("side", "B", "u1"),
    ("account", "I", ">u4"),
    ("order_id", f"{ORDER_ID_SIZE}s", f"S{ORDER_ID_SIZE}"),
    ("symbol", f"{SYMBOL_SIZE}s", f"S{SYMBOL_SIZE}"),
    ("order_qty", "d", ">f8"),
    ("price", "d", ">f8"),
    ("bid", "d", ">f8"),
    ("offer", "d", ">f8"),
    ("timestamp", "Q", ">u8"),
)


class Layout:
    """One message kind: its struct for single messages and its dtypes for buffers."""

    def __init__(self, name: str, fields: tuple[tuple[str, str, str], ...]):
        self.name = name
        self.fields = tuple(f[0] for f in fields)
        self.struct = struct.Struct(">" + "".join(f[1] for f in fields))
        self.size = self.struct.size
        self.framed_size = FRAME_SIZE + self.size
        # numpy packs structured dtypes without padding, exactly like the wire.
        self.dtype = np.dtype([(f[0], f[2]) for f in fields])
        self.framed_dtype = np.dtype([("frame_length", ">u4")] + [(f[0], f[2]) for f in fields])
        assert self.dtype.itemsize == self.size, name
        assert self.framed_dtype.itemsize == self.framed_size, name

    def __repr__(self) -> str:
        return f"Layout({self.name}, {self.size} bytes)"


NBBO = Layout("NBBO", NBBO_FIELDS)  # 42 bytes, 46 framed
ORDER = Layout("Order", ORDER_FIELDS)  # 53 bytes, 57 framed
ORDER_RESULT = Layout("OrderResult", ORDER_RESULT_FIELDS)  # 55 bytes, 59 framed
