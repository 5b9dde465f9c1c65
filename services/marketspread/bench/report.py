"""bench.json and the text a run prints.

Every bench.json has at least: `system`, `rate`, `sustained_msgs_per_s`, `latency_ms` (`p50`,
`p90`, `p99`, `p999`, `max`, plus `count`), `lost`, `lag_growing`; then the rest of the step's
result (analysis.summarize), and `command`, `date`, `machine`, `versions`. A `--find-max`
bench.json is the best sustainable step's result plus `find_max` (every step's figures).
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
from pathlib import Path

from .machine import machine, versions

__all__ = ["REQUIRED_KEYS", "document", "write_json", "render_step", "render_search", "search_summary", "fmt_ms",
           "command_line"]

REQUIRED_KEYS = ("system", "rate", "sustained_msgs_per_s", "latency_ms", "lost", "lag_growing")


def command_line(argv: list[str] | None = None) -> str:
    argv = sys.argv if argv is None else argv
    name = "marketspread" if argv and argv[0].endswith(("marketspread", "__main__.py")) else argv[0]
    return shlex.join([name, *argv[1:]])


def document(result: dict, *, load: dict | None = None, wall_seconds: float | None = None,
             command: str | None = None, extra: dict | None = None) -> dict:
    """The result with the context that makes it reproducible; REQUIRED_KEYS first."""
    head = {key: result.get(key) for key in REQUIRED_KEYS}
    doc = {**head, **{k: v for k, v in result.items() if k not in head}}
    doc.update(extra or {})
    doc["command"] = command if command is not None else command_line()
    doc["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    doc["machine"] = {**machine(), **({"load_average_during_run": load} if load else {})}
    doc["versions"] = versions()
    if wall_seconds is not None:
        doc["wall_seconds"] = round(wall_seconds, 1)
    return doc


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def fmt_ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f} ms" if value >= 10 else f"{value:,.2f} ms"


def _resources(resources: dict) -> str:
    return " | ".join(f"{name} {r['cpu_percent']:,.0f} % CPU, {r['peak_rss_mb']:,.0f} MB"
                      for name, r in resources.items())


def _memory(r: dict) -> str:
    m = r.get("memory") or {}
    if m.get("after_warmup_mb") is None:
        return "-"
    return (f"{r['system']} {m['after_warmup_mb']:,.0f} MB after the warm-up quarter, {m['at_end_mb']:,.0f} at the end, "
            f"max {m['max_mb']:,.0f}; drift {m['drift_mb_per_min']:+,.1f} MB/min over the second half (PSS)")


def render_step(r: dict) -> str:
    lat = r.get("latency_ms") or {}
    warm = r.get("latency_ms_including_warmup") or {}
    trend = (r.get("lag") or {}).get("trend") or {}
    lines = [
        f"Market Spread bench: {r['system']}, {r['record_format']} records, {r['symbols']} symbols, "
        f"{r['rate']:,.0f} msgs/s for {r['duration']:,.0f} s (reject ratio {r['reject_ratio']:.3g})",
        f"  throughput   sustained {r['sustained_msgs_per_s']:,.0f} msgs/s of {r['offered_msgs_per_s']:,.0f} offered; "
        f"lag {'GROWING' if r['lag_growing'] else 'not growing'} "
        f"(trend {100 * trend.get('relative_slope', 0.0):+.1f} % of the rate, "
        f"max {r['lag']['max_messages']:,.0f} msgs)",
        "  latency      " + ", ".join(f"{k} {fmt_ms(lat.get(k))}" for k in ("p50", "p90", "p99", "p999", "max"))
        + f" (over {lat.get('count') or 0:,} results after the warm-up quarter)",
        "  with warm-up " + ", ".join(f"{k} {fmt_ms(warm.get(k))}" for k in ("p50", "p90", "p99", "p999", "max"))
        + f" (over {warm.get('count') or 0:,} results)",
        f"  loss         lost {'-' if r['lost'] is None else format(r['lost'], ',')} of "
        f"{'-' if r['expected'] is None else format(r['expected'], ',')} expected "
        f"({r['unexpected']:,} unexpected, {r['duplicates']:,} duplicates); "
        + (f"drained in {r['drain_seconds']:.1f} s" if r["drained"] else
           f"NOT drained after {r['drain_seconds']:.0f} s"),
        f"  resources    {_resources(r.get('resources') or {})}",
        f"  memory       {_memory(r)}",
        f"  verdict      {'SUSTAINED' if r['verdict']['sustainable'] else 'NOT SUSTAINED'}: {r['verdict']['reason']}",
    ]
    return "\n".join(lines)


def search_summary(steps: list[dict], max_rate, bounded_by: str) -> dict:
    return {
        "max_sustainable_rate": max_rate,
        "bounded_by": bounded_by,
        "steps": [{"rate": s["rate"], "sustainable": s["verdict"]["sustainable"], "reason": s["verdict"]["reason"],
                   "offered_msgs_per_s": s["offered_msgs_per_s"], "sustained_msgs_per_s": s["sustained_msgs_per_s"],
                   "lag_growing": s["lag_growing"], "lost": s["lost"], "p50_ms": s["latency_ms"].get("p50"),
                   "p99_ms": s["latency_ms"].get("p99"), "dir": s.get("dir")} for s in steps],
    }


def render_search(doc: dict) -> str:
    fm = doc["find_max"]
    lines = [f"Market Spread bench --find-max: {doc['system']}, {doc['record_format']} records, {doc['symbols']} "
             f"symbols"]
    for s in fm["steps"]:
        lines.append(f"  {s['rate']:>11,.0f} msgs/s  {'ok  ' if s['sustainable'] else 'FAIL'}  sustained "
                     f"{s['sustained_msgs_per_s']:>11,.0f}  p50 {fmt_ms(s['p50_ms']):>12}  p99 "
                     f"{fmt_ms(s['p99_ms']):>12}  {s['reason']}")
    best = fm["max_sustainable_rate"]
    lines.append(f"  max sustainable: {'none found' if best is None else format(best, ',.0f') + ' msgs/s'} "
                 f"(bounded by {fm['bounded_by']})")
    return "\n".join(lines)
