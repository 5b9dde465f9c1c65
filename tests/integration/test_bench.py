"""`marketspread bench`: a short real run of each system at a low rate, on the test session's broker.

Each run is the real thing: the senders, the system under test (the Spark job or a peer) and
the receiver (or the passthrough's probe) as child processes on real topics. The assertions are
about what the run wrote and its correctness (nothing lost at a low rate, every expected result
received with a positive latency, the PNG drawn), never about how fast anything was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marketspread.bench.report import REQUIRED_KEYS
from marketspread.cli import main

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def bench(out: Path, broker, *args: str) -> tuple[int, dict]:
    code = main(["bench", "--bootstrap-servers", broker.bootstrap_servers, "--out", str(out), "--no-progress",
                 "--reject-ratio", "0.01", *args])
    return code, json.loads((out / "bench.json").read_text())


@pytest.mark.parametrize("system, record_format", [
    ("passthrough", "framed"), ("passthrough", "message"), ("plain", "framed"), ("plain", "message"), ("plain-bulk", "framed"),
    ("quix", "framed"), ("quix", "message"), pytest.param("spark", "framed", marks=pytest.mark.spark),
])
def test_a_short_bench_at_a_low_rate_loses_nothing_and_reports_everything(tmp_path, kafka_broker, wallaroo_data,
                                                                          system, record_format):
    out = tmp_path / "bench"
    code, doc = bench(out, kafka_broker, "--system", system, "--record-format", record_format, "--rate", "2000",
                      "--duration", "10")

    assert code == 0
    assert set(REQUIRED_KEYS) <= doc.keys() and tuple(doc)[:len(REQUIRED_KEYS)] == REQUIRED_KEYS
    assert doc["system"] == system and doc["record_format"] == record_format and doc["rate"] == 2000
    assert doc["generator"]["sent"] == {"nbbo": 10_000, "orders": 10_000}
    assert doc["drained"] and doc["lost"] == 0
    assert doc["expected"] > 0 and doc["received"] == doc["expected"]
    assert doc["unexpected"] == 0 and doc["quote_mismatches"] == 0
    # Every result is timed; the headline percentiles leave out the warm-up quarter of the load.
    everything, lat = doc["latency_ms_including_warmup"], doc["latency_ms"]
    assert everything["count"] == doc["received"]
    assert 0 < lat["count"] < everything["count"]
    for figures in (lat, everything):
        assert 0 < figures["p50"] <= figures["p90"] <= figures["p99"] <= figures["p999"] <= figures["max"]
    assert lat["max"] <= everything["max"]
    assert doc["sustained_msgs_per_s"] > 0 and doc["offered_msgs_per_s"] > 0
    assert isinstance(doc["lag_growing"], bool)
    assert sum(count for _, count in doc["latency_histogram_ms"]) == everything["count"]
    assert doc["resources"][system]["cpu_seconds"] > 0 and doc["resources"][system]["peak_rss_mb"] > 0
    assert doc["resources"]["senders"]["cpu_seconds"] > 0 and "broker" in doc["resources"]
    assert doc["machine"]["cores"] >= 1 and doc["versions"]["kafka-python"]
    assert doc["command"].startswith("marketspread bench")
    assert (out / "bench.png").read_bytes()[:8] == PNG_SIGNATURE


def test_find_max_reports_every_step_and_the_best_one(tmp_path, kafka_broker, wallaroo_data):
    out = tmp_path / "search"
    code, doc = bench(out, kafka_broker, "--system", "passthrough", "--find-max", "--rate", "1000",
                      "--max-steps", "2", "--step-duration", "6")

    assert code == 0
    steps = doc["find_max"]["steps"]
    assert [s["rate"] for s in steps][:1] == [1000] and len(steps) == 2
    assert all(Path(s["dir"], "bench.json").exists() and Path(s["dir"], "bench.png").exists() for s in steps)
    best = doc["find_max"]["max_sustainable_rate"]
    assert doc["rate"] == best
    if best is not None:
        assert best in [s["rate"] for s in steps if s["sustainable"]]
    assert (out / "bench.png").read_bytes()[:8] == PNG_SIGNATURE
