"""Made-up symbol sets, `synthetic:N`, for machines (such as Kubernetes pods) without Wallaroo's files.

The same shape as Wallaroo's sets: the first instruments reject, in Wallaroo's proportion
(15 of 350, at least one), the rest never do. Symbols are 1 to 4 capital letters, left-padded
like Wallaroo's; prices are log-uniform between 1.00 and 500.00, in cents, so that no quote of a
non-rejected instrument rejects on the ratio alone. Everything depends on N and on fixed
integer arithmetic (`mixing`) only: every machine, seed and numpy release gets the same set,
and `synthetic:N` is a prefix of `synthetic:M` for N < M (except that more of its first
instruments reject in the larger set).
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketSpreadError
from .defaults import SYNTHETIC_PREFIX
from .mixing import unit_floats
from .symbolset import SymbolSet

__all__ = ["MAX_SYNTHETIC", "PRICE_STREAM", "parse_synthetic", "synthetic_symbol_set"]

_LETTERS = 26
_SYMBOL_SIZE = 4
# Every string of 1 to 4 capital letters.
MAX_SYNTHETIC = sum(_LETTERS ** length for length in range(1, _SYMBOL_SIZE + 1))  # 475,254
# i -> (i * _STEP + _OFFSET) % MAX_SYNTHETIC visits every symbol once (_STEP is prime to 2*3**3*13*677)
# and scatters neighbours across the alphabet.
_STEP = 104_729
# Codes 0-25 are the 1-letter symbols, 26-701 the 2-letter ones, and so on.
_FIRST_CODE = np.cumsum([0] + [_LETTERS ** length for length in range(1, _SYMBOL_SIZE)])
_OFFSET = 271_828
# Wallaroo's sets: 15 rejecting instruments of 350.
_REJECTED_SHARE = 15 / 350
_MIN_PRICE, _MAX_PRICE = 1.0, 500.0

PRICE_STREAM = 0x5052_4943_45  # "PRICE": streams of `mixing.unit_floats` are just distinct numbers


def parse_synthetic(name: str) -> int | None:
    """`"synthetic:N"` -> N; None if the name is not a synthetic one; an error if N is unusable."""
    if not name.startswith(SYNTHETIC_PREFIX):
        return None
    count = name[len(SYNTHETIC_PREFIX):]
    if not count.isdigit() or not 2 <= int(count) <= MAX_SYNTHETIC:
        raise MarketSpreadError(f"symbol set {name!r}: N in synthetic:N must be a whole number from 2 to "
                                f"{MAX_SYNTHETIC:,}")
    return int(count)


def _symbols(count: int) -> np.ndarray:
    code = (np.arange(count, dtype=np.int64) * _STEP + _OFFSET) % MAX_SYNTHETIC
    length = np.searchsorted(_FIRST_CODE, code, side="right")
    # Rank among the symbols of its length, written below in base 26 from the right.
    value = code - _FIRST_CODE[length - 1]
    raw = np.full((count, _SYMBOL_SIZE), ord(" "), dtype=np.uint8)
    for place in range(_SYMBOL_SIZE):
        used = length > place
        raw[used, _SYMBOL_SIZE - 1 - place] = ord("A") + value[used] % _LETTERS
        value //= _LETTERS
    return raw.view(f"S{_SYMBOL_SIZE}").reshape(-1)


def synthetic_symbol_set(count: int) -> SymbolSet:
    if not 2 <= count <= MAX_SYNTHETIC:
        raise MarketSpreadError(f"a synthetic symbol set has 2 to {MAX_SYNTHETIC:,} symbols, not {count}")
    u = unit_floats(PRICE_STREAM, np.arange(count))
    prices = np.round(_MIN_PRICE * (_MAX_PRICE / _MIN_PRICE) ** u, 2)
    rejecting = min(count - 1, max(1, round(count * _REJECTED_SHARE)))
    rejected = np.arange(count) < rejecting
    return SymbolSet(f"{SYNTHETIC_PREFIX}{count}", _symbols(count), prices, rejected,
                     source="synthetic prices, log-uniform 1.00-500.00")
