"""Why a byte string is not fixish. The reason codes travel with dead letters and label metrics."""

from __future__ import annotations

from enum import Enum

__all__ = ["Reason", "FixishError"]


class Reason(str, Enum):
    EMPTY = "empty"
    TRUNCATED_FRAME = "truncated-frame"
    BAD_LENGTH = "bad-length"
    UNKNOWN_TYPE = "unknown-type"
    BAD_SIDE = "bad-side"
    BAD_SYMBOL = "bad-symbol"
    BAD_ORDER_ID = "bad-order-id"
    BAD_TIME = "bad-time"
    BAD_NUMBER = "bad-number"


class FixishError(ValueError):
    """A message that cannot be decoded; `reason` is one of `Reason`, `offset` the byte it starts at."""

    def __init__(self, reason: Reason, detail: str, offset: int = 0):
        super().__init__(f"{reason.value}: {detail}" + (f" (at byte {offset})" if offset else ""))
        self.reason = reason
        self.detail = detail
        self.offset = offset
