"""The stateful processor: per key, the quote book in a ValueState; the logic lives in step.py.

The state of one key (a shard of symbols, see query.state_key) is its `QuoteBook` stored
column-wise: the symbols and, per symbol, the verdict of its latest NBBO and
that NBBO's bid and offer. One read and one write of the state per key and micro-batch.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructField, StructType,
)

from marketspread.quotes import QuoteBook

from .step import StepConfig, process_records

__all__ = ["MarketSpreadProcessor", "STATE_SCHEMA", "OUTPUT_SCHEMA", "book_from_state", "book_to_state"]

STATE_SCHEMA = StructType([
    StructField("symbols", ArrayType(StringType(), False), False),
    StructField("should_reject", ArrayType(BooleanType(), False), False),
    StructField("bid", ArrayType(DoubleType(), False), False),
    StructField("offer", ArrayType(DoubleType(), False), False),
])

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


class MarketSpreadProcessor(StatefulProcessor):
    def __init__(self, config: StepConfig):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.book = handle.getValueState("quote_book", STATE_SCHEMA)

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:
        records = pd.concat(list(rows), ignore_index=True)
        state = self.book.get()  # None for a new key: one round trip instead of exists() + get()
        book = book_from_state(state) if state is not None else QuoteBook.empty()
        output, book = process_records(book, records, self.config)
        self.book.update(book_to_state(book))
        yield output.astype(_NULLABLE_INTS)

    def close(self) -> None:
        pass
