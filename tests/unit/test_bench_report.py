"""What the bench writes: bench.json's keys, the printed summary, docs/benchmarks.md's generated section."""

from __future__ import annotations

import io
import json

import pytest

from marketspread.bench.progress import ProgressLine, bar, human
from marketspread.bench.report import REQUIRED_KEYS, document, render_search, render_step, search_summary
from marketspread.bench.runner import failed_result
from marketspread.bench.settings import SYSTEMS, BenchSettings
from marketspread.bench.suite import BEGIN, END, Suite, drain_r3k_ratio, plan_for, render_markdown, update_page
from marketspread.errors import MarketSpreadError


def result(system="spark", rate=100_000.0, sustainable=True, p50=420.0, **overrides) -> dict:
    r = failed_result(system, "framed", "350", rate, 30.0, 0.01, "x")
    r.update(offered_msgs_per_s=rate, sustained_msgs_per_s=rate * 0.99, lost=0, expected=12, received=12,
             drained=True, drain_seconds=1.5, lag_growing=not sustainable,
             latency_ms={"count": 12, "p50": p50, "p90": p50 * 1.5, "p99": p50 * 2, "p999": p50 * 2.1,
                         "max": p50 * 2.2},
             lag={"at_end_of_load_messages": 10, "max_messages": 2_000, "messages_per_record": 60.0,
                  "trend": {"relative_slope": 0.001}},
             resources={system: {"cpu_seconds": 30.0, "cpu_percent": 100.0, "peak_rss_mb": 1500.0}},
             verdict={"sustainable": sustainable, "reason": "sustained" if sustainable else "lag kept growing",
                      "limit": None}, dir=f"out/{system}")
    r.update(overrides)
    return r


def test_bench_json_leads_with_the_required_keys_and_records_its_context():
    doc = document(result(), load={"min": 1.0, "mean": 2.0, "max": 3.0}, wall_seconds=12.3,
                   command="marketspread bench --system spark")
    assert tuple(doc)[:len(REQUIRED_KEYS)] == REQUIRED_KEYS
    assert set(doc["latency_ms"]) >= {"p50", "p90", "p99", "p999", "max"}
    assert doc["command"] == "marketspread bench --system spark" and doc["wall_seconds"] == 12.3
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["load_average_during_run"]["max"] == 3.0
    assert "pyspark" in doc["versions"] and "quixstreams" in doc["versions"]
    json.dumps(doc)  # serialisable as is


def test_the_summary_says_what_was_measured_and_the_verdict():
    text = render_step(result())
    assert "spark, framed records, 350 symbols, 100,000 msgs/s for 30 s" in text
    assert "sustained 99,000 msgs/s of 100,000 offered" in text and "not growing" in text
    assert "p50 420.0 ms" in text and "p999 882.0 ms" in text
    assert "lost 0 of 12 expected" in text and "drained in 1.5 s" in text
    assert "spark 100 % CPU, 1,500 MB" in text and "SUSTAINED: sustained" in text
    failed = render_step(failed_result("quix", "message", "r3k", 5_000, 10, 0.01, "quix exited with code 1"))
    assert "NOT SUSTAINED: failed: quix exited with code 1" in failed and "lost - of - expected" in failed


def test_a_search_summary_lists_every_step_and_the_bound():
    steps = [result(rate=100_000), result(rate=200_000, sustainable=False, p50=5_000.0)]
    doc = {"system": "spark", "record_format": "framed", "symbols": "350",
           "find_max": search_summary(steps, 100_000, "precision")}
    text = render_search(doc)
    assert "100,000 msgs/s  ok" in text and "200,000 msgs/s  FAIL" in text and "lag kept growing" in text
    assert "max sustainable: 100,000 msgs/s (bounded by precision)" in text
    none = render_search({**doc, "find_max": search_summary(steps[1:], None, "nothing sustainable")})
    assert "max sustainable: none found" in none


def suite() -> dict:
    entries = []

    def add(kind, system, fmt, symbols, r, **extra):
        from marketspread.bench.suite import _entry

        entries.append(_entry(kind, system, fmt, symbols, r, **extra))

    for system, best, p50 in (("spark", 400_000, 700.0), ("passthrough", 800_000, 20.0), ("plain", 200_000, 15.0),
                              ("quix", 80_000, 1_100.0)):
        add("max", system, "framed", "350", result(system, best), max_sustainable_rate=best, bounded_by="precision")
        add("latency", system, "framed", "350", result(system, 20_000, p50=p50))
        add("latency", system, "message", "350", result(system, 5_000, p50=p50 / 2,
                                                        sustainable=system != "quix"))
    add("target", "spark", "framed", "350", result("spark", 250_000, p50=900.0))
    add("max", "spark", "framed", "r3k", result("spark", 380_000), max_sustainable_rate=380_000,
        bounded_by="step budget")
    return {"command": "marketspread bench --all", "date": "2026-11-22T03:00:00+00:00", "wall_seconds": 1800.0,
            "quick": False, "plan": plan_for(False).__dict__,
            "machine": {"cores": 2, "cpu_model": "Intel(R) Xeon(R) Processor", "memory_gib": 23.4,
                        "load_average_during_run": {"min": 2.1, "mean": 3.0, "max": 4.2}},
            "versions": {"kafka-broker": "4.3.1", "pyspark": "4.3.0", "quixstreams": "3.28.1",
                         "kafka-python": "3.0.12", "confluent-kafka": "2.12.2", "python": "3.11.7"},
            "entries": entries,
            "drains": [{"symbols": s, "messages": 6_000_000, "batch_size": 3_600, "msgs_per_s": r}
                       for s, r in (("350", 500_000), ("r3k", 430_000), ("350", 520_000), ("r3k", 440_000))]}


def test_the_generated_page_has_ratios_to_spark_machine_date_and_commands():
    text = render_markdown(suite())
    assert text.startswith(BEGIN) and text.endswith(END)
    assert "## Latest run: 2026-11-22" in text and "`marketspread bench --all`" in text
    assert "2 cores (Intel(R) Xeon(R) Processor), 23.4 GiB" in text and "2.1–4.2 (mean 3.0)" in text
    assert "| spark | 400,000 | 1.00× | precision | 200,000 |" in text
    assert "| passthrough | 800,000 | 2.00× |" in text and "| quix | 80,000 | 0.20× |" in text
    assert "| quix | 1,100 / 2,200 / 2,310 | 1.57× | 550 / 1,100 / 1,155 (not sustained) | 1.57× |" in text
    assert "r3k (2,926 symbols) max sustainable: 380,000 msgs/s, 0.95× of the 350-symbol figure" in text
    assert "350 500,000 msgs/s, r3k 430,000 msgs/s, 350 520,000 msgs/s, r3k 440,000 msgs/s): r3k at 85 % of 350" in text
    assert "`marketspread bench-drain --messages 3000000 --symbols r3k --batch-size 3600`" in text
    assert "at 250,000 msgs/s (framed): sustained, p50 900 ms, p99 1,800 ms, lost 0" in text
    assert text.count("\n| max |") == 5 and "`out/quix`" in text
    assert "| > 187,000 msgs/s per core (Wallaroo) | 200,000 per core | yes |" in text
    assert "| at 250,000 msgs/s: p50 ≤ 300 ms | p50 900 ms | **no** |" in text
    assert "| max sustainable ≥ 5× Quix Streams' | 5.0× | yes |" in text
    assert "| max sustainable ≥ 5× the plain Python consumer's | 2.0× | **no** |" in text
    # Judged by the drains in turn (435,000 / 510,000), not by the two searches minutes apart (95 %).
    assert ("| r3k at ≥ 90 % of the 350-symbol throughput | 85 % draining in turn (max sustainable, two searches "
            "minutes apart: 95 %) | **no** |") in text


def test_the_r3k_ratio_is_mean_over_mean_of_the_drains_and_absent_without_both_sets():
    drains = [{"symbols": "350", "msgs_per_s": 400}, {"symbols": "r3k", "msgs_per_s": 380},
              {"symbols": "350", "msgs_per_s": 600}, {"symbols": "r3k", "msgs_per_s": 520}]
    assert drain_r3k_ratio(drains) == pytest.approx(0.9)
    assert drain_r3k_ratio(drains[::2]) is None and drain_r3k_ratio([]) is None


def test_a_drain_that_raises_is_recorded_and_the_other_drains_still_run(monkeypatch, tmp_path):
    """The drains come after half an hour of measurements: one that fails must not lose the others.

    `drain` is replaced by a stand-in here: this is the suite's bookkeeping, the real drain (a broker,
    senders and the job) is what `marketspread bench-drain` runs.
    """
    asked = []

    def drain(messages, symbols, batch_size):
        asked.append(symbols)
        if len(asked) == 2:
            raise MarketSpreadError("the job did not become ready within 600 s")
        return {"symbols": symbols, "messages": 2 * messages, "batch_size": batch_size, "msgs_per_s": 500_000}

    monkeypatch.setattr("marketspread.bench.drain.drain", drain)
    suite = Suite(BenchSettings(all=True, out=str(tmp_path), progress=False), "marketspread bench --all")
    drains = suite._drains()
    assert asked == ["350", "r3k"] * suite.plan.drain_pairs
    failed = drains[1]
    assert failed["symbols"] == "r3k" and failed["msgs_per_s"] is None
    assert failed["error"] == "MarketSpreadError: the job did not become ready within 600 s"
    assert failed["messages"] == 2 * suite.plan.drain_messages and failed["batch_size"] == suite.plan.drain_batch_size
    assert [d["msgs_per_s"] for d in drains[2:]] == [500_000] * (len(drains) - 2)


def test_a_failed_drain_is_shown_on_the_page_and_left_out_of_the_ratio():
    page = suite()
    page["drains"][1] = {"symbols": "r3k", "messages": 6_000_000, "batch_size": 3_600, "msgs_per_s": None,
                         "error": "MarketSpreadError: the job did not become ready within 600 s"}
    text = render_markdown(page)
    assert ("350 500,000 msgs/s, r3k failed (MarketSpreadError: the job did not become ready within 600 s), "
            "350 520,000 msgs/s, r3k 440,000 msgs/s): r3k at 86 % of 350") in text
    page["drains"][3] = {**page["drains"][1]}
    text = render_markdown(page)
    assert "): r3k at - of 350" in text
    assert ("| r3k at ≥ 90 % of the 350-symbol throughput | - (max sustainable, two searches minutes apart: 95 %) "
            "| - |") in text


def test_updating_the_page_replaces_only_the_generated_section(tmp_path):
    page = tmp_path / "benchmarks.md"
    update_page(page, f"{BEGIN}\nfirst\n{END}")
    created = page.read_text()
    assert created.startswith("# Benchmarks") and "first" in created
    page.write_text(created.replace("# Benchmarks", "# Benchmarks\n\nThe lead's notes.") + "\n## Changes\nkept\n")
    update_page(page, f"{BEGIN}\nsecond\n{END}")
    text = page.read_text()
    assert "second" in text and "first" not in text and "The lead's notes." in text and "## Changes\nkept" in text
    assert text.count(BEGIN) == 1


@pytest.mark.parametrize("quick", [False, True])
def test_the_plans_fit_their_time_budget(quick):
    plan = plan_for(quick)
    # Steps of the searches and the latency runs, each with ~12 s of overhead: every system's search,
    # Spark's r3k search and its two warm-up steps (350 and r3k); every system's latency at the two
    # equal rates (framed, message) and Spark's at the target rate.
    steps = (len(SYSTEMS) * plan.max_steps + plan.r3k_steps + 2) * (plan.step_duration + 12)
    latency = (2 * len(SYSTEMS) + 1) * (plan.latency_duration + 12)
    # Each drain: generating the data (~1 s per 100,000 messages), a broker and a job to start (~40 s).
    drains = 2 * plan.drain_pairs * (40 + 2 * plan.drain_messages / 100_000 + 2 * plan.drain_messages / 400_000)
    assert (steps + latency + drains) / 60 <= (18 if quick else 45)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_redraws_one_line_on_a_terminal_and_logs_sparsely_otherwise():
    assert bar(0.5, 10) == "[#####.....]" and bar(2.0, 4) == "[####]" and bar(-1, 4) == "[....]"
    assert human(1_234_567) == "1.23M" and human(45_678) == "45.7k" and human(12) == "12" and human(None) == "-"
    tty = Terminal()
    line = ProgressLine(enabled=True, stream=tty)
    line.show("[spark framed]", 0.25, "load sent 1k")
    line.show("[spark framed]", 0.5, "load sent 2k")
    line.message("  spark ok")
    out = tty.getvalue()
    assert out.count("\r") == 2 and "\033[K" in out and "[######..................]" in out
    assert out.endswith("\n  spark ok\n")
    plain = io.StringIO()
    logged = ProgressLine(enabled=True, stream=plain)
    for _ in range(5):
        logged.show("[quix]", 0.1, "load")
    assert plain.getvalue().count("\n") == 1 and "\r" not in plain.getvalue()
    quiet = io.StringIO()
    ProgressLine(enabled=False, stream=quiet).show("[x]", 0.1, "load")
    assert quiet.getvalue() == ""
