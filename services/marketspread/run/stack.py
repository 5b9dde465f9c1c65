"""The local stack as building blocks: broker, topics, and the services as child processes.

`marketspread run`, `chaos` and `bench` all drive the same stack: a broker (started if none
answers), fresh topics, the receiver, the Spark job and senders, each a real process watched
through its own /metrics. "Processed" means the job's committed offsets have reached the end
of what was sent; "received" means the receiver's consumed offsets have reached the end of the
output topics. Whatever the stack started, `stop_all` stops.

For fault injection (`marketspread chaos`) a service can be killed for real (`kill`: SIGKILL of
its whole process tree) and started again with the same command line (`restart`), and a broker
the stack started itself can be stopped and started again on the same ports and data
(`restart_broker`). A `supervisor` callback, when set, runs at every poll of every wait, before
the stack fails fast on a dead service: the place to notice and recover from a crash.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ..errors import MarketSpreadError
from ..localkafka import BrokerSettings, LocalKafka, end_offsets, ensure_topics, port_in_use
from ..localkafka.topics import delete_topics
from ..metrics import Samples
from ..receiver.settings import ReceiverSettings
from ..sender.settings import SenderSettings
from ..settings import KafkaSettings
from .processes import ServiceProcess

__all__ = ["Stack", "StackTimeout", "free_port", "offsets_from"]


class StackTimeout(MarketSpreadError):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def offsets_from(samples: Samples | None, metric: str) -> dict[tuple[str, int], float]:
    """A per-(topic, partition) offset gauge as a dict."""
    if samples is None:
        return {}
    return {(labels["topic"], int(labels["partition"])): value for labels, value in samples.matching(metric)}


class Stack:
    def __init__(self, kafka: KafkaSettings, out: Path, deadline: float, kafka_port: int = 9092,
                 kafka_controller_port: int = 9093, broker_run_dir: Path | None = None, broker_heap: str = "1g",
                 admin_bootstrap_servers: str | None = None):
        self.kafka = kafka
        # The stack's own topic and offset requests are plain kafka-python admin calls; when the
        # services talk TLS, they go to the broker's plaintext listener instead.
        self.admin_bootstrap_servers = admin_bootstrap_servers or kafka.bootstrap_servers
        self.out = out
        self.logs = out / "logs"
        self.deadline = deadline
        self.kafka_port = kafka_port
        self.kafka_controller_port = kafka_controller_port
        # Where a broker this stack starts keeps its data, config and log (default: the shared local one).
        self.broker_run_dir = broker_run_dir
        self.broker_heap = broker_heap
        self.services: list[ServiceProcess] = []
        self.retired: list[ServiceProcess] = []  # killed (or crashed) processes, replaced by a restart
        self.broker: LocalKafka | None = None  # set only when this stack started it
        self.supervisor: Callable[[], None] | None = None
        self.status = "starting"

    # -- broker and topics -----------------------------------------------------------------

    def ensure_broker(self) -> None:
        host, _, port = self.kafka.bootstrap_servers.split(",")[0].rpartition(":")
        settings = BrokerSettings(host=host or "127.0.0.1", port=int(port),
                                  controller_port=self.kafka_controller_port, start_timeout_seconds=5,
                                  run_dir=str(self.broker_run_dir.resolve()) if self.broker_run_dir else "",
                                  heap=self.broker_heap)
        if port_in_use(settings.host, settings.port):
            self.status = "checking the broker"
            try:
                LocalKafka(settings).wait_ready()
                return
            except MarketSpreadError:
                raise MarketSpreadError(f"something listens on {self.kafka.bootstrap_servers} but it is not a Kafka "
                                        "broker that answers; stop it or pass --bootstrap-servers") from None
        if host not in ("127.0.0.1", "localhost", ""):
            raise MarketSpreadError(f"no Kafka broker answers at {self.kafka.bootstrap_servers}, and a local one can "
                                    "only be started on loopback")
        self.status = "starting Kafka"
        self.broker = LocalKafka(settings.model_copy(update={"start_timeout_seconds": 90}))
        self.broker.start()

    def restart_broker(self, down_seconds: float = 0.0) -> tuple[float, float]:
        """Stop the broker this stack started (controlled shutdown), leave it down `down_seconds`, and start
        it again on the same ports and data; return how long the stop and the start took (s)."""
        if self.broker is None:
            raise MarketSpreadError("only a broker this stack started itself can be restarted")
        began = time.monotonic()
        self.broker.stop()
        stopped = time.monotonic()
        time.sleep(down_seconds)
        starting = time.monotonic()
        self.broker.start()
        return stopped - began, time.monotonic() - starting

    def fresh_topics(self, partitions: int) -> None:
        self.status = "creating topics"
        names = self.topic_names()
        # A run starts from empty topics: the job reads from the earliest offset.
        delete_topics(self.admin_bootstrap_servers, names)
        ensure_topics(self.admin_bootstrap_servers, names, partitions)

    def topic_names(self) -> list[str]:
        k = self.kafka
        return [k.nbbo_topic, k.orders_topic, k.rejections_topic, k.dead_letter_topic]

    def kafka_fields(self) -> dict:
        return {name: getattr(self.kafka, name) for name in KafkaSettings.model_fields}

    # -- services --------------------------------------------------------------------------

    def spawn(self, name: str, command: list[str], port: int) -> ServiceProcess:
        service = ServiceProcess(name, command, self.logs, port).start()
        self.services.append(service)
        return service

    def service(self, name: str) -> ServiceProcess:
        """The newest process of that name (a restarted service replaces its predecessor)."""
        return next(s for s in reversed(self.services) if s.name == name)

    def retire(self, service: ServiceProcess) -> None:
        """Take a dead process out of the stack's watch (it is kept in `retired`)."""
        self.services.remove(service)
        self.retired.append(service)

    def kill(self, name: str) -> ServiceProcess:
        """SIGKILL the newest process of that name and its whole process tree, as a crash would."""
        service = self.service(name)
        service.kill()
        self.retire(service)
        return service

    def restart(self, service: ServiceProcess) -> ServiceProcess:
        """The same command line again (same settings, metrics port, log file): a restarted pod."""
        if service in self.services:
            self.retire(service)
        return self.spawn(service.name, service.command, service.metrics_port)

    def start_receiver(self, group_id: str | None = None, **settings) -> ServiceProcess:
        port = free_port()
        receiver = ReceiverSettings(**self.kafka_fields(),
                                    group_id=group_id or f"marketspread-run-{uuid.uuid4().hex[:8]}",
                                    out_dir=str(self.out), metrics_port=port, stats_interval_seconds=1.0, **settings)
        return self.spawn("receiver", ["receiver", *receiver.to_args()], port)

    def start_job(self, checkpoint: Path, **settings) -> ServiceProcess:
        from marketspread_job.settings import JobSettings

        port = free_port()
        job = JobSettings(**self.kafka_fields(), checkpoint_dir=str(checkpoint.resolve()), metrics_port=port,
                          **settings)
        return self.spawn("job", ["job", *job.to_args()], port)

    def wait_job_ready(self, timeout: float = 180) -> None:
        # A cold Spark session on 2 busy cores takes a while.
        self.service("job").wait_metrics(self.left(timeout),
                                         ready=lambda m: m.value("marketspread_job_query_active") == 1.0)

    def start_sender(self, stream: str, file: Path, rate: float, batch_size: int, start_at: float = 0.0,
                     name: str | None = None, **settings) -> ServiceProcess:
        port = free_port()
        sender = SenderSettings(**self.kafka_fields(), stream=stream, file=str(file), rate=rate,
                                batch_size=batch_size, start_at=start_at, metrics_port=port, **settings)
        return self.spawn(name or f"sender-{stream}-{Path(file).stem}", ["sender", *sender.to_args()], port)

    # -- waiting ---------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[], bool], what: str, poll: float = 0.2) -> None:
        """Poll `condition`; fail fast if a service died, or when the deadline passes."""
        while not condition():
            if self.supervisor is not None:
                self.supervisor()
            for service in self.services:
                service.check()
            if time.monotonic() > self.deadline:
                raise StackTimeout(f"timed out waiting for {what}; logs in {self.logs}")
            time.sleep(poll)

    def wait_finished(self, sender: ServiceProcess) -> None:
        self.wait_until(lambda: not sender.running(), f"{sender.name} to finish")
        sender.wait(5)

    def input_end(self) -> dict[tuple[str, int], int]:
        return end_offsets(self.admin_bootstrap_servers, [self.kafka.nbbo_topic, self.kafka.orders_topic])

    def processed(self, target: dict[tuple[str, int], int]) -> bool:
        """Whether the job's committed offsets have reached `target` on every input partition."""
        committed = offsets_from(self.service("job").metrics(), "marketspread_job_committed_offset")
        return all(committed.get(tp, 0) >= offset for tp, offset in target.items())

    def wait_processed(self) -> None:
        """Until the job has processed everything sent so far."""
        target = self.input_end()
        self.wait_until(lambda: self.processed(target), "the job to process everything sent")

    def wait_received(self) -> None:
        """Until the receiver has consumed every result and dead letter written so far."""
        target = end_offsets(self.admin_bootstrap_servers, [self.kafka.rejections_topic, self.kafka.dead_letter_topic])

        def done() -> bool:
            consumed = offsets_from(self.service("receiver").metrics(), "marketspread_receiver_consumed_offset")
            return all(consumed.get(tp, 0) >= offset for tp, offset in target.items())

        self.wait_until(done, "the receiver to consume every result")

    def left(self, cap: float = 60) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))

    # -- stopping --------------------------------------------------------------------------

    def stop_all(self) -> None:
        for service in reversed(self.services):
            try:
                service.stop(60)
            except Exception:  # stopping the rest matters more than one failure here
                service.kill()
        if self.broker is not None:
            self.broker.stop()
