"""A step's raw material (samples, outputs, expectations) -> its result, as plain numbers.

Pure: no Kafka, no processes. Definitions (docs/benchmarks.md repeats them):

- offered: stream messages the senders got acknowledged per second over the load window
  [first intended send time, last intended send time + how late the senders were at the end];
- sustained: the least-squares slope of the system's own processed-message counter over the
  last three quarters of the load window (the first quarter is warm-up); a micro-batch
  system's counter is a staircase, and a line through many stairs does not depend much on
  where the window's edges cut them (the longer the step, the less);
- lag: input end offsets minus the system's processed offsets, in records, times the step's
  messages per record (1 for `message`); the trend of its lower envelope (the troughs between
  micro-batches) over the second half of the load window decides `lag_growing`
  (`stats.lag_trend`);
- latency: receive time - intended send time of every order result received whose intended
  time falls in the steady part of the step (the last three quarters, as for throughput; the
  whole step's figures are kept as `latency_ms_including_warmup`), first arrival per order id
  only; nearest-rank percentiles;
- lost: expected results (reference model) not received once drained; the passthrough's:
  order messages sent minus order messages received by the probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .expected import Expected
from .search import judge
from .stats import (batch_periods, histogram, histogram_pairs, lag_trend, least_squares_slope, theil_sen_slope,
                    weighted_percentiles_ms, windowed_rates)

__all__ = ["Sample", "StepData", "Outputs", "summarize", "receiver_outputs_in_window", "probe_outputs_in_window",
           "first_arrivals", "series_points", "memory_trend"]

_NS = 1_000_000_000
_MS_NS = 1_000_000
WARMUP_SHARE = 0.25
SERIES_POINTS = 400
SAMPLE_SECONDS = 0.5  # the session samples every half second


@dataclass
class Sample:
    t: float  # wall clock, epoch seconds
    sent: float  # stream messages acknowledged by Kafka, all senders of the step
    sent_records: float
    behind: float  # the furthest any sender is behind its intended send times, s
    end_records: int  # input topics' end offsets, summed
    processed_records: int  # the system's processed offsets, summed
    processed_messages: float  # the system's own message counter
    output: float  # results the output consumer has received (cumulative)
    cpu: dict[str, float] = field(default_factory=dict)  # tree name -> CPU seconds so far
    rss: dict[str, int] = field(default_factory=dict)  # tree name -> RSS bytes now
    pss: dict[str, int] = field(default_factory=dict)  # tree name -> PSS bytes now
    load: float = 0.0  # 1-minute load average


@dataclass
class Outputs:
    """What the output consumer saw for this step, and what was expected."""

    latency_ns: np.ndarray  # per received result (or record)
    weights: np.ndarray | None  # messages per value (probe) or None (one each)
    receive_ns: np.ndarray
    expected: int | None  # results expected; None when not determinable
    received: int  # unique results (messages) received for the step
    lost: int | None
    unexpected: int = 0
    duplicates: int = 0
    quote_mismatches: int = 0
    note: str = ""


@dataclass
class StepData:
    label: str
    system: str
    record_format: str
    symbols: str
    reject_ratio: float
    rate: float
    duration: float
    start: float  # first intended send time, epoch s
    send_end: float  # when the last sender finished, epoch s
    samples: list[Sample]
    drained: bool
    drain_seconds: float
    outputs: Outputs
    sent: dict[str, int | None]  # stream -> messages sent (None if unknown)
    batch_size: int
    senders_per_stream: int
    peak_rss: dict[str, int] = field(default_factory=dict)


def first_arrivals(order_ids: np.ndarray) -> np.ndarray:
    """Mask of each order id's first occurrence (the receiver's dedupe rule)."""
    _, first = np.unique(np.asarray(order_ids), return_index=True)
    mask = np.zeros(len(order_ids), dtype=bool)
    mask[first] = True
    return mask


def _window(start: float, duration: float) -> tuple[int, int]:
    start_ns = int(start * _NS)
    # Record timestamps are whole ms, rounded down: allow a millisecond either side.
    return start_ns - _MS_NS, start_ns + int(duration * _NS) + _MS_NS


def receiver_outputs_in_window(results: np.ndarray, receive_ns: np.ndarray, start: float, duration: float,
                               expected: Expected | None) -> Outputs:
    """OrderResults (wire records with order_id, bid, offer, timestamp) received for one step."""
    lo, hi = _window(start, duration)
    ts = results["timestamp"].astype(np.int64)
    inside = (ts >= lo) & (ts <= hi)
    results, receive, ts = results[inside], np.asarray(receive_ns, dtype=np.int64)[inside], ts[inside]
    first = first_arrivals(results["order_id"])
    unique = results[first]
    latency = receive[first] - ts[first]
    duplicates = int(len(results) - first.sum())
    if expected is None or not expected.determinable:
        return Outputs(latency, None, receive[first], None, len(unique), None, duplicates=duplicates,
                       note=expected.reason if expected is not None else "no expectation")
    got = unique["order_id"].astype("S6")
    received_expected = np.isin(expected.order_ids, got)
    lost = int((~received_expected).sum())
    unexpected = int((~np.isin(got, expected.order_ids)).sum())
    order = np.argsort(expected.order_ids)
    at = np.searchsorted(expected.order_ids[order], got)
    at = np.minimum(at, max(len(order) - 1, 0))
    mismatches = 0
    if len(order):
        match = expected.order_ids[order][at] == got
        idx = order[at[match]]
        mismatches = int(((expected.bid[idx] != unique["bid"][match].astype(np.float64))
                          | (expected.offer[idx] != unique["offer"][match].astype(np.float64))).sum())
    return Outputs(latency, None, receive[first], len(expected), len(unique), lost, unexpected, duplicates,
                   mismatches)


def probe_outputs_in_window(rows: np.ndarray, start: float, duration: float, orders_sent: int | None) -> Outputs:
    """The probe's rows (receive_ns, timestamp_ms, messages) for one step: every order forwarded."""
    lo, hi = _window(start, duration)
    ts = rows["timestamp_ms"].astype(np.int64) * _MS_NS
    inside = (ts >= lo) & (ts <= hi)
    rows, ts = rows[inside], ts[inside]
    weights = rows["messages"].astype(np.int64)
    received = int(weights.sum())
    lost = None if orders_sent is None else max(0, orders_sent - received)
    duplicates = 0 if orders_sent is None else max(0, received - orders_sent)
    return Outputs(rows["receive_ns"].astype(np.int64) - ts, weights, rows["receive_ns"].astype(np.int64),
                   orders_sent, received, lost, duplicates=duplicates)


def series_points(n: int, limit: int = SERIES_POINTS) -> np.ndarray:
    return np.arange(n) if n <= limit else np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))


def _arrays(samples: list[Sample]) -> dict[str, np.ndarray]:
    return {name: np.array([getattr(s, name) for s in samples], dtype=np.float64)
            for name in ("t", "sent", "sent_records", "behind", "end_records", "processed_records",
                         "processed_messages", "output", "load")}


def _value_at(t: np.ndarray, y: np.ndarray, when: float) -> float:
    return float(np.interp(when, t, y)) if len(t) else 0.0


def memory_trend(t: np.ndarray, memory: np.ndarray, since: float, end: float) -> dict:
    """The system's memory (PSS of its process tree) after the warm-up quarter: level and drift.

    The drift is the Theil-Sen slope over the second half of that span, so the growth a collector
    or allocator shows while warming up does not read as a leak, and one spike does not hide one.
    """
    ok = (t >= since) & (t <= end) & ~np.isnan(memory)
    if ok.sum() < 4:
        return {"after_warmup_mb": None, "at_end_mb": None, "max_mb": None, "drift_mb_per_min": None}
    tt, mm = t[ok], memory[ok] / 2**20
    half = tt >= tt[0] + (tt[-1] - tt[0]) / 2
    return {"after_warmup_mb": round(float(mm[0]), 1), "at_end_mb": round(float(mm[-1]), 1),
            "max_mb": round(float(mm.max()), 1),
            "drift_mb_per_min": round(60 * theil_sen_slope(tt[half], mm[half]), 2)}


def summarize(data: StepData) -> dict:
    """The step's result: everything bench.json reports for it (plus `series` for the plot)."""
    a = _arrays(data.samples)
    t = a["t"]
    # The load window: the intended schedule, stretched by how late the senders sent their last batch.
    start = data.start
    during = t <= data.send_end
    behind_final = float(a["behind"][during][-1]) if during.any() else 0.0
    end = start + data.duration + max(0.0, behind_final)
    window = end - start
    load = (t >= start) & (t <= end)
    sent_total = sum(v for v in data.sent.values() if v is not None)
    offered = sent_total / window if all(v is not None for v in data.sent.values()) else \
        (_value_at(t, a["sent"], end) - _value_at(t, a["sent"], start)) / window
    steady = load & (t >= start + WARMUP_SHARE * window)
    if steady.sum() >= 2:
        sustained = least_squares_slope(t[steady], a["processed_messages"][steady])
    else:
        sustained = (_value_at(t, a["processed_messages"], end) - _value_at(t, a["processed_messages"], start)) / window
    # Lag in messages: records behind times the step's messages per record.
    records = _value_at(t, a["sent_records"], end)
    per_record = (_value_at(t, a["sent"], end) / records) if records else 1.0
    per_record = 1.0 if data.record_format == "message" else max(per_record, 1.0)
    lag = np.maximum(a["end_records"] - a["processed_records"], 0) * per_record
    # The envelope spans a couple of batches (at least 1 s for systems that never pause); the
    # level test allows one typical batch of jitter.
    periods = batch_periods(t[load], a["processed_records"][load])
    longest = float(periods.max()) if len(periods) else SAMPLE_SECONDS
    typical = float(np.median(periods)) if len(periods) else SAMPLE_SECONDS
    trend = lag_trend(t[load], lag[load], offered, since=start + window / 2,
                      envelope=max(1.0, 2 * longest + SAMPLE_SECONDS), batch=typical)
    out = data.outputs
    # Latency over the same steady window as the throughput: the warm-up quarter (JIT, first
    # micro-batches, connection set-up) is reported separately, never mixed into the tail.
    intended_ns = out.receive_ns - out.latency_ns
    in_steady = intended_ns >= int((start + WARMUP_SHARE * window) * _NS)
    steady_weights = None if out.weights is None else out.weights[in_steady]
    latency = weighted_percentiles_ms(out.latency_ns[in_steady], steady_weights)
    latency_all = weighted_percentiles_ms(out.latency_ns, out.weights)
    # Not drained: `lost` still counts what never arrived, backlog included; the verdict says why.
    lost = out.lost
    verdict = judge(data.rate, offered, sustained, trend.growing, out.lost, data.drained)
    resources = {}
    for name in sorted({k for s in data.samples for k in s.cpu}):
        cpu = np.array([s.cpu.get(name, np.nan) for s in data.samples], dtype=np.float64)
        ok = ~np.isnan(cpu)
        if not ok.any():
            continue
        used = _value_at(t[ok], cpu[ok], end) - _value_at(t[ok], cpu[ok], start)
        resources[name] = {"cpu_seconds": round(used, 2), "cpu_percent": round(100 * used / window, 1),
                           "peak_rss_mb": round(data.peak_rss.get(name, 0) / 2**20, 1)}
    memory = np.array([s.pss.get(data.system, np.nan) for s in data.samples], dtype=np.float64)
    rates_window = 2.0
    pick = series_points(len(t))
    series = {
        "t": np.round(t - start, 3)[pick].tolist(),
        "offered_msgs_per_s": np.round(windowed_rates(t, a["sent"], rates_window))[pick].tolist(),
        "processed_msgs_per_s": np.round(windowed_rates(t, a["processed_messages"], rates_window))[pick].tolist(),
        "lag_messages": np.round(lag)[pick].tolist(),
        "sent_messages": a["sent"][pick].tolist(),
        "processed_messages": (a["processed_messages"] - a["processed_messages"][0])[pick].tolist()
        if len(t) else [],
        "load_average": a["load"][pick].tolist(),
        "memory_mb": np.round(memory / 2**20, 1)[pick].tolist(),
    }
    return {
        "label": data.label,
        "system": data.system,
        "record_format": data.record_format,
        "symbols": data.symbols,
        "reject_ratio": data.reject_ratio,
        "rate": data.rate,
        "duration": data.duration,
        "load_seconds": round(window, 2),
        "offered_msgs_per_s": round(offered, 1),
        "sustained_msgs_per_s": round(sustained, 1),
        "latency_ms": {k: (None if v is None else round(v, 3)) for k, v in latency.items()},
        "latency_ms_including_warmup": {k: (None if v is None else round(v, 3)) for k, v in latency_all.items()},
        "latency_histogram_ms": histogram_pairs(histogram(out.latency_ns / _MS_NS, out.weights)),
        "lost": lost,
        "expected": out.expected,
        "received": out.received,
        "unexpected": out.unexpected,
        "duplicates": out.duplicates,
        "quote_mismatches": out.quote_mismatches,
        "expectation_note": out.note,
        "drained": data.drained,
        "drain_seconds": round(data.drain_seconds, 2),
        "lag_growing": trend.growing,
        "lag": {"at_end_of_load_messages": round(_value_at(t, lag, end)), "max_messages": round(float(lag.max()))
                if len(lag) else 0, "messages_per_record": round(per_record, 2), "trend": trend.to_dict()},
        "generator": {"sent": data.sent, "behind_max_seconds": round(float(a["behind"][load].max()), 3)
                      if load.any() else 0.0, "batch_size": data.batch_size,
                      "senders_per_stream": data.senders_per_stream},
        "resources": resources,
        "memory": memory_trend(t, memory, start + WARMUP_SHARE * window, end),
        "load_average": {"mean": round(float(a["load"][load].mean()), 2) if load.any() else None,
                         "max": round(float(a["load"][load].max()), 2) if load.any() else None},
        "verdict": {"sustainable": verdict.sustainable, "reason": verdict.reason, "limit": verdict.limit},
        "series": series,
    }
