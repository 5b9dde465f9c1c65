"""What a run produced against what it should have: summary.json and the readable report."""

from __future__ import annotations

import json
import platform
import subprocess
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..fixish import OrderResult, decode_order_results
from ..fixish.layout import Side
from ..paths import local_dir

__all__ = ["Comparison", "compare", "dist", "read_results", "versions", "render"]


def read_results(path: Path) -> list[OrderResult]:
    """The receiver's framed rejections.msg as OrderResults (an absent file means none were received)."""
    if not path.exists():
        return []
    wire = decode_order_results(path.read_bytes(), framed=True)
    return [
        OrderResult(Side(int(r["side"])), int(r["account"]), r["order_id"].decode("ascii"),
                    r["symbol"].decode("ascii").lstrip(" "), float(r["order_qty"]), float(r["price"]),
                    float(r["bid"]), float(r["offer"]), int(r["timestamp"]))
        for r in wire
    ]


def _decision(result: OrderResult) -> tuple:
    """Which order was withdrawn, without the quote it was judged by."""
    return result.identity()[:6]


@dataclass(frozen=True)
class Comparison:
    expected: int
    received: int
    unique: int
    duplicates: int
    missing: int
    unexpected: int
    quote_mismatches: int
    quotes_strict: bool
    examples: dict

    @property
    def correct(self) -> bool:
        return not self.missing and not self.unexpected and (not self.quotes_strict or not self.quote_mismatches)

    def as_dict(self) -> dict:
        return {
            "rejections_expected": self.expected, "rejections_received": self.received,
            "rejections_unique": self.unique, "duplicates": self.duplicates, "missing": self.missing,
            "unexpected": self.unexpected, "quote_mismatches": self.quote_mismatches,
            "quotes_compared_strictly": self.quotes_strict, "correct": self.correct, "examples": self.examples,
        }


def compare(expected: list[OrderResult], received: list[OrderResult], quotes_strict: bool) -> Comparison:
    """Wallaroo's validator: sets equal, ignoring order, duplicates and the timestamp.

    With `quotes_strict` (sequential runs) the quoted bid and offer must match too; when the
    streams flow concurrently an order may legitimately meet a newer or older quote of its
    symbol, so quote differences are counted but do not make the run wrong.
    """
    by_order = {}
    for result in received:
        by_order.setdefault(result.order_id, result)
    counts = Counter(r.order_id for r in received)
    expected_decisions = {_decision(r): r for r in expected}
    received_decisions = {_decision(r): r for r in by_order.values()}
    missing = [d for d in expected_decisions if d not in received_decisions]
    unexpected = [d for d in received_decisions if d not in expected_decisions]
    mismatched = [d for d in expected_decisions if d in received_decisions
                  and expected_decisions[d].identity() != received_decisions[d].identity()]
    examples = {
        "missing": [list(map(str, d)) for d in missing[:5]],
        "unexpected": [list(map(str, d)) for d in unexpected[:5]],
        "quote_mismatches": [{"order_id": d[2], "expected": expected_decisions[d].identity()[6:],
                              "received": received_decisions[d].identity()[6:]} for d in mismatched[:5]],
    }
    return Comparison(len(expected), len(received), len(by_order), sum(c - 1 for c in counts.values()),
                      len(missing), len(unexpected), len(mismatched), quotes_strict, examples)


def dist(name: str) -> str | None:
    """The installed version of a Python distribution, None where it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    kafka_jars = sorted((local_dir() / "jars" / "kafka").glob("kafka_2.13-*.jar"))
    connector = sorted((local_dir() / "jars" / "spark").glob("spark-sql-kafka-*.jar"))
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        java = None
    return {
        "market-spread": dist("market-spread"), "python": platform.python_version(), "pyspark": dist("pyspark"),
        "kafka-python": dist("kafka-python"), "pandas": dist("pandas"), "numpy": dist("numpy"),
        "kafka-broker": kafka_jars[0].stem.split("-", 1)[1] if kafka_jars else None,
        "spark-sql-kafka": connector[0].stem.rsplit("-", 1)[1] if connector else None, "java": java,
        "machine": f"{platform.machine()}, {_cpus()} cores",
    }


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def render(summary: dict) -> str:
    """The report printed at the end of a run."""
    s, lat = summary, summary.get("latency_ms") or {}
    lines = [
        f"Market Spread run: {'sequential' if s['sequential'] else 'concurrent'}, "
        f"record format {s['record_format']}, {s['partitions']} partitions, rate {s['rate']:,.0f} msgs/s per stream",
        f"  sent         initial NBBO {s['sent']['initial_nbbo']:,}, NBBO {s['sent']['nbbo']:,}, "
        f"orders {s['sent']['orders']:,}",
        f"  rejections   expected {s['rejections_expected']:,}, received {s['rejections_received']:,} "
        f"({s['rejections_unique']:,} unique, {s['duplicates']:,} duplicates)",
        f"  correctness  missing {s['missing']:,}, unexpected {s['unexpected']:,}, quote mismatches "
        f"{s['quote_mismatches']:,}{'' if s['quotes_compared_strictly'] else ' (not an error when concurrent)'}, "
        f"dead letters {s['dead_letters']:,}",
        f"  throughput   {s['throughput_msgs_per_s']:,.0f} msgs/s end to end over {s['stream_seconds']:.1f} s",
    ]
    if lat:
        lines.append("  latency      " + ", ".join(f"{k} {v:,.1f} ms" for k, v in lat.items() if k != "count")
                     + f" (over {lat.get('count', 0):,.0f} rejections)")
    lines.append(f"  wall time    {s['wall_seconds']:.1f} s; results in {s['out']}")
    lines.append("  verdict      " + ("CORRECT: the job's rejections equal the reference model's"
                                      if s["correct"] else "WRONG: see summary.json 'examples'"))
    return "\n".join(lines)


def write_summary(path: Path, summary: dict) -> None:
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
