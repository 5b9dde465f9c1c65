"""`SymbolSet`: the instruments a run trades, each one's reference price, and which ones reject."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fixish.symbols import valid_symbols
from .defaults import INSTRUMENTS_SKEW_PERCENT

__all__ = ["SymbolSet"]


@dataclass(frozen=True, eq=False)
class SymbolSet:
    """Columns of equal length, in the order of the set's initial-NBBO file.

    `rejected` marks the instruments whose quotes always reject (their orders are the run's
    expected output); every other instrument's quotes never do. Orders carry `prices` as their
    price, as Wallaroo's generator did. `initial` holds the framed initial-NBBO file of a
    Wallaroo set; synthetic sets have none and `initial_nbbo` computes theirs.
    """

    name: str
    symbols: np.ndarray  # S4, left-padded with spaces, unique
    prices: np.ndarray  # float64
    rejected: np.ndarray  # bool
    source: str  # where the prices come from, for people reading a summary
    initial: bytes | None = None

    def __post_init__(self) -> None:
        symbols = np.array(self.symbols, dtype="S4")  # copies: the columns are frozen below
        prices = np.array(self.prices, dtype=np.float64)
        rejected = np.array(self.rejected, dtype=bool)
        if not len(symbols) == len(prices) == len(rejected):
            raise ValueError("symbols, prices and rejected must have one entry per instrument")
        if not valid_symbols(symbols).all() or len(np.unique(symbols)) != len(symbols):
            raise ValueError(f"symbol set {self.name}: symbols must be unique, padded, printable ASCII")
        if not np.isfinite(prices).all():
            raise ValueError(f"symbol set {self.name}: prices must be finite")
        # An order stream needs somewhere to send both kinds of order.
        if rejected.all() or not rejected.any():
            raise ValueError(f"symbol set {self.name}: needs rejecting and non-rejecting instruments")
        for name, column in (("symbols", symbols), ("prices", prices), ("rejected", rejected)):
            column.flags.writeable = False
            object.__setattr__(self, name, column)

    def __len__(self) -> int:
        return len(self.symbols)

    def __repr__(self) -> str:
        return f"SymbolSet({self.describe()})"

    @property
    def rejected_index(self) -> np.ndarray:
        return np.flatnonzero(self.rejected)

    @property
    def nonrejected_index(self) -> np.ndarray:
        return np.flatnonzero(~self.rejected)

    @property
    def rejecting_symbols(self) -> np.ndarray:
        return self.symbols[self.rejected]

    @property
    def hot_count(self) -> int:
        """How many non-rejected instruments (the first ones) get the skewed share of orders."""
        # Integer arithmetic as in Wallaroo (335 non-rejected -> 67); at least one.
        return max(1, int((~self.rejected).sum()) * INSTRUMENTS_SKEW_PERCENT // 100)

    def describe(self) -> str:
        return (f"{self.name}: {len(self)} symbols, {int(self.rejected.sum())} rejecting, "
                f"prices from {self.source}")
