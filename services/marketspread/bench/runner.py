"""One system configuration measured at one rate, or searched for its highest sustainable rate.

A `Runner` keeps one session (stack) running across steps; a step that leaves a backlog it
could not drain, or a system that died, gets a fresh session before the next step, so no step
starts behind.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import MarketSpreadError
from .analysis import StepData, summarize
from .machine import LoadWatch
from .plot import plot_step
from .progress import ProgressLine, human
from .report import document, render_search, render_step, search_summary, write_json
from .search import Verdict, find_max
from .session import BrokerHandle, Session
from .settings import BenchSettings

__all__ = ["Runner", "Measured", "single_run", "search_run", "failed_result", "print_result"]

log = logging.getLogger(__name__)


@dataclass
class Measured:
    result: dict
    data: StepData | None


def failed_result(system: str, record_format: str, symbols: str, rate: float, duration: float, reject_ratio: float,
                  reason: str) -> dict:
    """A step that could not be measured (the system died, a wait timed out): unsustainable, with why."""
    return {
        "system": system, "record_format": record_format, "symbols": symbols, "reject_ratio": reject_ratio,
        "rate": rate, "duration": duration, "load_seconds": 0.0, "offered_msgs_per_s": 0.0,
        "sustained_msgs_per_s": 0.0, "latency_ms": {"count": 0, "p50": None, "p90": None, "p99": None,
                                                      "p999": None, "max": None},
        "latency_histogram_ms": [], "lost": None, "expected": None, "received": 0, "unexpected": 0, "duplicates": 0,
        "quote_mismatches": 0, "expectation_note": reason, "drained": False, "drain_seconds": 0.0,
        "lag_growing": True, "lag": {"at_end_of_load_messages": 0, "max_messages": 0, "messages_per_record": 1.0,
                                     "trend": {}},
        "generator": {}, "resources": {}, "load_average": {}, "series": {},
        "verdict": {"sustainable": False, "reason": f"failed: {reason}", "limit": None},
    }


def step_command(system: str, record_format: str, symbols: str, rate: float, duration: float, reject_ratio: float,
                 seed: int) -> str:
    """The command that repeats one measurement on its own (same system, load and data)."""
    return (f"marketspread bench --system {system} --record-format {record_format} --symbols {symbols} "
            f"--rate {rate:.0f} --duration {duration:g} --reject-ratio {reject_ratio:g} --seed {seed - 1000}")


class Runner:
    def __init__(self, broker: BrokerHandle, settings: BenchSettings, system: str, record_format: str, symbols: str,
                 out: Path, progress: ProgressLine, load: LoadWatch):
        self.broker = broker
        self.settings = settings
        self.system = system
        self.record_format = record_format
        self.symbols = symbols
        self.out = out
        self.progress = progress
        self.load = load
        self.session: Session | None = None
        self.sessions = 0
        self.steps = 0

    def close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            session.stop()

    def measure(self, rate: float, duration: float, reject_ratio: float, out_dir: Path, tolerate_failure: bool,
                title: str = "") -> Measured:
        """One step at `rate`; writes out_dir/bench.json and bench.png."""
        self.steps += 1
        label = f"step{self.steps:02d}"
        try:
            if self.session is None:
                self.sessions += 1
                self.session = Session(self.broker, self.settings, self.system, self.record_format, self.symbols,
                                       self.out / f"session-{self.sessions}", self.progress).__enter__()
            self.load.sample()
            data = self.session.step(rate, duration, reject_ratio, self.settings.seed + 1000 * self.steps, label)
            self.load.sample()
        except MarketSpreadError as error:
            self.close()
            if not tolerate_failure:
                raise
            log.warning("%s at %s msgs/s failed: %s", self.system, human(rate), error)
            result = failed_result(self.system, self.record_format, self.symbols, rate, duration, reject_ratio,
                                   str(error).splitlines()[0])
            measured = Measured(result, None)
        else:
            result = summarize(data)
            if not data.drained:
                self.close()  # the next step must not start behind
            measured = Measured(result, data)
        result["dir"] = str(out_dir)
        command = step_command(self.system, self.record_format, self.symbols, rate, duration, reject_ratio,
                               self.settings.seed + 1000 * self.steps)
        write_json(out_dir / "bench.json", document(result, load=self.load.summary(), command=command,
                                                    extra={"title": title}))
        plot_step(out_dir / "bench.png", result, measured.data)
        verdict = result["verdict"]
        lat = result["latency_ms"]
        self.progress.message(
            f"  {self.system:<11} {self.record_format:<7} {rate:>11,.0f} msgs/s: "
            f"{'ok  ' if verdict['sustainable'] else 'FAIL'} sustained {result['sustained_msgs_per_s']:>11,.0f}, "
            f"p50 {lat.get('p50') or 0:,.0f} ms, p99 {lat.get('p99') or 0:,.0f} ms - {verdict['reason']}")
        return measured


def single_run(broker: BrokerHandle, settings: BenchSettings, out: Path, progress: ProgressLine,
               load: LoadWatch, *, system: str | None = None, record_format: str | None = None,
               symbols: str | None = None, rate: float | None = None, duration: float | None = None,
               reject_ratio: float | None = None, command: str | None = None, tolerate_failure: bool = False) -> dict:
    s = settings
    system, record_format = system or s.system, record_format or s.record_format
    symbols, rate, duration = symbols or s.symbols, rate or s.rate, duration or s.duration
    reject_ratio = s.reject_ratio if reject_ratio is None else reject_ratio
    began = time.monotonic()
    runner = Runner(broker, s, system, record_format, symbols, out / "run", progress, load)
    try:
        measured = runner.measure(rate, duration, reject_ratio, out, tolerate_failure)
    finally:
        runner.close()
    doc = document(measured.result, load=load.summary(), wall_seconds=time.monotonic() - began, command=command)
    write_json(out / "bench.json", doc)
    progress.end()
    return doc


def search_run(broker: BrokerHandle, settings: BenchSettings, out: Path, progress: ProgressLine, load: LoadWatch,
               *, system: str | None = None, record_format: str | None = None, symbols: str | None = None,
               start_rate: float | None = None, step_duration: float | None = None, max_steps: int | None = None,
               command: str | None = None) -> dict:
    s = settings
    system, record_format, symbols = system or s.system, record_format or s.record_format, symbols or s.symbols
    duration = step_duration or s.step_duration
    began = time.monotonic()
    runner = Runner(broker, s, system, record_format, symbols, out, progress, load)
    measured: dict[float, Measured] = {}

    def measure(rate: float) -> tuple[Verdict, Measured]:
        step_dir = out / "steps" / f"{runner.steps + 1:02d}-{rate:.0f}"
        m = runner.measure(rate, duration, s.reject_ratio, step_dir, tolerate_failure=True)
        measured[rate] = m
        v = m.result["verdict"]
        return Verdict(v["sustainable"], v["reason"], v["limit"]), m

    try:
        search = find_max(measure, start_rate or s.rate, factor=s.factor, precision=s.precision,
                          max_steps=max_steps or s.max_steps, min_rate=s.min_rate, max_rate=s.max_rate)
    finally:
        runner.close()
    steps = [step.result.result for step in search.steps]
    summary = search_summary(steps, search.max_sustainable_rate, search.bounded_by)
    best = search.best_step()
    chosen = best.result if best is not None else search.steps[-1].result
    doc = document(chosen.result, load=load.summary(), wall_seconds=time.monotonic() - began, command=command,
                   extra={"find_max": summary})
    if best is None:
        doc["rate"] = None
    write_json(out / "bench.json", doc)
    plot_step(out / "bench.png", chosen.result, chosen.data, summary)
    progress.end()
    return doc


def print_result(doc: dict) -> None:
    print(render_search(doc) if "find_max" in doc else render_step(doc))
