"""The faults, one function each: wait until the streams are mid-way, break something for real, recover.

Each function receives the running scenario (runner.ScenarioRun: the stack, the clock, the
record of faults) once the senders are running, and returns when the fault has been injected
and the component is back. What happens afterwards (a crash the fault causes elsewhere) is the
runner's supervisor's business, and is recorded just the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..localkafka import end_offsets, group_offsets

if TYPE_CHECKING:
    from .runner import ScenarioRun

__all__ = ["Fault", "SCENARIOS", "job_kill", "receiver_kill", "broker_restart", "checkpoint_batches"]


@dataclass
class Fault:
    what: str
    when: dict  # {"stream_seconds": since the streams' first intended send time, "wall_clock": ISO 8601}
    recovery: str
    injected: bool = True  # False: not injected by the scenario, but caused by an injected fault
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def checkpoint_batches(checkpoint: Path) -> tuple[int | None, int | None]:
    """(newest batch id in the offset log, newest in the commit log): a batch planned but not committed
    is re-run, with the same offsets, by the next query on this checkpoint."""

    def newest(folder: str) -> int | None:
        ids = [int(p.name) for p in (checkpoint / folder).glob("*") if p.name.isdigit()]
        return max(ids) if ids else None

    return newest("offsets"), newest("commits")


def _sum(offsets: dict) -> int:
    return int(sum(offsets.values()))


def _by_topic(offsets: dict[tuple[str, int], int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for (topic, _), offset in offsets.items():
        totals[topic] = totals.get(topic, 0) + offset
    return totals


# --- job-kill ----------------------------------------------------------------------------------

def job_kill(run: ScenarioRun) -> None:
    """SIGKILL the Spark job (its whole process tree) while the senders run; restart it from its checkpoint."""
    stack = run.stack
    run.wait_fault_point()
    job = stack.service("job")
    processes = len(job.tree())
    planned, committed = checkpoint_batches(run.checkpoint)
    when = run.now()
    killed = stack.kill("job")
    run.note(f"job-kill: SIGKILL of the job's {processes} processes (driver pid {killed.pid}); checkpoint: batch "
             f"{committed} committed, batch {planned} planned")
    restarted = stack.restart(killed)
    stack.wait_job_ready()
    run.note(f"job-kill: job restarted from its checkpoint as pid {restarted.pid}, query active again")
    run.record(Fault(
        what="SIGKILL of the Spark job's whole process tree (Python driver, JVM, Python workers) mid-stream",
        when=when,
        recovery="restarted with the same command line from the same checkpoint: the query resumes after its last "
                 "committed batch and re-runs a planned one with the same offsets",
        details={"service": "job", "killed_pid": killed.pid, "killed_processes": processes,
                 "restarted_pid": restarted.pid, "last_committed_batch_at_kill": committed,
                 "last_planned_batch_at_kill": planned,
                 "restart_seconds": round(run.now()["stream_seconds"] - when["stream_seconds"], 1)},
    ))


# --- receiver-kill -----------------------------------------------------------------------------

_RESUMED = re.compile(r"resuming from the last commit point: (\d+) OrderResults")


def receiver_kill(run: ScenarioRun) -> None:
    """SIGKILL the receiver; restart it with the same group id and output directory once results it has not
    seen are waiting in Kafka: it resumes from its commit point and the files hold each record once."""
    stack = run.stack

    def received() -> float:
        samples = stack.service("receiver").metrics()
        return samples.total("marketspread_receiver_rejections_total") if samples else 0.0

    # Killed with results in its files, so that the restart has something to resume from.
    run.wait_fault_point(also=lambda: received() > 0, what=" and the receiver to have results")
    results_at_kill = received()
    when = run.now()
    killed = stack.kill("receiver")
    state_file = run.out / "receiver-state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {"offsets": {}}
    commit_point = {topic: sum(partitions.values()) for topic, partitions in state["offsets"].items()}
    kafka_committed = _by_topic(group_offsets(stack.kafka.bootstrap_servers, run.group_id))
    run.note(f"receiver-kill: SIGKILL of the receiver (pid {killed.pid}) after {results_at_kill:,.0f} "
             f"OrderResults; its commit point: {commit_point}")
    rejections = stack.kafka.rejections_topic

    def results_waiting() -> bool:
        written = _sum(end_offsets(stack.kafka.bootstrap_servers, [rejections]))
        return written > commit_point.get(rejections, 0) or not run.senders_running()

    stack.wait_until(results_waiting, "the job to write results while the receiver is down")
    waiting = _sum(end_offsets(stack.kafka.bootstrap_servers, [rejections])) - commit_point.get(rejections, 0)
    restarted = stack.restart(killed)
    restarted.wait_metrics(stack.left())
    run.note(f"receiver-kill: receiver restarted as pid {restarted.pid} with group {run.group_id}; "
             f"{waiting} result records were waiting for it")
    run.record(Fault(
        what="SIGKILL of the receiver mid-stream",
        when=when,
        recovery="restarted with the same group id and output directory: it cuts its files back to its last commit "
                 "point and resumes from the offsets recorded there",
        details={"service": "receiver", "killed_pid": killed.pid, "restarted_pid": restarted.pid,
                 "group_id": run.group_id, "results_received_at_kill": int(results_at_kill),
                 "commit_point_offsets": commit_point, "kafka_committed_offsets": kafka_committed,
                 "result_records_written_while_down": waiting},
    ), finish=lambda fault: _receiver_resumed(fault, restarted))


def _receiver_resumed(fault: Fault, restarted) -> None:
    found = _RESUMED.search(restarted.log_text())
    fault.details["resumed_with_results"] = int(found.group(1)) if found else None


# --- broker-restart ----------------------------------------------------------------------------

def broker_restart(run: ScenarioRun) -> None:
    """Stop the broker (controlled shutdown) and start it again on the same ports and data while the senders
    produce: their idempotent producers retry, and nothing is written twice."""
    stack = run.stack
    if stack.broker is None:
        raise RuntimeError("broker-restart needs a broker the stack started itself")
    run.wait_fault_point()
    inputs = [stack.kafka.nbbo_topic, stack.kafka.orders_topic]
    before = _by_topic(end_offsets(stack.kafka.bootstrap_servers, inputs))
    pid_before = stack.broker.status().pid
    acknowledged_before = run.acknowledged()
    when = run.now()
    run.note(f"broker-restart: stopping the broker (pid {pid_before}) with {acknowledged_before:,} stream messages "
             f"acknowledged")
    down = run.settings.broker_down_seconds
    stop_seconds, start_seconds = stack.restart_broker(down)
    pid_after = stack.broker.status().pid
    after = _by_topic(end_offsets(stack.kafka.bootstrap_servers, inputs))
    run.note(f"broker-restart: broker back as pid {pid_after} after {stop_seconds + down + start_seconds:.1f} s "
             f"(stop {stop_seconds:.1f} s, down {down:.1f} s, start {start_seconds:.1f} s)")
    run.record(Fault(
        what="controlled stop (SIGTERM) and start of the Kafka broker while both senders produce",
        when=when,
        recovery="started again on the same ports and data directory; the senders' idempotent producers retried "
                 "what the broker had not acknowledged",
        details={"service": "broker", "broker_pid_before": pid_before, "broker_pid_after": pid_after,
                 "stop_seconds": round(stop_seconds, 1), "kept_down_seconds": down,
                 "start_seconds": round(start_seconds, 1),
                 "stream_messages_acknowledged_at_stop": acknowledged_before,
                 "input_end_offsets_before": before, "input_end_offsets_after": after},
    ))


SCENARIOS: dict[str, Callable[[ScenarioRun], None]] = {
    "job-kill": job_kill,
    "receiver-kill": receiver_kill,
    "broker-restart": broker_restart,
}
