"""Hypothesis strategies for fixish messages, shared by the unit tests (not a test module)."""

from __future__ import annotations

import math
import struct

from hypothesis import strategies as st

from marketspread.fixish import Nbbo, Order, OrderResult, Reason, Side, encode

TIME = "20160902-15:47:52.000"
PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))

# 1-4 printable characters, no spaces: "F", "NI", "BF.B", "A.B", "~{|}".
symbols = st.text(alphabet=PRINTABLE.replace(" ", ""), min_size=1, max_size=4)
times = st.text(alphabet=PRINTABLE, min_size=21, max_size=21)
order_ids = st.text(alphabet=PRINTABLE, min_size=6, max_size=6)
# Every finite double: zeros of both signs, subnormals, the extremes.
prices = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
accounts = st.integers(0, 2**32 - 1)
sides = st.sampled_from(list(Side))


def nbbos(symbol=symbols, bid=prices, offer=prices):
    return st.builds(Nbbo, symbol, bid, offer, times)


def orders(symbol=symbols):
    return st.builds(Order, sides, accounts, order_ids, symbol, prices, prices, times)


def order_results():
    any_double = st.floats(allow_nan=False)
    return st.builds(OrderResult, sides, accounts, order_ids, symbols, prices, prices, any_double, any_double,
                     st.integers(0, 2**64 - 1))


# --- bad input: valid messages with one thing wrong, and the reason each must be refused with ---

GOOD_NBBO = encode(Nbbo("NI", 10.0, 10.01, TIME))
GOOD_ORDER = encode(Order(Side.BUY, 1, "abc123", "NI", 100.0, 10.0, TIME))


def patched(payload: bytes, offset: int, raw: bytes) -> bytes:
    return payload[:offset] + raw + payload[offset + len(raw):]


BAD_MESSAGES = {
    "empty": (b"", Reason.EMPTY),
    "nbbo one byte short": (GOOD_NBBO[:-1], Reason.BAD_LENGTH),
    "nbbo one byte long": (GOOD_NBBO + b"\x00", Reason.BAD_LENGTH),
    "order with nbbo length": (GOOD_ORDER[:42], Reason.BAD_LENGTH),
    "type byte only": (b"\x02", Reason.BAD_LENGTH),
    "type byte 0": (patched(GOOD_NBBO, 0, b"\x00"), Reason.UNKNOWN_TYPE),
    "type byte 3": (patched(GOOD_ORDER, 0, b"\x03"), Reason.UNKNOWN_TYPE),
    "side byte 0": (patched(GOOD_ORDER, 1, b"\x00"), Reason.BAD_SIDE),
    "side byte 3": (patched(GOOD_ORDER, 1, b"\x03"), Reason.BAD_SIDE),
    "nbbo non-ascii symbol": (patched(GOOD_NBBO, 1, b"  N\xc9"), Reason.BAD_SYMBOL),
    "order non-ascii symbol": (patched(GOOD_ORDER, 12, b"\xff\xffNI"), Reason.BAD_SYMBOL),
    "nbbo blank symbol": (patched(GOOD_NBBO, 1, b"    "), Reason.BAD_SYMBOL),
    "order blank symbol": (patched(GOOD_ORDER, 12, b"    "), Reason.BAD_SYMBOL),
    "nbbo right-padded symbol": (patched(GOOD_NBBO, 1, b"NI  "), Reason.BAD_SYMBOL),
    "order right-padded symbol": (patched(GOOD_ORDER, 12, b"NI  "), Reason.BAD_SYMBOL),
    "symbol padded with NUL": (patched(GOOD_NBBO, 1, b"\x00\x00NI"), Reason.BAD_SYMBOL),
    "nbbo NaN bid": (patched(GOOD_NBBO, 26, struct.pack(">d", math.nan)), Reason.BAD_NUMBER),
    "nbbo inf offer": (patched(GOOD_NBBO, 34, struct.pack(">d", math.inf)), Reason.BAD_NUMBER),
    "nbbo -inf bid": (patched(GOOD_NBBO, 26, struct.pack(">d", -math.inf)), Reason.BAD_NUMBER),
    "order NaN price": (patched(GOOD_ORDER, 24, struct.pack(">d", math.nan)), Reason.BAD_NUMBER),
    "order inf quantity": (patched(GOOD_ORDER, 16, struct.pack(">d", math.inf)), Reason.BAD_NUMBER),
    "nbbo non-ascii time": (patched(GOOD_NBBO, 5, b"\xe9"), Reason.BAD_TIME),
    "order control char in time": (patched(GOOD_ORDER, 52, b"\n"), Reason.BAD_TIME),
    "order non-ascii order id": (patched(GOOD_ORDER, 6, b"ab\xe7123"), Reason.BAD_ORDER_ID),
    "order NUL in order id": (patched(GOOD_ORDER, 11, b"\x00"), Reason.BAD_ORDER_ID),
}
