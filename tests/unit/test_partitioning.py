"""A symbol's shard: crc32c of the space-padded symbol, modulo the shard count, whoever asks and when."""

from __future__ import annotations

import numpy as np
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from marketspread.partitioning import ShardTable, shard_of

SYMBOLS = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ.", min_size=1, max_size=4).map(lambda s: s.rjust(4).encode())


def by_definition(symbols: list[bytes], shards: int) -> list[int]:
    return [crc32c(symbol.rjust(4, b" ")) % shards for symbol in symbols]


@given(batches=st.lists(st.lists(SYMBOLS, max_size=50), min_size=1, max_size=6), shards=st.integers(1, 16))
def test_a_table_gives_every_batch_the_shards_of_the_definition_as_it_meets_new_symbols(batches, shards):
    table = ShardTable(shards)
    for batch in batches:
        assert table(np.array(batch, dtype="S4")).tolist() == by_definition(batch, shards)


def test_a_field_of_wire_records_is_read_in_place_of_a_copy_and_short_symbols_keep_their_padding():
    wire = np.zeros(4, dtype=[("length", ">u4"), ("symbol", "S4"), ("price", ">f8")])
    wire["symbol"] = [b"   F", b"AAPL", b" BRK", b"   F"]
    assert shard_of(wire["symbol"], 7).tolist() == by_definition([b"   F", b"AAPL", b" BRK", b"   F"], 7)


def test_an_empty_batch_has_no_shards():
    assert ShardTable(2)(np.array([], dtype="S4")).tolist() == []
