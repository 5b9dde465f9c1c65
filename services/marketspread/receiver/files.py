"""The receiver's output directory: what it received, byte for byte, and where it stopped.

| file | content |
|---|---|
| rejections.msg | the OrderResults received, framed (4-byte big-endian length + 55 bytes), duplicates included |
| rejections.receive-ns | for each of them, the receive time: u64 big-endian epoch nanoseconds |
| dead-letters.msg | each dead letter's value, framed (a zero length frame for an empty value) |
| dead-letters.jsonl | one JSON line per dead letter: source record, headers, where its bytes are in the .msg |
| malformed.msg, malformed.jsonl | the same for records on the rejections topic that are not OrderResults |
| receiver-state.json | group id, offsets and file sizes of the last commit point |
| stats.json | counts, latency percentiles, dead letters, offsets (rewritten periodically) |

A commit point is written after the data (flushed to the OS, which is enough to survive the
process being killed) and before the Kafka offset commit. A restart with the same group id
cuts the files back to the commit point and resumes from its offsets, so a record is in the
files exactly once whether the receiver died before, during or after a commit. A different
group id is a new run: the files start empty.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..fixish import FRAME_SIZE
from ..fixish.layout import FRAME
from .errors import ReceiverError

__all__ = ["OutputFiles", "Restored", "RESULTS", "RECEIVE_TIMES", "DEAD_LETTERS", "DEAD_LETTER_INDEX",
           "MALFORMED", "MALFORMED_INDEX", "STATE", "STATS"]

RESULTS = "rejections.msg"
RECEIVE_TIMES = "rejections.receive-ns"
DEAD_LETTERS = "dead-letters.msg"
DEAD_LETTER_INDEX = "dead-letters.jsonl"
MALFORMED = "malformed.msg"
MALFORMED_INDEX = "malformed.jsonl"
STATE = "receiver-state.json"
STATS = "stats.json"
_DATA_FILES = (RESULTS, RECEIVE_TIMES, DEAD_LETTERS, DEAD_LETTER_INDEX, MALFORMED, MALFORMED_INDEX)
RECEIVE_TIME_DTYPE = np.dtype(">u8")


@dataclass(frozen=True)
class Restored:
    """What a previous receiver of the same group wrote up to its last commit point."""

    offsets: dict[tuple[str, int], int]
    results: bytes
    receive_ns: np.ndarray
    dead_letters: list[dict]
    malformed: list[dict]


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class OutputFiles:
    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self._handles: dict[str, object] = {}
        self._sizes: dict[str, int] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    # -- opening: resume or start afresh ---------------------------------------------------

    def open(self, group_id: str) -> Restored | None:
        """Open for appending; return what to restore when resuming the same group's output."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            state = self._read_state()
            resume = state is not None and state.get("group_id") == group_id
            sizes = state["sizes"] if resume else {name: 0 for name in _DATA_FILES}
            for name in _DATA_FILES:
                self._cut(name, int(sizes.get(name, 0)))
            if not resume:
                self.path(STATS).unlink(missing_ok=True)
                self.path(STATE).unlink(missing_ok=True)
            self._handles = {name: open(self.path(name), "ab") for name in _DATA_FILES}
        except OSError as error:
            raise ReceiverError(f"cannot write to {self.dir}: {error.strerror or error}") from None
        if not resume:
            return None
        return Restored(
            offsets={(topic, int(partition)): offset
                     for topic, partitions in state["offsets"].items() for partition, offset in partitions.items()},
            results=self.path(RESULTS).read_bytes(),
            receive_ns=np.frombuffer(self.path(RECEIVE_TIMES).read_bytes(), dtype=RECEIVE_TIME_DTYPE),
            dead_letters=self._read_index(DEAD_LETTER_INDEX),
            malformed=self._read_index(MALFORMED_INDEX),
        )

    def _read_state(self) -> dict | None:
        try:
            return json.loads(self.path(STATE).read_text())
        except FileNotFoundError:
            return None
        except ValueError as error:
            raise ReceiverError(f"{self.path(STATE)} is damaged ({error}); remove it to start afresh") from None

    def _cut(self, name: str, size: int) -> None:
        path = self.path(name)
        actual = path.stat().st_size if path.exists() else 0
        if actual < size:
            raise ReceiverError(f"{path} has {actual} bytes but its last commit point recorded {size}; "
                                f"the output was changed behind the receiver's back")
        with open(path, "ab") as handle:
            handle.truncate(size)
        self._sizes[name] = size

    def _read_index(self, name: str) -> list[dict]:
        return [json.loads(line) for line in self.path(name).read_text().splitlines() if line]

    # -- appending -------------------------------------------------------------------------

    def _append(self, name: str, data: bytes) -> int:
        """Append; return the offset the data starts at."""
        offset = self._sizes[name]
        self._handles[name].write(data)
        self._sizes[name] = offset + len(data)
        return offset

    def append_results(self, framed_results: bytes, receive_ns: np.ndarray) -> None:
        self._append(RESULTS, framed_results)
        self._append(RECEIVE_TIMES, np.asarray(receive_ns, dtype=RECEIVE_TIME_DTYPE).tobytes())

    def _append_kept(self, data_name: str, index_name: str, value: bytes, entry: dict) -> None:
        offset = self._append(data_name, FRAME.pack(len(value)) + value)
        line = dict(entry, file_offset=offset + FRAME_SIZE, length=len(value))
        self._append(index_name, (json.dumps(line, sort_keys=True) + "\n").encode())

    def append_dead_letter(self, value: bytes, entry: dict) -> None:
        self._append_kept(DEAD_LETTERS, DEAD_LETTER_INDEX, value, entry)

    def append_malformed(self, value: bytes, entry: dict) -> None:
        self._append_kept(MALFORMED, MALFORMED_INDEX, value, entry)

    # -- commit points and stats -----------------------------------------------------------

    def commit_point(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Flush the data, then record (atomically) the offsets and sizes it corresponds to."""
        try:
            for handle in self._handles.values():
                handle.flush()
            by_topic: dict[str, dict[str, int]] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                by_topic.setdefault(topic, {})[str(partition)] = offset
            _write_atomically(self.path(STATE), json.dumps(
                {"group_id": group_id, "offsets": by_topic, "sizes": dict(self._sizes)}, indent=1, sort_keys=True))
        except OSError as error:
            raise ReceiverError(f"cannot write to {self.dir}: {error.strerror or error}") from None

    def write_stats(self, stats: dict) -> None:
        try:
            _write_atomically(self.path(STATS), json.dumps(stats, indent=2) + "\n")
        except OSError as error:
            raise ReceiverError(f"cannot write {self.path(STATS)}: {error.strerror or error}") from None

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles = {}
