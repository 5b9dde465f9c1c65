"""Which key, partition and state shard a message belongs to, for both record formats.

Every message of one symbol must meet the same state: in `message` format the key is the
symbol and Kafka's partitioner does the rest; in `framed` format the symbol's shard is the key
and picks the partition, identically on the NBBO and the orders topics.
"""

from __future__ import annotations

import numpy as np
from crc32c import crc32c

__all__ = ["shard_of", "shard_key", "symbol_key"]


def shard_of(symbols: np.ndarray, shards: int) -> np.ndarray:
    """Shard of each padded S4 symbol: crc32c(symbol) % shards, stable across processes and runs."""
    unique, inverse = np.unique(np.asarray(symbols, dtype="S4"), return_inverse=True)
    # Symbols are few (hundreds to thousands), messages many: hash each distinct symbol once.
    per_symbol = np.fromiter((crc32c(bytes(s).rjust(4, b" ")) % shards for s in unique), dtype=np.int64,
                             count=len(unique))
    return per_symbol[inverse]


def shard_key(shard: int) -> bytes:
    return b"shard-%d" % shard


def symbol_key(padded_symbol: bytes) -> bytes:
    return bytes(padded_symbol).lstrip(b" ")
