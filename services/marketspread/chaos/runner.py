"""One chaos scenario from start to verdict, and `all` of them in turn.

A scenario owns everything it runs: a broker it starts on free ports with its data under
OUT/<scenario>/kafka, fresh topics, the receiver (a fixed group id, so that a restart resumes),
the Spark job (checkpoint OUT/<scenario>/checkpoint) and the senders. It sends the initial
NBBO and waits until the job has processed it, starts both streams on a shared schedule,
hands over to the fault (scenarios.py), then waits until the senders are done, the job has
processed everything and the receiver has consumed every result.

While it waits, a supervisor watches the job and the receiver: if one dies without having been
killed by the scenario (the Spark query fails when the broker vanishes, say), it is restarted
from its checkpoint or commit point as an operator's restart policy would, and that death is
recorded as a fault of its own, never hidden.

The verdict is Wallaroo's validator after dedupe by order id: the received set equals the
reference model's, with zero missing and zero unexpected. The input topics are read back too:
every message sent is on them exactly once (no order id twice: the producers were idempotent).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..errors import MarketSpreadError
from ..fixish import Nbbo, Order, OrderResult, decode_records
from ..run.inputs import InputFile, expected_results, load_input
from ..run.stack import Stack, free_port, offsets_from
from ..run.summary import compare, read_results, versions, write_summary
from ..settings import KafkaSettings
from .scenarios import SCENARIOS, Fault
from .settings import SCENARIO_NAMES, ChaosSettings

__all__ = ["ChaosInputs", "ScenarioRun", "ScenarioError", "run_chaos", "read_input_topics"]

# A service that keeps dying is not recovering: give up after this many unplanned restarts.
MAX_UNPLANNED_RESTARTS = 3
_QUERY_STARTED = re.compile(r"query (\S+) started")
_BATCH = re.compile(r"marketspread_job\.metrics: batch (\d+): (\d+) rows")
_OUTPUTS = ("rejections.msg", "rejections.receive-ns", "dead-letters.msg", "dead-letters.jsonl", "malformed.msg",
            "malformed.jsonl", "receiver-state.json", "stats.json", "summary.json")


class ScenarioError(MarketSpreadError):
    pass


@dataclass(frozen=True)
class ChaosInputs:
    initial: InputFile
    nbbo: InputFile
    orders: InputFile
    expected: list[OrderResult]

    @classmethod
    def load(cls, initial: Path, nbbo: Path, orders: Path, batch_size: int) -> ChaosInputs:
        files = load_input(initial, Nbbo), load_input(nbbo, Nbbo), load_input(orders, Order)
        # Both streams on one schedule: the reference applies them merged by intended send time.
        return cls(*files, expected_results(*files, sequential=False, batch_size=batch_size))


def read_input_topics(bootstrap_servers: str, topics: list[str], framed: bool, timeout: float = 120) -> dict:
    """Every record on the topics, decoded: messages per topic and how many order ids occur more than once."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             client_id="marketspread-chaos-check", max_poll_records=50_000,
                             fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        values: dict[str, list[bytes]] = {t: [] for t in topics}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise ScenarioError(f"could not read {', '.join(topics)} back within {timeout:.0f} s")
            for tp, records in consumer.poll(timeout_ms=1000).items():
                values[tp.topic] += [r.value for r in records if r.offset < end[tp]]
    finally:
        consumer.close()
    counts, order_ids = {}, []
    for topic, topic_values in values.items():
        decoded = decode_records(topic_values, framed=framed)
        counts[topic] = {"records": len(topic_values), "messages": decoded.message_count,
                         "not_fixish": len(decoded.failures)}
        order_ids.append(decoded.orders["order_id"])
    ids = np.concatenate(order_ids) if order_ids else np.array([], dtype="S6")
    return {"topics": counts, "repeated_order_ids": int(len(ids) - len(np.unique(ids)))}


class ScenarioRun:
    """One scenario. The fault functions use: stack, out, checkpoint, group_id, now(), note(), record(),
    wait_fault_point(), senders_running(), acknowledged()."""

    def __init__(self, settings: ChaosSettings, scenario: str, inputs: ChaosInputs, out: Path,
                 echo: Callable[[str], None] | None = None, fault: Callable[[ScenarioRun], None] | None = None):
        self.settings = settings
        self.scenario = scenario
        self.fault = fault or SCENARIOS[scenario]
        self.inputs = inputs
        self.out = out
        self.checkpoint = out / "checkpoint"
        self.group_id = f"marketspread-chaos-{scenario}"
        self.echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
        port = free_port()
        kafka = KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}", record_format=settings.record_format,
                              shards=settings.shards)
        self.stack = Stack(kafka, out, time.monotonic() + settings.timeout_seconds, port, free_port(),
                           broker_run_dir=out / "kafka", broker_heap=settings.broker_heap)
        self.faults: list[Fault] = []
        self._finishers: list[tuple[Fault, Callable[[Fault], None]]] = []
        self.senders = []
        self.stream_t0: float | None = None
        self._began = time.monotonic()
        self._unplanned: dict[str, int] = {}

    # -- what the fault functions use ------------------------------------------------------

    def now(self) -> dict:
        """When, as seconds since the streams' first intended send time and as wall clock."""
        wall = time.time()
        return {"stream_seconds": round(wall - self.stream_t0, 1) if self.stream_t0 else None,
                "wall_clock": datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="milliseconds")}

    def note(self, text: str) -> None:
        self.echo(f"[{self.scenario} {time.monotonic() - self._began:6.1f}s] {text}")

    def record(self, fault: Fault, finish: Callable[[Fault], None] | None = None) -> None:
        """Add a fault to the summary; `finish(fault)` completes its details once the run is over."""
        self.faults.append(fault)
        if finish is not None:
            self._finishers.append((fault, finish))

    def senders_running(self) -> bool:
        return any(sender.running() for sender in self.senders)

    def acknowledged(self) -> int:
        """Stream messages Kafka has acknowledged so far (a finished sender counts in full)."""
        total = 0
        for sender, source in zip(self.senders, (self.inputs.nbbo, self.inputs.orders)):
            if not sender.running():
                total += len(source)
            elif (samples := sender.metrics()) is not None:
                total += int(samples.total("marketspread_sender_messages_total"))
        return total

    def wait_fault_point(self, also: Callable[[], bool] | None = None, what: str = "") -> None:
        """Until each sender has had `fault_at` of its stream acknowledged and the job has processed some of
        the order stream (and `also()` holds); fail if the streams end first: the fault would not be mid-stream."""
        share = self.settings.fault_at
        targets = [math.ceil(share * len(source)) for source in (self.inputs.nbbo, self.inputs.orders)]
        orders_topic = self.stack.kafka.orders_topic

        def reached() -> bool:
            for sender, target in zip(self.senders, targets):
                if not sender.running():
                    continue
                samples = sender.metrics()
                if samples is None or samples.total("marketspread_sender_messages_total") < target:
                    return False
            committed = offsets_from(self.stack.service("job").metrics(), "marketspread_job_committed_offset")
            processing = sum(v for (topic, _), v in committed.items() if topic == orders_topic) > 0
            return (processing and (also is None or also())) or not self.senders_running()

        self.stack.wait_until(reached, f"{share:.0%} of each stream to be sent and processed{what}")
        if not self.senders_running():
            raise ScenarioError(f"the streams ended before the fault point ({share:.0%} sent{what}): send more "
                                "messages, at a lower --rate, or lower --fault-at")

    # -- the run ---------------------------------------------------------------------------

    def execute(self) -> dict:
        s, stack, inputs = self.settings, self.stack, self.inputs
        started = time.time()
        self._clean()
        error = None
        input_check: dict = {}
        stream_end = None
        try:
            stack.ensure_broker()
            if stack.broker is None:
                raise ScenarioError(f"a broker already answers at {stack.kafka.bootstrap_servers}; a scenario must "
                                    "own its broker")
            self.note(f"broker pid {stack.broker.status().pid} at {stack.kafka.bootstrap_servers}, data in "
                      f"{stack.broker.run_dir}")
            stack.fresh_topics(s.partitions)
            receiver = stack.start_receiver(group_id=self.group_id)
            stack.start_job(self.checkpoint, shuffle_partitions=s.shuffle_partitions)
            receiver.wait_metrics(stack.left())
            stack.wait_job_ready()
            self.note(f"job pid {stack.service('job').pid} and receiver pid {receiver.pid} ready; sending the "
                      f"initial NBBO ({len(inputs.initial):,} messages)")
            initial = stack.start_sender("nbbo", inputs.initial.path, 0.0, s.batch_size, name="sender-initial-nbbo")
            stack.wait_finished(initial)
            stack.wait_processed()

            # A shared t0 slightly ahead gives both senders the same schedule of intended times.
            self.stream_t0 = time.time() + 2.0
            self.senders = [stack.start_sender(stream, source.path, s.rate, s.batch_size, self.stream_t0)
                            for stream, source in (("nbbo", inputs.nbbo), ("orders", inputs.orders))]
            self.note(f"streams started: {len(inputs.nbbo):,} NBBO and {len(inputs.orders):,} orders at "
                      f"{s.rate:,.0f} msgs/s each ({s.record_format} records, {s.partitions} partitions)")
            stack.supervisor = self._supervise
            self.fault(self)
            for sender in self.senders:
                stack.wait_finished(sender)
            stream_end = time.time()
            self.note("senders finished; waiting for the job to process everything and the receiver to consume it")
            stack.wait_processed()
            stack.wait_received()
            input_check = read_input_topics(stack.kafka.bootstrap_servers,
                                            [stack.kafka.nbbo_topic, stack.kafka.orders_topic],
                                            framed=s.record_format == "framed")
        except Exception as failure:  # any failure is the scenario's verdict, written down like a success
            error = str(failure) if isinstance(failure, MarketSpreadError) else f"{type(failure).__name__}: {failure}"
            self.note(f"FAILED: {error}")
        finally:
            stack.supervisor = None
            stack.stop_all()
        for fault, finish in self._finishers:
            finish(fault)
        return self._summary(started, stream_end, input_check, error)

    def _clean(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for stale in _OUTPUTS:
            (self.out / stale).unlink(missing_ok=True)
        for folder in ("checkpoint", "kafka", "logs"):
            shutil.rmtree(self.out / folder, ignore_errors=True)

    def _supervise(self) -> None:
        """A job or receiver that died without being killed here: record it, restart it (once the restart
        answers, the wait that called us goes on)."""
        for name in ("job", "receiver"):
            current = [service for service in self.stack.services if service.name == name]
            if not current or current[-1].running():
                continue
            dead = current[-1]
            code = dead.process.returncode
            self._unplanned[name] = self._unplanned.get(name, 0) + 1
            if self._unplanned[name] > MAX_UNPLANNED_RESTARTS:
                raise ScenarioError(f"the {name} died {self._unplanned[name]} times; last lines of {dead.log_file}:\n"
                                    f"{dead.log_tail()}")
            cause = _failure_cause(dead.log_text())
            when = self.now()
            self.note(f"the {name} (pid {dead.pid}) exited on its own with code {code}: {cause[:200]}")
            restarted = self.stack.restart(dead)
            if name == "job":
                self.stack.wait_job_ready()
            else:
                restarted.wait_metrics(self.stack.left())
            self.note(f"the {name} was restarted as pid {restarted.pid}")
            previous = next((f.what for f in reversed(self.faults) if f.injected), None)
            self.record(Fault(
                what=f"the {name} exited on its own with code {code}: {cause}",
                when=when,
                recovery=("restarted with the same command line from its checkpoint, as the SparkApplication's "
                          "restartPolicy would" if name == "job" else
                          "restarted with the same group id and output directory, as a Deployment would"),
                injected=False,
                details={"service": name, "failed_pid": dead.pid, "exit_code": code, "restarted_pid": restarted.pid,
                         "after": previous},
            ))

    # -- the verdict -----------------------------------------------------------------------

    def _summary(self, started: float, stream_end: float | None, input_check: dict, error: str | None) -> dict:
        s, k, inputs = self.settings, self.stack.kafka, self.inputs
        comparison = compare(inputs.expected, read_results(self.out / "rejections.msg"), quotes_strict=False)
        stats = _read_json(self.out / "stats.json")
        sent = {k.nbbo_topic: len(inputs.initial) + len(inputs.nbbo), k.orders_topic: len(inputs.orders)}
        on_topics = {topic: counts["messages"] for topic, counts in (input_check.get("topics") or {}).items()}
        job_runs = self._job_runs()
        for fault in self.faults:
            if fault.details.get("service") == "job" and fault.details.get("restarted_pid"):
                run = next((r for r in job_runs if r["pid"] == fault.details["restarted_pid"]), None)
                fault.details["first_batch_after_restart"] = run["first_batch"] if run else None
        checks = {
            "fault_injected": any(f.injected for f in self.faults),
            "results_exact": comparison.missing == 0 and comparison.unexpected == 0,
            "inputs_exactly_once": bool(input_check) and on_topics == sent
                                   and input_check.get("repeated_order_ids") == 0,
            "completed": error is None,
        }
        correct = checks["results_exact"] and checks["completed"]
        summary = {
            "scenario": self.scenario,
            "faults_injected": [f.as_dict() for f in self.faults],
            "messages_sent": sent,
            "messages_on_topics": on_topics,
            "repeated_order_ids_on_topics": input_check.get("repeated_order_ids"),
            "rejections_expected": comparison.expected,
            "received": comparison.unique,
            "received_with_duplicates": comparison.received,
            "duplicates": comparison.duplicates,
            "missing": comparison.missing,
            "unexpected": comparison.unexpected,
            "quote_mismatches": comparison.quote_mismatches,
            "dead_letters": int(sum((stats.get("dead_letters") or {}).values())),
            "correct": correct,
            "checks": checks,
            "passed": all(checks.values()),
            "error": error,
            "examples": comparison.examples,
            "job_runs": job_runs,
            "receiver_runs": [{"pid": p.pid, "exit_code": p.process.returncode if p.process else None}
                              for p in self._processes("receiver")],
            "record_format": s.record_format, "partitions": s.partitions, "rate": s.rate,
            "batch_size": s.batch_size,
            "inputs": {"initial_nbbo": str(inputs.initial.path), "nbbo": str(inputs.nbbo.path),
                       "orders": str(inputs.orders.path)},
            "stream_seconds": round(stream_end - self.stream_t0, 1) if stream_end and self.stream_t0 else None,
            "wall_seconds": round(time.time() - started, 1),
            "out": str(self.out),
        }
        write_summary(self.out / "summary.json", summary)
        return summary

    def _processes(self, name: str) -> list:
        found = [p for p in self.stack.retired + self.stack.services if p.name == name]
        return sorted(found, key=lambda p: p.log_start)

    def _job_runs(self) -> list[dict]:
        """Each job process: its query id and the micro-batches it completed, from its part of the job log."""
        processes = self._processes("job")
        runs = []
        for i, process in enumerate(processes):
            text = process.log_text(processes[i + 1].log_start if i + 1 < len(processes) else None)
            queries = _QUERY_STARTED.findall(text)
            batches = [(int(b), int(rows)) for b, rows in _BATCH.findall(text)]
            code = process.process.returncode if process.process else None
            runs.append({
                "pid": process.pid, "query_id": queries[0] if queries else None,
                "first_batch": batches[0][0] if batches else None, "last_batch": batches[-1][0] if batches else None,
                "batches": len(batches), "rows": sum(rows for _, rows in batches),
                "ended": "killed by SIGKILL" if code == -9 else "stopped" if code == 0 else f"exit code {code}",
            })
        return runs


def _failure_cause(log: str) -> str:
    """The error a dead service reported: its `marketspread ...: error:` line, else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if ": error:" in line]
    cause = errors[-1] if errors else (lines[-1] if lines else "no output")
    return cause[:500]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}


# --- all of it -----------------------------------------------------------------------------------

def run_chaos(settings: ChaosSettings, inputs: ChaosInputs, echo: Callable[[str], None] | None = None) -> dict:
    """Run the chosen scenario (or all three); write OUT/<scenario>/summary.json, and OUT/summary.json for all."""
    out = Path(settings.out)
    names = SCENARIO_NAMES if settings.scenario == "all" else (settings.scenario,)
    results = [ScenarioRun(settings, name, inputs, out / name, echo).execute() for name in names]
    if settings.scenario != "all":
        return results[0]
    summary = {
        "scenario": "all", "scenarios": results,
        "correct": all(r["correct"] for r in results), "passed": all(r["passed"] for r in results),
        "versions": versions(),
    }
    write_summary(out / "summary.json", summary)
    return summary
