"""Back-pressure: senders faster than the job, whose micro-batches are capped by maxOffsetsPerTrigger.

A real `marketspread run` (broker, Spark job process, receiver, two senders) with the job's
`max_offsets_per_trigger` at 2,000 records and two senders at 15,000 msgs/s each: the job
cannot keep up, so the backlog waits in Kafka instead of in the job. While the run goes on, a
sampler reads the job's own lag gauge (marketspread_job_offsets_behind_latest) and the memory of
the job's whole process tree (the Python driver, the JVM, PySpark's Python workers), every quarter
of a second. Memory is PSS (psutil): pyspark forks its workers from a daemon, and the pages they
share would count twice or three times in a sum of RSS.

Specified: no micro-batch reads more than the cap (from the job's log of every batch); the lag
grows while the senders run, by many batches' worth; the memory stays bounded meanwhile: after
warm-up, measured as the moment the job has completed 5 micro-batches of the stream (by then the
JVM has compiled the hot path and the Python workers are up), the tree's memory never exceeds its
warm-up value by more than 25% (MEMORY_GROWTH: headroom for the JIT's code, thread stacks and the
allocators; the heap is resident whole from the start, local_heap), while the lag grows to tens of
batches, so nothing scales with the backlog; once the senders stop the job catches up (the lag
gauge back to 0, committed offsets at the topics' ends) and the rejections are exactly the
reference model's.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from marketspread.bench.sampling import mid_spawn
from marketspread.cli import main
from marketspread.metrics import Samples
from marketspread.run.orchestrator import Run
from marketspread.run.settings import RunSettings
from marketspread.run.stack import offsets_from

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

STREAM = 80_000  # per stream
RATE = 15_000  # per stream: 30,000 msgs/s in all, more than twice what the capped job can take
CAP = 2_000  # maxOffsetsPerTrigger: records per micro-batch, both topics together
WARM_UP_BATCHES = 5
MEMORY_GROWTH = 1.25
_BATCH = re.compile(r"batch (\d+): (\d+) rows")


def _mib(sample: dict) -> str:
    parts = ", ".join(f"{name} {pss / 2**20:.0f}" for name, pss in sample["processes"].items())
    return f"{sample['memory'] / 2**20:.0f} MiB ({parts})"


class Sampler(threading.Thread):
    """Samples (seconds, senders running, lag max, batches completed, job tree PSS) until stopped."""

    def __init__(self, stack, senders):
        super().__init__(daemon=True)
        self.stack, self.senders = stack, senders
        self.job = stack.service("job")
        self.samples: list[dict] = []
        self.halt = threading.Event()

    def run(self) -> None:
        began = time.monotonic()
        while not self.halt.wait(0.25):
            metrics = self.job.metrics() or Samples()
            processes = {}
            for process in self.job.tree():
                try:
                    if mid_spawn(process):
                        continue
                    processes[f"{process.name()}[{process.pid}]"] = process.memory_full_info().pss
                except Exception:  # a Python worker that just exited
                    pass
            self.samples.append({
                "t": time.monotonic() - began,
                "sending": any(sender.running() for sender in self.senders),
                "lag": metrics.value("marketspread_job_offsets_behind_latest", stat="max"),
                "batches": metrics.value("marketspread_job_batches_total", 0.0),
                "memory": sum(processes.values()),
                "processes": processes,
            })


def test_a_capped_job_lets_lag_grow_with_bounded_memory_and_catches_up_exactly(tmp_path, kafka_topics, wallaroo_data):
    topics = kafka_topics(partitions=2)
    data = tmp_path / "data"
    assert main(["generate", "--symbols", "350", "--nbbo", str(STREAM), "--orders", str(STREAM), "--seed", "31",
                 "--reject-ratio", "0.002", "--out", str(data)]) == 0
    seen: dict = {}

    def during_streams(stack, senders) -> None:
        seen["sampler"] = sampler = Sampler(stack, senders)
        seen["batches_before"] = (stack.service("job").metrics() or Samples()).value("marketspread_job_batches_total")
        sampler.start()

    def before_stop(stack) -> None:
        seen["sampler"].halt.set()
        seen["sampler"].join(5)
        seen["job"] = stack.service("job").metrics()

    settings = RunSettings(**topics.model_dump(), initial_nbbo=str(data / "initial-nbbo.msg"),
                           nbbo=str(data / "nbbo.msg"), orders=str(data / "orders.msg"), out=str(tmp_path / "out"),
                           rate=RATE, batch_size=500, partitions=2, max_offsets_per_trigger=CAP, progress=False,
                           timeout_seconds=600)
    summary = Run(settings, during_streams=during_streams, before_stop=before_stop).execute()
    samples = seen["sampler"].samples
    (tmp_path / "samples.txt").write_text("\n".join(map(str, samples)))

    # Every micro-batch stayed within the cap.
    batches = [(int(b), int(rows)) for b, rows in _BATCH.findall((tmp_path / "out" / "logs" / "job.log").read_text())]
    assert sum(rows for _, rows in batches) == 350 + 2 * STREAM
    assert max(rows for _, rows in batches) <= CAP
    # The lag grew while the senders ran: by many batches' worth.
    sending = [s for s in samples if s["sending"] and s["lag"] is not None]
    assert max(s["lag"] for s in sending) - min(s["lag"] for s in sending) >= 5 * CAP / 4  # per partition
    # Memory stayed bounded: after warm-up (5 batches of the stream done) the job tree's PSS grew by at most 25%.
    warm = next(i for i, s in enumerate(samples) if s["batches"] >= seen["batches_before"] + WARM_UP_BATCHES)
    warm_peak = max(samples[:warm + 1], key=lambda s: s["memory"])
    after = samples[warm:]
    peak = max(after, key=lambda s: s["memory"])
    assert peak["memory"] <= MEMORY_GROWTH * warm_peak["memory"], \
        f"PSS {_mib(peak)} at {peak['t']:.1f} s after warm-up at {_mib(warm_peak)} (samples.txt in {tmp_path})"
    assert max(s["lag"] or 0 for s in after) >= 10 * CAP / 4  # ... while the backlog reached tens of batches
    # Once the senders stopped, the job caught up: lag 0, committed offsets at the topics' ends, exact results.
    job = seen["job"]
    assert job.value("marketspread_job_offsets_behind_latest", stat="max") == 0
    assert sum(offsets_from(job, "marketspread_job_committed_offset").values()) == 350 + 2 * STREAM
    assert job.value("marketspread_job_input_messages_total") == 350 + 2 * STREAM
    assert summary["correct"] and summary["missing"] == 0 and summary["unexpected"] == 0
    assert summary["rejections_unique"] == summary["rejections_expected"] > 0
