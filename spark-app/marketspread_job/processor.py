"""The two ways this job can keep a key's quote book in Spark state; the logic lives in step.py.

The state of one key (a shard of symbols, see query.state_key) is its `QuoteBook`: the symbols
and, per symbol, the verdict of its latest NBBO and that NBBO's bid and offer. Either operator
reads it once and writes it once per key and micro-batch, and hands the rows to the same
`process_records`; they differ only in how the state reaches Python (settings.state_operator):

- `applyInPandasWithState` (the default): the state travels with the key's rows in the Arrow
  stream, and lives in Spark's default HDFS-backed store (executor memory, a delta file per
  batch in the checkpoint). The book is one binary field (`QuoteBook.to_bytes`): pyspark 4.3's
  worker cannot read back a state schema with array fields.
- `transformWithStateInPandas`: a ValueState of four arrays, fetched and stored through the
  JVM's state server, on RocksDB (which it requires). Its micro-batches are slower, most of all
  on busy cores (docs/benchmarks.md); kept for checkpoints written by earlier versions of the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructField, StructType,
)

from marketspread.quotes import QuoteBook

from .step import StepConfig, process_records

__all__ = ["MarketSpreadProcessor", "market_spread_with_group_state", "STATE_SCHEMA", "GROUP_STATE_SCHEMA",
           "OUTPUT_SCHEMA", "book_from_state", "book_to_state"]

# transformWithStateInPandas: the book column-wise.
STATE_SCHEMA = StructType([
    StructField("symbols", ArrayType(StringType(), False), False),
    StructField("should_reject", ArrayType(BooleanType(), False), False),
    StructField("bid", ArrayType(DoubleType(), False), False),
    StructField("offer", ArrayType(DoubleType(), False), False),
])

# applyInPandasWithState: the book as QuoteBook.to_bytes.
GROUP_STATE_SCHEMA = StructType([StructField("quote_book", BinaryType(), False)])

OUTPUT_SCHEMA = StructType([
    StructField("kind", StringType(), False),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("count", LongType(), False),
    StructField("reason", StringType(), True),
    StructField("detail", StringType(), True),
    StructField("source_topic", StringType(), True),
    StructField("source_partition", IntegerType(), True),
    StructField("source_offset", LongType(), True),
    StructField("byte_offset", IntegerType(), True),
])

_NULLABLE_INTS = {"count": "int64", "source_partition": "Int32", "source_offset": "Int64", "byte_offset": "Int32"}


def book_from_state(state) -> QuoteBook:
    symbols, should_reject, bid, offer = state
    return QuoteBook(np.array([s.encode("ascii") for s in symbols], dtype="S4"), np.asarray(should_reject, bool),
                     np.asarray(bid, np.float64), np.asarray(offer, np.float64))


def book_to_state(book: QuoteBook) -> tuple:
    return ([s.decode("ascii") for s in book.symbols], book.should_reject.tolist(), book.bid.tolist(),
            book.offer.tolist())


def _step(book: QuoteBook, rows: Iterator[pd.DataFrame], config: StepConfig) -> tuple[pd.DataFrame, QuoteBook]:
    output, book = process_records(book, pd.concat(list(rows), ignore_index=True), config)
    return output.astype(_NULLABLE_INTS), book


def market_spread_with_group_state(config: StepConfig) -> Callable:
    """The function `applyInPandasWithState` calls once per key and micro-batch."""

    def apply(key, rows: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        book = QuoteBook.from_bytes(state.get[0]) if state.exists else QuoteBook.empty()
        output, book = _step(book, rows, config)
        state.update((book.to_bytes(),))
        yield output

    return apply


class MarketSpreadProcessor(StatefulProcessor):
    def __init__(self, config: StepConfig):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.book = handle.getValueState("quote_book", STATE_SCHEMA)

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:
        state = self.book.get()  # None for a new key: one round trip instead of exists() + get()
        output, book = _step(book_from_state(state) if state is not None else QuoteBook.empty(), rows, self.config)
        self.book.update(book_to_state(book))
        yield output

    def close(self) -> None:
        pass
