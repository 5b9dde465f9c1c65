"""What the sender sends: a framed fixish file, validated whole before anything goes out, or generated data.

A source hands out blocks of Wallaroo-framed wire records (numpy arrays of the layout's
`framed_dtype`), so every later step (keys, shards, record values) works on whole arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from ..fixish import NBBO, ORDER, MessageType, decode_records, iter_frames
from ..fixish.layout import Layout
from .errors import InputFileError

__all__ = ["STREAM_KINDS", "Source", "FileSource", "ChunkSource", "load_file", "layout_of"]

# Which message kind each stream carries (the topic table of docs/architecture.md).
STREAM_KINDS: dict[str, MessageType] = {"nbbo": MessageType.NBBO, "orders": MessageType.ORDER}
_LAYOUTS = {MessageType.NBBO: NBBO, MessageType.ORDER: ORDER}


def layout_of(kind: MessageType) -> Layout:
    return _LAYOUTS[kind]


class Source(Protocol):
    kind: MessageType
    description: str

    def take(self, n: int) -> np.ndarray:
        """Up to `n` framed wire records; an empty array once the source is exhausted."""


def _join(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    # dtype= is essential: concatenate would otherwise convert the big-endian wire fields to
    # native byte order, and the bytes sent would no longer be fixish.
    return np.concatenate(parts, dtype=dtype)


def _first_wrong_kind(data: bytes, kind: MessageType) -> tuple[int, int]:
    """Byte offset and type byte of the first message that is not `kind` (error path only)."""
    for offset, payload in iter_frames(data):
        if payload[0] != kind:
            return offset, payload[0]
    raise AssertionError("no message of the wrong kind")  # pragma: no cover - caller checked


def load_file(path: str | Path, kind: MessageType) -> np.ndarray:
    """Read and validate a whole framed fixish file of `kind` messages; InputFileError says where it is not."""
    path = Path(path)
    layout = layout_of(kind)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputFileError(f"cannot read {path}: {error.strerror or error}") from None
    if not data:
        raise InputFileError(f"{path} is empty: expected framed fixish {layout.name} messages")
    # The shared bulk decoder validates every message; the sender must never put bytes on a
    # topic that the job would dead-letter, so one bad byte rejects the file.
    decoded = decode_records([data], framed=True)
    if decoded.failures:
        first = decoded.failures[0]
        more = f" ({len(decoded.failures) - 1} more problems after it)" if len(decoded.failures) > 1 else ""
        raise InputFileError(f"{path} is not a framed fixish file: at byte {first.offset}: "
                             f"{first.reason.value}: {first.detail}{more}")
    wrong = decoded.orders if kind is MessageType.NBBO else decoded.nbbo
    if len(wrong):
        offset, type_byte = _first_wrong_kind(data, kind)
        raise InputFileError(f"{path} holds {len(wrong)} {MessageType(type_byte).name} messages, first at byte "
                             f"{offset}, but this stream sends only {layout.name} messages")
    # Valid and of one kind: the file is exactly an array of fixed-size framed records.
    return np.frombuffer(data, dtype=layout.framed_dtype)


class FileSource:
    """A validated file, read once into memory, optionally looped."""

    def __init__(self, wire: np.ndarray, kind: MessageType, loop: bool = False, description: str = "array"):
        if wire.dtype != layout_of(kind).framed_dtype:
            raise TypeError(f"expected {layout_of(kind).name} framed records, got {wire.dtype}")
        self.wire = wire
        self.kind = kind
        self.loop = loop and len(wire) > 0
        self.description = description
        self._position = 0

    @classmethod
    def open(cls, path: str | Path, kind: MessageType, loop: bool = False) -> FileSource:
        wire = load_file(path, kind)
        return cls(wire, kind, loop, description=f"{path} ({len(wire):,} {layout_of(kind).name})")

    def __len__(self) -> int:
        return len(self.wire)

    def take(self, n: int) -> np.ndarray:
        size = len(self.wire)
        if not self.loop:
            chunk = self.wire[self._position:self._position + n]
            self._position += len(chunk)
            return chunk
        parts = []
        while n:
            if self._position == size:
                self._position = 0
            part = self.wire[self._position:self._position + n]
            self._position += len(part)
            n -= len(part)
            parts.append(part)
        return parts[0] if len(parts) == 1 else _join(parts, self.wire.dtype)


class ChunkSource:
    """Generated data: an endless (or finite) iterator of wire arrays, re-cut to the sizes asked for."""

    def __init__(self, chunks: Iterator[np.ndarray] | Callable[[], Iterator[np.ndarray]], kind: MessageType,
                 description: str):
        self._chunks = chunks() if callable(chunks) else chunks
        self.kind = kind
        self.description = description
        self._pending: np.ndarray | None = None
        self._dtype = layout_of(kind).framed_dtype

    def take(self, n: int) -> np.ndarray:
        parts, have = [], 0
        while have < n:
            if self._pending is None or not len(self._pending):
                self._pending = next(self._chunks, None)
                if self._pending is None:
                    break
                if self._pending.dtype != self._dtype:
                    raise TypeError(f"generator gave {self._pending.dtype}, expected {self._dtype}")
            part, self._pending = self._pending[:n - have], self._pending[n - have:]
            parts.append(part)
            have += len(part)
        if not parts:
            return np.empty(0, self._dtype)
        return parts[0] if len(parts) == 1 else _join(parts, self._dtype)
