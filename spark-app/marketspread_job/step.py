"""One key's share of one micro-batch, as a pure function: records in, output rows and new state out.

The stateful processor (processor.py) only moves data between Spark and this function, so
everything that decides a result is testable without a Spark session.

Within a micro-batch a key's records are applied in send order: Kafka timestamp (the sender's
intended send time), NBBO before orders on a tie, then partition and offset. Each record's
messages are decoded by the shared codec in bulk; whatever does not decode becomes a
dead-letter row, the rest goes through `QuoteBook.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from marketspread.fixish import SEQ_RECORD_SHIFT, decode_records, encode_order_results
from marketspread.fixish.layout import ORDER_RESULT
from marketspread.partitioning import symbol_key
from marketspread.quotes import QuoteBook

__all__ = ["StepConfig", "OUTPUT_COLUMNS", "KIND_REJECTION", "KIND_DEAD_LETTER", "KIND_STATS", "process_records",
           "sort_records"]

KIND_REJECTION = "rejection"
KIND_DEAD_LETTER = "dead-letter"
# One per key and batch, never written to Kafka: carries the message count to the job's metrics.
KIND_STATS = "stats"

OUTPUT_COLUMNS = ("kind", "key", "value", "count", "reason", "detail", "source_topic", "source_partition",
                  "source_offset", "byte_offset")


@dataclass(frozen=True)
class StepConfig:
    framed: bool
    nbbo_topic: str


def sort_records(records: pd.DataFrame, nbbo_topic: str) -> pd.DataFrame:
    """Send order: (timestamp, NBBO first on a tie, partition, offset)."""
    rank = (records["topic"] != nbbo_topic).astype(np.int8)
    order = np.lexsort((records["offset"].to_numpy(), records["partition"].to_numpy(), rank.to_numpy(),
                        records["timestamp"].to_numpy()))
    return records.iloc[order].reset_index(drop=True)


def process_records(book: QuoteBook, records: pd.DataFrame, config: StepConfig) -> tuple[pd.DataFrame, QuoteBook]:
    """`records` has columns key, value, topic, partition, offset, timestamp (ms), all of one key."""
    records = sort_records(records, config.nbbo_topic)
    decoded = decode_records(records["value"].tolist(), framed=config.framed)
    step = book.apply(decoded.nbbo, decoded.orders)

    rows: list[dict] = []
    if len(step.rejected):
        # The order's intended send time, in ns, is what the receiver measures latency against.
        timestamp_ns = records["timestamp"].to_numpy(np.int64)[step.rejected["seq"] >> SEQ_RECORD_SHIFT] * 1_000_000
        results = encode_order_results(step.rejected, step.bid, step.offer, timestamp_ns, framed=config.framed)
        if config.framed:
            key = records["key"].iloc[0]
            rows.append(_row(KIND_REJECTION, _key_bytes(key), results.tobytes(), len(results)))
        else:
            raw = results.tobytes()
            size = ORDER_RESULT.size
            for i, symbol in enumerate(step.rejected["symbol"]):
                rows.append(_row(KIND_REJECTION, symbol_key(symbol), raw[i * size:(i + 1) * size], 1))

    for failure in decoded.failures:
        source = records.iloc[failure.record]
        rows.append(_row(KIND_DEAD_LETTER, _key_bytes(source["key"]), failure.data, 1, reason=failure.reason.value,
                         detail=failure.detail, source_topic=source["topic"],
                         source_partition=int(source["partition"]), source_offset=int(source["offset"]),
                         byte_offset=failure.offset))

    rows.append(_row(KIND_STATS, None, None, decoded.message_count))
    return pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS)), step.book


def _key_bytes(key) -> bytes | None:
    if key is None or (isinstance(key, float) and np.isnan(key)):
        return None
    return key.encode() if isinstance(key, str) else bytes(key)


def _row(kind: str, key: bytes | None, value: bytes | None, count: int, *, reason: str | None = None,
         detail: str | None = None, source_topic: str | None = None, source_partition: int | None = None,
         source_offset: int | None = None, byte_offset: int | None = None) -> dict:
    return {"kind": kind, "key": key, "value": value, "count": count, "reason": reason, "detail": detail,
            "source_topic": source_topic, "source_partition": source_partition, "source_offset": source_offset,
            "byte_offset": byte_offset}
