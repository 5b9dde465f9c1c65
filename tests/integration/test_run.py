"""`marketspread run`: the real broker, job, receiver and senders, checked from the outside.

Each run starts the services as child processes, exactly as a user's run does; the test then
reads what the run wrote (rejections.msg, summary.json) and compares it with its own
expectation from the reference model.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marketspread.cli import main
from marketspread.fixish import Nbbo, Order, Side, encode, frame, frame_all
from marketspread.generate import generate_nbbo, generate_orders, load_symbol_set
from marketspread.reference import expected_rejections
from marketspread.run.summary import read_results

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]


def _run(tmp_path: Path, topics, *extra: str) -> tuple[int, dict]:
    args = ["run", "--bootstrap-servers", topics.bootstrap_servers, "--nbbo-topic", topics.nbbo_topic,
            "--orders-topic", topics.orders_topic, "--rejections-topic", topics.rejections_topic,
            "--dead-letter-topic", topics.dead_letter_topic, "--out", str(tmp_path / "out"), "--no-progress", *extra]
    code = main(args)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return code, summary


def _edge_case_files(tmp_path: Path) -> tuple[Path, Path, Path, list, list, list]:
    """Inputs no test data file has: boundaries, flips, crossed and empty markets, odd symbols."""
    initial = [Nbbo("A", 10.0, 10.01), Nbbo("BF.B", 30.0, 30.02), Nbbo("XYZW", 1.0, 1.0)]
    nbbo = [
        Nbbo("A", 10.0, 10.05),      # spread 0.05 in doubles is 0.0500000000000007: rejects
        Nbbo("LOW", 0.50, 0.53),     # ratio alone: 0.03 / 0.515 > 0.05
        Nbbo("CRS", 5.10, 5.00),     # crossed: never rejects
        Nbbo("ZER", 0.0, 0.0),       # 0/0 is NaN: does not reject
        Nbbo("BF.B", 30.0, 30.10),   # flips to rejecting ...
        Nbbo("BF.B", 30.0, 30.01),   # ... and back
        Nbbo("XYZW", 2.0, 3.0),
    ]
    orders = [
        Order(Side.BUY, 1, "ORD001", "A", 100.0, 10.02),
        Order(Side.SELL, 2, "ORD002", "LOW", 10.0, 0.51),
        Order(Side.BUY, 3, "ORD003", "CRS", 20.0, 5.05),
        Order(Side.BUY, 4, "ORD004", "ZER", 30.0, 0.0),
        Order(Side.SELL, 5, "ORD005", "BF.B", 40.0, 30.0),
        Order(Side.BUY, 6, "ORD006", "NEVR", 50.0, 1.0),  # never quoted: rejected at 0.0 / 0.0
        Order(Side.SELL, 7, "ORD007", "XYZW", 60.0, 2.5),
    ]
    paths = []
    for name, messages in (("initial", initial), ("nbbo", nbbo), ("orders", orders)):
        path = tmp_path / f"{name}.msg"
        path.write_bytes(frame_all(encode(m) for m in messages))
        paths.append(path)
    return *paths, initial, nbbo, orders


def test_a_sequential_run_on_unseen_inputs_gives_exactly_the_reference_rejections_with_their_quotes(
        tmp_path, kafka_topics, wallaroo_data):
    topics = kafka_topics()
    initial_path, nbbo_path, orders_path, initial, nbbo, orders = _edge_case_files(tmp_path)
    # Plus a generated stream on the 350 symbols, with a seed no other test uses.
    symbol_set = load_symbol_set("350", wallaroo_data)
    rng = np.random.default_rng(20261122)
    generated_nbbo = generate_nbbo(symbol_set, 3_000, rng).tobytes()
    generated_orders = generate_orders(symbol_set, 3_000, rng, reject_ratio=0.01).tobytes()
    initial_path.write_bytes(symbol_set.initial + initial_path.read_bytes())
    nbbo_path.write_bytes(generated_nbbo + nbbo_path.read_bytes())
    orders_path.write_bytes(generated_orders + orders_path.read_bytes())

    code, summary = _run(tmp_path, topics, "--initial-nbbo", str(initial_path), "--nbbo", str(nbbo_path),
                         "--orders", str(orders_path), "--sequential", "--rate", "20000")

    from marketspread.fixish import decode, split_frames
    expected = expected_rejections(*([decode(p) for p in split_frames(path.read_bytes())]
                                     for path in (initial_path, nbbo_path, orders_path)))
    received = read_results(tmp_path / "out" / "rejections.msg")
    assert code == 0
    assert sorted(r.identity() for r in received) == sorted(r.identity() for r in expected)
    by_id = {r.order_id: r for r in received}
    assert (by_id["ORD001"].bid, by_id["ORD001"].offer) == (10.0, 10.05)
    assert (by_id["ORD002"].bid, by_id["ORD002"].offer) == (0.50, 0.53)
    assert (by_id["ORD006"].bid, by_id["ORD006"].offer) == (0.0, 0.0)
    assert (by_id["ORD007"].bid, by_id["ORD007"].offer) == (2.0, 3.0)
    assert not {"ORD003", "ORD004", "ORD005"} & by_id.keys()
    assert summary["correct"] and summary["missing"] == 0 and summary["unexpected"] == 0
    assert summary["quote_mismatches"] == 0 and summary["quotes_compared_strictly"]
    assert summary["sent"] == {"initial_nbbo": 353, "nbbo": 3_007, "orders": 3_007, "total": 6_367}
    assert summary["rejections_expected"] == len(expected)


@pytest.mark.parametrize("record_format", ["message", "framed"])
def test_a_concurrent_run_of_generated_streams_is_correct_in_either_record_format(
        tmp_path, kafka_topics, wallaroo_data, record_format):
    topics = kafka_topics(partitions=2)
    data = tmp_path / "data"
    assert main(["generate", "--symbols", "350", "--nbbo", "20000", "--orders", "20000", "--seed", "11",
                 "--reject-ratio", "0.002", "--out", str(data)]) == 0

    code, summary = _run(tmp_path, topics, "--initial-nbbo", str(data / "initial-nbbo.msg"),
                         "--nbbo", str(data / "nbbo.msg"), "--orders", str(data / "orders.msg"),
                         "--rate", "10000", "--batch-size", "500", "--record-format", record_format)

    assert code == 0
    assert summary["record_format"] == record_format
    assert summary["rejections_expected"] > 0
    assert summary["missing"] == 0 and summary["unexpected"] == 0
    assert summary["rejections_unique"] == summary["rejections_expected"]
    assert summary["latency_ms"]["count"] == summary["rejections_unique"]
    assert 0 < summary["latency_ms"]["p50"] <= summary["latency_ms"]["max"]


def test_a_file_that_is_not_fixish_stops_the_run_before_anything_starts(tmp_path, capsys, kafka_topics):
    topics = kafka_topics()
    good = tmp_path / "good.msg"
    good.write_bytes(frame(encode(Nbbo("A", 1.0, 1.01))))
    bad = tmp_path / "orders.msg"
    bad.write_bytes(frame(encode(Order(Side.BUY, 1, "ORD001", "A", 1.0, 1.0)))[:-5])

    code = main(["run", "--bootstrap-servers", topics.bootstrap_servers, "--orders-topic", topics.orders_topic,
                 "--initial-nbbo", str(good), "--nbbo", str(good), "--orders", str(bad),
                 "--out", str(tmp_path / "out")])

    error = capsys.readouterr().err
    assert code == 2
    assert f"{bad} is not a framed fixish file: truncated-frame at byte 0" in error
    assert not (tmp_path / "out").exists()


def test_a_port_taken_by_something_that_is_not_kafka_is_a_clear_error(tmp_path, capsys):
    good = tmp_path / "good.msg"
    good.write_bytes(frame(encode(Nbbo("A", 1.0, 1.01))))
    orders = tmp_path / "orders.msg"
    orders.write_bytes(frame(encode(Order(Side.BUY, 1, "ORD001", "A", 1.0, 1.0))))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        code = main(["run", "--bootstrap-servers", f"127.0.0.1:{port}", "--kafka-port", str(port),
                     "--initial-nbbo", str(good), "--nbbo", str(good), "--orders", str(orders),
                     "--out", str(tmp_path / "out")])

    assert code == 2
    assert f"something listens on 127.0.0.1:{port} but it is not a Kafka broker" in capsys.readouterr().err


def test_kafka_start_without_java_says_java_is_missing(tmp_path):
    result = subprocess.run([sys.executable, "-m", "marketspread", "kafka", "start", "--java", "no-such-java",
                             "--run-dir", str(tmp_path)], capture_output=True, text=True)

    assert result.returncode == 2
    assert "'no-such-java' not found: Kafka needs Java 17 or newer on the PATH" in result.stderr
