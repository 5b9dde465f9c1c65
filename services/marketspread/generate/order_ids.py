"""Order ids: 6 alphanumerics, random-looking, and never repeated within one order stream.

Wallaroo drew each of the 6 characters at random (`rand_alphanumeric(6)`), so its ids could
repeat: a million orders hold about nine repeats among 62**6 ids. The receiver dedupes
OrderResults by order id, so here the id of the stream's i-th order is a seeded permutation of
i written in Wallaroo's alphabet: unique for the first 62**6 (56.8 billion) orders by
construction, whatever the chunking, without remembering the ids already used.
"""

from __future__ import annotations

import numpy as np

from ..errors import MarketSpreadError
from ..fixish.layout import ORDER_ID_SIZE
from .mixing import KeyedPermutation

__all__ = ["ALPHABET", "ID_SPACE", "OrderIds"]

ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # Wallaroo's order
ID_SPACE = len(ALPHABET) ** ORDER_ID_SIZE
_ROUNDS = 4
_DIGITS = np.frombuffer(ALPHABET, dtype=np.uint8)


class OrderIds:
    """Order positions (0, 1, 2, ...) -> S6 ids; the permutation is drawn from `rng` once."""

    def __init__(self, rng: np.random.Generator):
        keys = rng.integers(0, 1 << 64, size=(_ROUNDS, 2), dtype=np.uint64)
        self._permutation = KeyedPermutation(ID_SPACE, keys)

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) and (positions.min() < 0 or positions.max() >= ID_SPACE):
            raise MarketSpreadError(f"an order stream has {ID_SPACE:,} distinct order ids; this one is used up")
        value = self._permutation(positions.astype(np.uint64))
        digits = np.empty((len(positions), ORDER_ID_SIZE), dtype=np.uint8)
        base = np.uint64(len(ALPHABET))
        for place in range(ORDER_ID_SIZE - 1, -1, -1):
            digits[:, place] = _DIGITS[value % base]
            value //= base
        return digits.view(f"S{ORDER_ID_SIZE}").reshape(-1)
