"""Rejection records -> OrderResults, in either record format; anything else is malformed, never a crash.

`message`: each record value is one unframed OrderResult. `framed`: each value is a run of
framed OrderResults (what the job writes per input key and micro-batch). A record is taken
whole or not at all: if any part of it is not an OrderResult, the whole value is kept as
malformed, with the reason of its first bad message from the shared codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..fixish import ORDER_RESULT, FixishError, Reason, decode_order_result, decode_order_results, encode_order_results
from ..fixish.layout import Side
from ..fixish.symbols import valid_symbols

__all__ = ["Malformed", "DecodedResults", "decode_rejections"]

_FRAMED = ORDER_RESULT.framed_dtype


@dataclass(frozen=True, slots=True)
class Malformed:
    index: int  # position of the record in the values given
    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class DecodedResults:
    """Valid OrderResults as framed wire records (ready to append to rejections.msg), and the rest."""

    results: np.ndarray
    record_of: np.ndarray  # for each result, the index of the record it came from
    malformed: list[Malformed]


def _printable(column: np.ndarray) -> np.ndarray:
    raw = np.frombuffer(np.ascontiguousarray(column).tobytes(), dtype=np.uint8).reshape(len(column), -1)
    return ((raw >= 0x20) & (raw <= 0x7E)).all(axis=1)


def _valid(wire: np.ndarray) -> np.ndarray:
    """What decode_order_result accepts, for a whole array at once."""
    return (((wire["side"] == Side.BUY) | (wire["side"] == Side.SELL))
            & _printable(wire["order_id"]) & valid_symbols(wire["symbol"]))


def _reason(payloads: list[bytes]) -> tuple[Reason, str]:
    """The precise codec's verdict on the first bad payload of a record."""
    for payload in payloads:
        try:
            decode_order_result(payload)
        except FixishError as error:
            return error.reason, error.detail
    return Reason.BAD_LENGTH, "not an OrderResult"  # pragma: no cover - the vector check and codec agree


def _framed_payloads(wire: np.ndarray) -> list[bytes]:
    size = wire.dtype.itemsize
    raw = wire.tobytes()
    return [raw[o + 4:o + size] for o in range(0, len(raw), size)]


def decode_rejections(values: Sequence[bytes | None], framed: bool) -> DecodedResults:
    parts: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    malformed: list[Malformed] = []
    if framed:
        for index, value in enumerate(values):
            if not value:
                malformed.append(Malformed(index, Reason.EMPTY, "empty record"))
                continue
            try:
                wire = decode_order_results(value, framed=True)
            except FixishError as error:
                malformed.append(Malformed(index, error.reason, error.detail))
                continue
            if not _valid(wire).all():
                malformed.append(Malformed(index, *_reason(_framed_payloads(wire))))
                continue
            parts.append(wire)
            owners.append(np.full(len(wire), index, dtype=np.int64))
    else:
        good = []
        for index, value in enumerate(values):
            if not value:
                malformed.append(Malformed(index, Reason.EMPTY, "empty record"))
            elif len(value) != ORDER_RESULT.size:
                malformed.append(Malformed(index, Reason.BAD_LENGTH,
                                           f"OrderResult of {len(value)} bytes, expected {ORDER_RESULT.size}"))
            else:
                good.append(index)
        if good:
            wire = np.frombuffer(b"".join(values[i] for i in good), dtype=ORDER_RESULT.dtype)
            ok = _valid(wire)
            for i in np.flatnonzero(~ok).tolist():
                malformed.append(Malformed(good[i], *_reason([values[good[i]]])))
            wire = wire[ok]
            parts.append(encode_order_results(wire, wire["bid"], wire["offer"], wire["timestamp"], framed=True))
            owners.append(np.asarray(good, dtype=np.int64)[ok])
        malformed.sort(key=lambda m: m.index)
    if not parts:
        return DecodedResults(np.empty(0, _FRAMED), np.empty(0, np.int64), malformed)
    # dtype= keeps the big-endian wire layout (concatenate alone would switch to native order).
    return DecodedResults(np.concatenate(parts, dtype=_FRAMED), np.concatenate(owners), malformed)
