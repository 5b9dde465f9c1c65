"""`marketspread run`: the whole slice on this machine, from files to a verdict.

Broker (started if none answers), fresh topics, then the real services as child processes —
receiver, Spark job, senders — each watched through its own /metrics. "Processed" means the
job's committed offsets have reached the end of what was sent; "received" means the receiver's
consumed offsets have reached the end of the output topics. Everything it started, it stops.
"""

from __future__ import annotations

import shutil
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

from ..errors import MarketSpreadError
from ..fixish import Nbbo, Order
from ..localkafka import BrokerSettings, LocalKafka, end_offsets, ensure_topics
from ..localkafka.topics import delete_topics
from ..metrics import Samples
from ..receiver.settings import ReceiverSettings
from ..sender.settings import SenderSettings
from .inputs import InputFile, expected_results, load_input
from .processes import ServiceFailed, ServiceProcess
from .settings import RunSettings
from .summary import compare, read_results, render, versions, write_summary

__all__ = ["Run", "RunTimeout"]

_SERVICE_START_TIMEOUT = 180  # a cold Spark session on 2 busy cores takes a while


class RunTimeout(MarketSpreadError):
    pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _offsets(samples: Samples | None, metric: str) -> dict[tuple[str, int], float]:
    if samples is None:
        return {}
    return {(labels["topic"], int(labels["partition"])): value for labels, value in samples.matching(metric)}


class Run:
    def __init__(self, settings: RunSettings):
        self.settings = settings
        self.out = Path(settings.out)
        self.logs = self.out / "logs"
        self.deadline = time.monotonic() + settings.timeout_seconds
        self.services: list[ServiceProcess] = []
        self.broker: LocalKafka | None = None
        self.status = "starting"
        self.senders: list[ServiceProcess] = []
        self.sent_before = 0  # messages of senders that have finished (their metrics are gone)
        self._stop_progress = threading.Event()

    # -- the run ---------------------------------------------------------------------------

    def execute(self) -> dict:
        s = self.settings
        started = time.time()
        initial = load_input(s.initial_nbbo, Nbbo)
        nbbo = load_input(s.nbbo, Nbbo)
        orders = load_input(s.orders, Order)
        self.out.mkdir(parents=True, exist_ok=True)
        for stale in ("rejections.msg", "dead-letters.msg", "malformed.msg", "stats.json", "summary.json"):
            (self.out / stale).unlink(missing_ok=True)
        shutil.rmtree(self.out / "checkpoint", ignore_errors=True)

        progress = threading.Thread(target=self._show_progress, daemon=True)
        try:
            self._ensure_broker()
            self._fresh_topics()
            receiver = self._start_receiver()
            job = self._start_job()
            receiver.wait_metrics(self._left())
            self.status = "starting the job"
            job.wait_metrics(self._left(_SERVICE_START_TIMEOUT),
                             ready=lambda m: m.value("marketspread_job_query_active") == 1.0)
            if s.progress:
                progress.start()

            self.status = "initial NBBO"
            self._send([("nbbo", initial, 0.0)], start_at=0.0)
            self._wait_processed()
            stream_start = time.time()
            if s.sequential:
                for stream, source in (("nbbo", nbbo), ("orders", orders)):
                    self.status = f"sequential: {stream}"
                    self._send([(stream, source, s.rate)], start_at=0.0)
                    self._wait_processed()
            else:
                self.status = "concurrent: nbbo + orders"
                # A shared t0 slightly ahead gives both senders the same schedule of intended times.
                stream_start = time.time() + 2.0
                self._send([("nbbo", nbbo, s.rate), ("orders", orders, s.rate)], start_at=stream_start)
                self._wait_processed()
            stream_end = time.time()
            self.status = "waiting for the receiver"
            self._wait_received(receiver)
            self.status = "stopping"
            receiver.stop()
            job.stop(60)
        finally:
            self._stop_progress.set()
            if progress.is_alive():
                progress.join(2)
            self._stop_all()

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

    # -- steps -----------------------------------------------------------------------------

    def _ensure_broker(self) -> None:
        s = self.settings
        host, _, port = s.bootstrap_servers.split(",")[0].rpartition(":")
        broker = LocalKafka(BrokerSettings(host=host or "127.0.0.1", port=int(port),
                                           controller_port=s.kafka_controller_port, start_timeout_seconds=5))
        from ..localkafka import port_in_use

        if port_in_use(broker.settings.host, broker.settings.port):
            self.status = "checking the broker"
            try:
                broker.wait_ready()
                return
            except MarketSpreadError:
                raise MarketSpreadError(f"something listens on {s.bootstrap_servers} but it is not a Kafka broker "
                                        "that answers; stop it or pass --bootstrap-servers") from None
        if host not in ("127.0.0.1", "localhost", ""):
            raise MarketSpreadError(f"no Kafka broker answers at {s.bootstrap_servers}, and a local one can only be "
                                    "started on loopback")
        self.status = "starting Kafka"
        self.broker = LocalKafka(BrokerSettings(host=broker.settings.host, port=int(port),
                                                controller_port=s.kafka_controller_port))
        self.broker.start()

    def _fresh_topics(self) -> None:
        s = self.settings
        self.status = "creating topics"
        names = [s.nbbo_topic, s.orders_topic, s.rejections_topic, s.dead_letter_topic]
        # A run starts from empty topics: the job reads from the earliest offset.
        delete_topics(s.bootstrap_servers, names)
        ensure_topics(s.bootstrap_servers, names, s.partitions)

    def _kafka_fields(self) -> dict:
        from ..settings import KafkaSettings

        return {name: getattr(self.settings, name) for name in KafkaSettings.model_fields}

    def _start_receiver(self) -> ServiceProcess:
        port = _free_port()
        settings = ReceiverSettings(**self._kafka_fields(), group_id=f"marketspread-run-{uuid.uuid4().hex[:8]}",
                                    out_dir=str(self.out), metrics_port=port, stats_interval_seconds=1.0)
        return self._spawn("receiver", ["receiver", *settings.to_args()], port)

    def _start_job(self) -> ServiceProcess:
        from marketspread_job.settings import JobSettings

        s = self.settings
        port = _free_port()
        settings = JobSettings(**self._kafka_fields(), checkpoint_dir=str((self.out / "checkpoint").resolve()),
                               shuffle_partitions=s.shuffle_partitions, trigger_interval=s.trigger_interval,
                               max_offsets_per_trigger=s.max_offsets_per_trigger, metrics_port=port)
        return self._spawn("job", ["job", *settings.to_args()], port)

    def _spawn(self, name: str, command: list[str], port: int) -> ServiceProcess:
        service = ServiceProcess(name, command, self.logs, port).start()
        self.services.append(service)
        return service

    def _send(self, streams: list[tuple[str, InputFile, float]], start_at: float) -> None:
        senders = []
        for stream, source, rate in streams:
            port = _free_port()
            settings = SenderSettings(**self._kafka_fields(), stream=stream, file=str(source.path), rate=rate,
                                      batch_size=self.settings.batch_size, start_at=start_at, metrics_port=port)
            senders.append(self._spawn(f"sender-{stream}-{source.path.stem}", ["sender", *settings.to_args()], port))
        self.senders = senders
        for sender in senders:
            self._watch(lambda: not sender.running(), f"{sender.name} to finish")
            sender.wait(5)
        self.senders = []
        self.sent_before += sum(len(source) for _, source, _ in streams)

    def _wait_processed(self) -> None:
        """Until the job's committed offsets reach the end of both input topics."""
        s = self.settings
        target = end_offsets(s.bootstrap_servers, [s.nbbo_topic, s.orders_topic])
        job = self._service("job")

        def done() -> bool:
            committed = _offsets(job.metrics(), "marketspread_job_committed_offset")
            return all(committed.get(tp, 0) >= offset for tp, offset in target.items())

        self._watch(done, "the job to process everything sent")

    def _wait_received(self, receiver: ServiceProcess) -> None:
        s = self.settings
        target = end_offsets(s.bootstrap_servers, [s.rejections_topic, s.dead_letter_topic])

        def done() -> bool:
            consumed = _offsets(receiver.metrics(), "marketspread_receiver_consumed_offset")
            return all(consumed.get(tp, 0) >= offset for tp, offset in target.items())

        self._watch(done, "the receiver to consume every result")

    def _watch(self, condition, what: str) -> None:
        while not condition():
            for service in self.services:
                service.check()
            if time.monotonic() > self.deadline:
                raise RunTimeout(f"timed out after {self.settings.timeout_seconds:.0f} s waiting for {what}; "
                                 f"logs in {self.logs}")
            time.sleep(0.2)

    def _service(self, name: str) -> ServiceProcess:
        return next(s for s in self.services if s.name == name)

    def _left(self, cap: float = 60) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))

    def _stop_all(self) -> None:
        for service in reversed(self.services):
            try:
                service.stop(60)
            except Exception:  # stopping the rest matters more than one failure here
                service.kill()
        if self.broker is not None:
            self.broker.stop()

    def _receiver_stats(self) -> dict:
        import json

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
        job = self._service("job").metrics() or Samples()
        receiver = self._service("receiver").metrics() or Samples()
        return (f"[{elapsed:6.1f}s] {self.status:<26} sent {sent:>11,.0f} | job "
                f"{job.total('marketspread_job_input_messages_total'):>11,.0f} msgs, lag "
                f"{job.value('marketspread_job_offsets_behind_latest', 0, stat='max'):>8,.0f} | rejections "
                f"{receiver.total('marketspread_receiver_rejections_total'):>7,.0f}")
