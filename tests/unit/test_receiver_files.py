"""The receiver's output directory: appends, commit points, resuming the same group, starting afresh."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marketspread.fixish import OrderResult, Side, encode_order_result, frame, iter_frames
from marketspread.receiver.errors import ReceiverError
from marketspread.receiver.files import (
    DEAD_LETTER_INDEX,
    DEAD_LETTERS,
    MALFORMED,
    MALFORMED_INDEX,
    RECEIVE_TIMES,
    RESULTS,
    STATE,
    STATS,
    OutputFiles,
)

T = 1_700_000_000_000_000_000


def result(order_id: str) -> bytes:
    return frame(encode_order_result(OrderResult(Side.BUY, 1, order_id, "NI", 1.0, 2.0, 3.0, 4.0, T)))


def test_a_first_open_starts_empty_and_appends_what_it_is_given(tmp_path):
    files = OutputFiles(tmp_path / "out")
    assert files.open("g") is None
    files.append_results(result("AAAAAA") + result("BBBBBB"), np.array([T + 1, T + 2]))
    files.append_dead_letter(b"\x09junk", {"topic": "dl", "offset": 0, "headers": {"marketspread.reason": "x"}})
    files.append_dead_letter(b"", {"topic": "dl", "offset": 1, "headers": {}})
    files.append_malformed(b"nope", {"topic": "rej", "offset": 5, "reason": "bad-length"})
    files.commit_point("g", {("rej", 0): 6, ("dl", 0): 2})
    files.close()
    out = tmp_path / "out"
    assert (out / RESULTS).read_bytes() == result("AAAAAA") + result("BBBBBB")
    assert np.frombuffer((out / RECEIVE_TIMES).read_bytes(), ">u8").tolist() == [T + 1, T + 2]
    assert (out / DEAD_LETTERS).read_bytes() == b"\x00\x00\x00\x05\x09junk\x00\x00\x00\x00"
    index = [json.loads(line) for line in (out / DEAD_LETTER_INDEX).read_text().splitlines()]
    assert index == [
        {"topic": "dl", "offset": 0, "headers": {"marketspread.reason": "x"}, "file_offset": 4, "length": 5},
        {"topic": "dl", "offset": 1, "headers": {}, "file_offset": 13, "length": 0},
    ]
    assert [p for _, p in iter_frames((out / MALFORMED).read_bytes())] == [b"nope"]
    assert json.loads((out / MALFORMED_INDEX).read_text())["file_offset"] == 4
    state = json.loads((out / STATE).read_text())
    assert state["group_id"] == "g"
    assert state["offsets"] == {"dl": {"0": 2}, "rej": {"0": 6}}
    assert state["sizes"][RESULTS] == 2 * 59


def test_reopening_for_the_same_group_cuts_back_to_the_commit_point_and_restores_it(tmp_path):
    files = OutputFiles(tmp_path)
    files.open("g")
    files.append_results(result("AAAAAA"), np.array([T + 1]))
    files.append_dead_letter(b"x", {"headers": {"marketspread.reason": "empty"}})
    files.commit_point("g", {("rej", 1): 1})
    # Written but never committed (the process died here): must not survive the restart.
    files.append_results(result("BBBBBB"), np.array([T + 2]))
    files.append_malformed(b"?", {"reason": "empty"})
    files.close()

    again = OutputFiles(tmp_path)
    restored = again.open("g")
    assert restored.offsets == {("rej", 1): 1}
    assert restored.results == result("AAAAAA")
    assert restored.receive_ns.tolist() == [T + 1]
    assert restored.dead_letters == [{"headers": {"marketspread.reason": "empty"}, "file_offset": 4, "length": 1}]
    assert restored.malformed == []
    assert (tmp_path / RESULTS).read_bytes() == result("AAAAAA")
    assert (tmp_path / MALFORMED).read_bytes() == b""
    again.append_results(result("CCCCCC"), np.array([T + 3]))
    again.close()
    assert (tmp_path / RESULTS).read_bytes() == result("AAAAAA") + result("CCCCCC")


def test_another_group_is_a_new_run_and_starts_from_empty_files(tmp_path):
    files = OutputFiles(tmp_path)
    files.open("old")
    files.append_results(result("AAAAAA"), np.array([T]))
    files.commit_point("old", {("rej", 0): 1})
    files.write_stats({"received": 1})
    files.close()
    fresh = OutputFiles(tmp_path)
    assert fresh.open("new") is None
    fresh.close()
    assert (tmp_path / RESULTS).read_bytes() == b""
    assert not (tmp_path / STATE).exists()
    assert not (tmp_path / STATS).exists()


def test_a_file_shorter_than_its_commit_point_is_refused(tmp_path):
    files = OutputFiles(tmp_path)
    files.open("g")
    files.append_results(result("AAAAAA"), np.array([T]))
    files.commit_point("g", {})
    files.close()
    (tmp_path / RESULTS).write_bytes(b"")
    with pytest.raises(ReceiverError, match="rejections.msg has 0 bytes but its last commit point recorded 59"):
        OutputFiles(tmp_path).open("g")


def test_a_damaged_state_file_is_refused_with_what_to_do(tmp_path):
    (tmp_path / STATE).write_text("{not json")
    with pytest.raises(ReceiverError, match="receiver-state.json is damaged .* remove it to start afresh"):
        OutputFiles(tmp_path).open("g")


def test_stats_are_replaced_whole(tmp_path):
    files = OutputFiles(tmp_path)
    files.open("g")
    files.write_stats({"received": 1})
    files.write_stats({"received": 2})
    files.close()
    assert json.loads((tmp_path / STATS).read_text()) == {"received": 2}
    assert not (tmp_path / (STATS + ".tmp")).exists()
