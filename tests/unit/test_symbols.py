"""Symbols on the wire: 1-4 printable ASCII characters, left-padded with spaces to exactly 4 bytes.

`pad_symbol` turns "NI" into b"  NI" and refuses anything that cannot travel as a symbol;
`unpad_symbol` undoes it; `valid_symbols` is the vectorised check the bulk decoder uses, and it
must agree with the byte-by-byte definition on every 4-byte string.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.fixish import FixishError, Reason, pad_symbol, unpad_symbol, valid_symbols

PRINTABLE_NO_SPACE = "".join(chr(c) for c in range(0x21, 0x7F))
symbols = st.text(alphabet=PRINTABLE_NO_SPACE, min_size=1, max_size=4)


def is_valid_symbol(raw: bytes) -> bool:
    """The definition, written out: printable ASCII, spaces only on the left, not all spaces."""
    if len(raw) != 4 or not all(0x20 <= b <= 0x7E for b in raw):
        return False
    stripped = raw.lstrip(b" ")
    return len(stripped) > 0 and b" " not in stripped


@pytest.mark.parametrize(("symbol", "padded"), [
    ("NI", b"  NI"), ("TGT", b" TGT"), ("BF.B", b"BF.B"), ("F", b"   F"), ("GOOG", b"GOOG"), ("B.A", b" B.A"),
])
def test_pad_symbol_left_pads_with_spaces_to_four_bytes(symbol, padded):
    assert pad_symbol(symbol) == padded
    assert unpad_symbol(padded) == symbol


@settings(deadline=None)
@given(symbols)
def test_padding_then_unpadding_gives_the_symbol_back(symbol):
    padded = pad_symbol(symbol)
    assert len(padded) == 4
    assert padded.endswith(symbol.encode("ascii"))
    assert unpad_symbol(padded) == symbol


@pytest.mark.parametrize("symbol", [
    "",          # blank
    "    ",      # blank once padded
    "ABCDE",     # too long
    "AB ",       # right-padded
    "A B",       # a space inside
    "É",         # not ASCII
    "AÉ",        # not ASCII, two characters
    "A\tB",      # a control character
    "AB\x00",    # NUL
    "\x7f",      # DEL
])
def test_pad_symbol_refuses_what_cannot_travel_as_a_symbol(symbol):
    with pytest.raises(FixishError) as raised:
        pad_symbol(symbol)
    assert raised.value.reason is Reason.BAD_SYMBOL


def test_pad_symbol_accepts_already_padded_bytes():
    assert pad_symbol(b"  NI") == b"  NI"
    assert pad_symbol(b"NI") == b"  NI"


@pytest.mark.parametrize(("raw", "valid"), [
    (b"  NI", True), (b"BF.B", True), (b"   F", True),
    (b"    ", False),        # blank
    (b"NI  ", False),        # right-padded
    (b" N I", False),        # space inside
    (b"  N\x00", False),     # NUL
    (b"\x00\x00NI", False),  # NUL padding instead of spaces
    (b"  N\xc3", False),     # not ASCII
    (b"  N\x7f", False),     # DEL
])
def test_valid_symbols_checks_each_four_byte_symbol(raw, valid):
    assert valid_symbols(np.array([raw], dtype="S4")).tolist() == [valid]
    assert is_valid_symbol(raw) is valid


@settings(deadline=None)
@given(st.lists(st.binary(min_size=4, max_size=4) | symbols.map(lambda s: s.encode().rjust(4)), max_size=50))
def test_the_vectorised_check_agrees_with_the_definition_on_any_bytes(raws):
    array = np.frombuffer(b"".join(raws), dtype="S4") if raws else np.empty(0, "S4")
    assert valid_symbols(array).tolist() == [is_valid_symbol(r) for r in raws]
