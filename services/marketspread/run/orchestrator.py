"""`marketspread run`: the whole slice on this machine, from files to a verdict.

Checks the input files, brings up the stack (stack.py), sends the initial NBBO and then the
two streams (one after the other with `--sequential`, else concurrently on a shared schedule),
waits until the job has processed and the receiver consumed everything, stops what it started
and compares the rejections with the reference model's.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..fixish import Nbbo, Order
from ..metrics import Samples
from ..settings import KafkaSettings
from .inputs import InputFile, expected_results, load_input
from .settings import RunSettings
from .stack import Stack
from .summary import compare, read_results, versions, write_summary

__all__ = ["Run"]

OUTPUT_FILES = ("rejections.msg", "dead-letters.msg", "malformed.msg", "stats.json", "summary.json")


class Run:
    """`during_streams(stack, senders)` runs once the stream senders have started (the NBBO phase when sequential),
    `before_stop(stack)` once everything is processed and received, before the services stop: the places
    for a test or a tool to act on the live pipeline (inject records, read metrics)."""

    def __init__(self, settings: RunSettings, during_streams: Callable[[Stack, list], None] | None = None,
                 before_stop: Callable[[Stack], None] | None = None):
        self.settings = settings
        self.during_streams = during_streams
        self.before_stop = before_stop
        self.out = Path(settings.out)
        kafka = KafkaSettings(**{name: getattr(settings, name) for name in KafkaSettings.model_fields})
        self.stack = Stack(kafka, self.out, time.monotonic() + settings.timeout_seconds, settings.kafka_port,
                           settings.kafka_controller_port)
        self.senders = []
        self.sent_before = 0  # messages of senders that have finished (their metrics are gone)
        self._stop_progress = threading.Event()

    def execute(self) -> dict:
        s, stack = self.settings, self.stack
        started = time.time()
        initial = load_input(s.initial_nbbo, Nbbo)
        nbbo = load_input(s.nbbo, Nbbo)
        orders = load_input(s.orders, Order)
        self.out.mkdir(parents=True, exist_ok=True)
        for stale in OUTPUT_FILES:
            (self.out / stale).unlink(missing_ok=True)
        shutil.rmtree(self.out / "checkpoint", ignore_errors=True)

        progress = threading.Thread(target=self._show_progress, daemon=True)
        try:
            stack.ensure_broker()
            stack.fresh_topics(s.partitions)
            receiver = stack.start_receiver()
            stack.start_job(self.out / "checkpoint", shuffle_partitions=s.shuffle_partitions,
                            trigger_interval=s.trigger_interval, max_offsets_per_trigger=s.max_offsets_per_trigger)
            receiver.wait_metrics(stack.left())
            stack.status = "starting the job"
            stack.wait_job_ready()
            if s.progress:
                progress.start()

            stack.status = "initial NBBO"
            self._send([("nbbo", initial, 0.0)], start_at=0.0)
            stack.wait_processed()
            stream_start = time.time()
            if s.sequential:
                for stream, source in (("nbbo", nbbo), ("orders", orders)):
                    stack.status = f"sequential: {stream}"
                    self._send([(stream, source, s.rate)], start_at=s.start_at, streaming=stream == "nbbo")
                    stack.wait_processed()
            else:
                stack.status = "concurrent: nbbo + orders"
                # A shared t0 slightly ahead gives both senders the same schedule of intended times.
                stream_start = s.start_at or time.time() + 2.0
                self._send([("nbbo", nbbo, s.rate), ("orders", orders, s.rate)], start_at=stream_start,
                           streaming=True)
                stack.wait_processed()
            stream_end = time.time()
            stack.status = "waiting for the receiver"
            stack.wait_received()
            if self.before_stop is not None:
                self.before_stop(stack)
            stack.status = "stopping"
        finally:
            self._stop_progress.set()
            if progress.is_alive():
                progress.join(2)
            stack.stop_all()

        comparison = compare(expected_results(initial, nbbo, orders, s.sequential, s.batch_size),
                             read_results(self.out / "rejections.msg"), quotes_strict=s.sequential)
        stats = self._receiver_stats()
        stream_messages = len(nbbo) + len(orders)
        summary = {
            "sequential": s.sequential, "record_format": s.record_format, "partitions": s.partitions,
            "rate": s.rate, "batch_size": s.batch_size,
            "inputs": {"initial_nbbo": str(initial.path), "nbbo": str(nbbo.path), "orders": str(orders.path)},
            "sent": {"initial_nbbo": len(initial), "nbbo": len(nbbo), "orders": len(orders),
                     "total": len(initial) + stream_messages},
            **comparison.as_dict(),
            "dead_letters": int(sum((stats.get("dead_letters") or {}).values())),
            "throughput_msgs_per_s": stream_messages / max(stream_end - stream_start, 1e-9),
            "stream_seconds": stream_end - stream_start,
            "latency_ms": stats.get("latency_ms") or {},
            "wall_seconds": time.time() - started,
            "out": str(self.out),
            "versions": versions(),
        }
        write_summary(self.out / "summary.json", summary)
        return summary

    def _send(self, streams: list[tuple[str, InputFile, float]], start_at: float, streaming: bool = False) -> None:
        self.senders = [self.stack.start_sender(stream, source.path, rate, self.settings.batch_size, start_at)
                        for stream, source, rate in streams]
        if streaming and self.during_streams is not None:
            self.during_streams(self.stack, self.senders)
        for sender in self.senders:
            self.stack.wait_finished(sender)
        self.senders = []
        self.sent_before += sum(len(source) for _, source, _ in streams)

    def _receiver_stats(self) -> dict:
        try:
            return json.loads((self.out / "stats.json").read_text())
        except (FileNotFoundError, ValueError):
            return {}

    # -- the live line ---------------------------------------------------------------------

    def _show_progress(self) -> None:
        tty = sys.stderr.isatty()
        began = time.monotonic()
        last_print = 0.0
        while not self._stop_progress.wait(0.5):
            now = time.monotonic()
            if not tty and now - last_print < 10:
                continue
            last_print = now
            line = self._progress_line(now - began)
            print(("\r" + line.ljust(120)) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
        if tty:
            print(file=sys.stderr)

    def _progress_line(self, elapsed: float) -> str:
        sent = self.sent_before + sum((sender.metrics() or Samples()).total("marketspread_sender_messages_total")
                                      for sender in self.senders)
        job = self.stack.service("job").metrics() or Samples()
        receiver = self.stack.service("receiver").metrics() or Samples()
        return (f"[{elapsed:6.1f}s] {self.stack.status:<26} sent {sent:>11,.0f} | job "
                f"{job.total('marketspread_job_input_messages_total'):>11,.0f} msgs, lag "
                f"{job.value('marketspread_job_offsets_behind_latest', 0, stat='max'):>8,.0f} | rejections "
                f"{receiver.total('marketspread_receiver_rejections_total'):>7,.0f}")
