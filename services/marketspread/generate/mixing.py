"""Counter-based randomness in plain integer arithmetic: values that depend only on an index.

Two uses. Synthetic symbol sets must come out the same on every machine and every numpy
release, so they are built from `splitmix64` (fixed arithmetic) rather than from a numpy
`Generator`, whose streams numpy does not promise to keep. Order ids must never repeat
within a stream however it is chunked, so they are a keyed permutation of the order's
position (`KeyedPermutation`), unique by construction with no memory of ids already used.

numpy's uint64 arithmetic wraps modulo 2**64, which is exactly what both need.
"""

from __future__ import annotations

import numpy as np

__all__ = ["splitmix64", "unit_floats", "KeyedPermutation"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Sebastiano Vigna's SplitMix64 output function of each element of `x` (uint64 in, uint64 out)."""
    # At least 1-d: numpy warns about wrap-around in scalar arithmetic, never in array arithmetic.
    z = np.array(x, dtype=np.uint64, ndmin=1) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def unit_floats(stream: int, index: np.ndarray) -> np.ndarray:
    """Uniform doubles in [0, 1), one per index, independent across `stream`s."""
    key = splitmix64(np.array([stream % (1 << 64)], dtype=np.uint64))
    bits = splitmix64(np.array(index, dtype=np.uint64, ndmin=1) ^ key)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


class KeyedPermutation:
    """A bijection of [0, size) chosen by `keys`: distinct inputs always give distinct outputs.

    Rounds of `x -> x * odd + k (mod 2**bits)` and `x -> x ^ (x >> shift)` permute the
    smallest power-of-two domain that holds `size`; cycle-walking (apply again while the result
    is >= size) restricts that bijection to [0, size) and stays a bijection.
    """

    def __init__(self, size: int, keys: np.ndarray):
        if size < 2:
            raise ValueError("a permutation needs at least two values")
        self.size = int(size)
        self.bits = (self.size - 1).bit_length()
        self._mask = np.uint64((1 << self.bits) - 1)
        self._shift = np.uint64(max(1, self.bits // 2))
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1, 2)
        # An odd multiplier is invertible modulo a power of two.
        self._rounds = [(np.uint64(int(m) | 1), np.uint64(int(a))) for m, a in keys]

    def _mix(self, x: np.ndarray) -> np.ndarray:
        for multiplier, addend in self._rounds:
            x = (x * multiplier + addend) & self._mask
            x ^= x >> self._shift
        return x

    def __call__(self, values: np.ndarray) -> np.ndarray:
        x = np.array(values, dtype=np.uint64, ndmin=1)
        if len(x) and int(x.max()) >= self.size:
            raise ValueError(f"values must be below {self.size}")
        out = self._mix(x)
        limit = np.uint64(self.size)
        outside = np.flatnonzero(out >= limit)
        # Each pass keeps about size / 2**bits >= 1/2 of the rest inside, so few passes are needed.
        while len(outside):
            out[outside] = self._mix(out[outside])
            outside = outside[out[outside] >= limit]
        return out
