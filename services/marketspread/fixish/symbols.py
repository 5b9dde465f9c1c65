"""Symbols on the wire are ASCII, left-padded with spaces to four bytes ("  NI", " TGT", "BF.B")."""

from __future__ import annotations

import numpy as np

from .errors import FixishError, Reason
from .layout import SYMBOL_SIZE

__all__ = ["pad_symbol", "unpad_symbol", "valid_symbols", "rows_all"]

_SPACE = 0x20
_PRINTABLE_LAST = 0x7E


def pad_symbol(symbol: str) -> bytes:
    """`"NI"` -> `b"  NI"`; raises FixishError for anything that cannot travel as a symbol."""
    try:
        raw = symbol.encode("ascii") if isinstance(symbol, str) else bytes(symbol)
    except UnicodeEncodeError:
        raise FixishError(Reason.BAD_SYMBOL, f"{symbol!r} is not ASCII") from None
    padded = raw.rjust(SYMBOL_SIZE, b" ")
    if len(padded) != SYMBOL_SIZE or not valid_symbols(np.frombuffer(padded, dtype=f"S{SYMBOL_SIZE}"))[0]:
        raise FixishError(Reason.BAD_SYMBOL, f"{symbol!r} is not 1-4 printable ASCII characters")
    return padded


def unpad_symbol(padded: bytes) -> str:
    return padded.decode("ascii").lstrip(" ")


def rows_all(ok: np.ndarray) -> np.ndarray:
    """`ok.all(axis=1)` of a 2-D bool array, fast when every row holds (the normal case).

    A reduction along a short second axis costs numpy several times a flat one; the flat
    check settles the common case, and only input with a bad row pays for the per-row answer.
    """
    if ok.all():
        return np.ones(len(ok), dtype=bool)
    return ok.all(axis=1)


def valid_symbols(symbols: np.ndarray) -> np.ndarray:
    """Vectorised check of an `S4` array: printable ASCII, left padding only, not blank."""
    raw = np.frombuffer(symbols.tobytes(), dtype=np.uint8).reshape(-1, SYMBOL_SIZE)
    is_space = raw == _SPACE
    # Once a non-space byte is seen, no space may follow: padding is on the left only.
    left_padded = np.diff(is_space.astype(np.int8), axis=1) <= 0
    return rows_all((raw >= _SPACE) & (raw <= _PRINTABLE_LAST)) & rows_all(left_padded) & ~is_space[:, -1]
