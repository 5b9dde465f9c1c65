"""transact_time: FIX UTC text `YYYYMMDD-HH:MM:SS.mmm` (21 bytes), for whole arrays at once.

Wallaroo's generator stamped every message of one generated second with that second
(`.000`). Here message `i` of a stream is stamped `start + floor(i * 1000 / rate)` ms: the same
clock at millisecond resolution, deterministic, and independent of how the stream is chunked.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from ..errors import MarketSpreadError
from ..fixish.layout import TIME_SIZE

__all__ = ["parse_start", "message_times", "fix_times"]

# numpy formats datetime64[ms] as "YYYY-MM-DDTHH:MM:SS.mmm"; these are the bytes FIX keeps.
_ISO_SIZE = 23
_FIX_FROM_ISO = np.r_[0:4, 5:7, 8:10, 10, 11:23]
_DASH = ord("-")
# Four-digit years only: anything else would not fit 21 bytes.
_FIRST_MS = int(datetime(1000, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
_LAST_MS = int(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone.utc).timestamp() * 1000)


def parse_start(text: str) -> int:
    """ISO 8601 (`2016-09-02T15:47:53Z`; no zone means UTC) -> ms since the epoch."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise MarketSpreadError(f"start time {text!r} is not ISO 8601, e.g. 2016-09-02T15:47:53Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    ms = round(when.timestamp() * 1000)
    if not _FIRST_MS <= ms <= _LAST_MS:
        raise MarketSpreadError(f"start time {text!r} is outside the years 1000-9999 that FIX text can hold")
    return ms


def message_times(start_ms: int, rate: int, first: int, count: int) -> np.ndarray:
    """ms since the epoch of messages first .. first+count-1 of a stream sent at `rate` per second."""
    positions = np.arange(first, first + count, dtype=np.int64)
    return start_ms + positions * 1000 // rate


def fix_times(ms: np.ndarray) -> np.ndarray:
    """ms since the epoch -> S21 array of FIX UTC text."""
    ms = np.asarray(ms, dtype=np.int64)
    if len(ms) and (ms.min() < _FIRST_MS or ms.max() > _LAST_MS):
        raise MarketSpreadError("transact_time beyond the year 9999: lower the message count or raise the rate")
    # A stream has many messages per ms: format each distinct ms once.
    distinct, inverse = np.unique(ms, return_inverse=True)
    iso = np.datetime_as_string(distinct.astype("datetime64[ms]"), unit="ms").astype(f"S{_ISO_SIZE}")
    text = iso.view(np.uint8).reshape(-1, _ISO_SIZE)[:, _FIX_FROM_ISO]
    text[:, 8] = _DASH
    return np.ascontiguousarray(text).view(f"S{TIME_SIZE}").reshape(-1)[inverse]
