"""One system on the stack, measured step by step at given rates.

`BrokerHandle` is the Kafka broker all sessions of one `marketspread bench` share: a private
one (own ports, own data directory under the output, deleted afterwards) unless
`--bootstrap-servers` names one. A `Session` puts one system on it with fresh topics: the output
consumer (receiver or probe), the system, then Wallaroo's initial NBBO sent and processed before
anything is measured. Each `step(rate, duration)` then runs two paced, generating senders (NBBO
and orders, half the rate each, a shared first intended send time), samples every half second
(senders, input end offsets, what the system has processed, what the output consumer has
received, CPU and RSS of every process tree), waits for the system to drain, and reads what the
receiver or probe recorded.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import numpy as np

from ..fixish import decode_order_results
from ..fixish.layout import ORDER_RESULT
from ..localkafka import BrokerSettings, LocalKafka, ensure_topics
from ..localkafka.topics import admin_client, delete_topics
from ..metrics import Samples
from ..receiver.files import RECEIVE_TIME_DTYPE, RECEIVE_TIMES, RESULTS
from ..run.processes import ServiceProcess
from ..run.stack import Stack, free_port, offsets_from
from ..settings import KafkaSettings
from .analysis import Outputs, Sample, StepData, probe_outputs_in_window, receiver_outputs_in_window
from .expected import StreamPart, expected_rejections
from .peers.probe import read_probe
from .progress import ProgressLine, human
from .sampling import TreeSampler, find_listener_pid
from .settings import BenchSettings, ProbeSettings
from .systems import SPECS, parse_job_settings, start_system

__all__ = ["BrokerHandle", "Session", "START_DELAY", "SAMPLE_INTERVAL"]

log = logging.getLogger(__name__)

# Seconds between starting a step's senders and their shared first intended send time: enough
# for the processes to start, so that they are not behind from their first batch.
START_DELAY = 5.0
SAMPLE_INTERVAL = 0.5
PSS_INTERVAL = 5.0  # memory drifts over minutes; reading PSS costs the system under test CPU
_SENT_LINE = re.compile(r"^sent ([\d,]+) (nbbo|orders) messages", re.MULTILINE)


class BrokerHandle:
    def __init__(self, settings: BenchSettings, out: Path):
        self.settings = settings
        self.run_dir = out / "kafka"
        self.broker: LocalKafka | None = None
        self.bootstrap = settings.bootstrap_servers
        self.pid: int | None = None

    @property
    def private(self) -> bool:
        return self.broker is not None

    def start(self) -> None:
        if self.bootstrap:
            port = int(self.bootstrap.split(",")[0].rpartition(":")[2])
            self.pid = find_listener_pid(port)
            return
        shutil.rmtree(self.run_dir / "data", ignore_errors=True)
        self.broker = LocalKafka(BrokerSettings(port=free_port(), controller_port=free_port(),
                                                run_dir=str(self.run_dir.resolve()), heap=self.settings.kafka_heap))
        status = self.broker.start()
        self.bootstrap = self.broker.bootstrap_servers
        self.pid = status.pid

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            # Gigabytes of benchmark records: keep the log, not the data.
            shutil.rmtree(self.run_dir / "data", ignore_errors=True)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


class Session:
    def __init__(self, broker: BrokerHandle, settings: BenchSettings, system: str, record_format: str, symbols: str,
                 out: Path, progress: ProgressLine):
        self.broker = broker
        self.settings = settings
        self.spec = SPECS[system]
        self.record_format = record_format
        self.symbols = symbols
        self.out = out
        self.progress = progress
        self.tag = _safe(f"{system}-{record_format}-{symbols}-{uuid.uuid4().hex[:6]}")
        self.kafka = KafkaSettings(
            bootstrap_servers=broker.bootstrap, nbbo_topic=f"{self.tag}.nbbo", orders_topic=f"{self.tag}.orders",
            rejections_topic=f"{self.tag}.rejections", dead_letter_topic=f"{self.tag}.dead-letters",
            record_format=record_format, shards=settings.shards)
        self.passthrough_topic = f"{self.tag}.passthrough"
        self.stack = Stack(self.kafka, out, time.monotonic() + 900)
        self.sampler = TreeSampler(pss_every=round(PSS_INTERVAL / SAMPLE_INTERVAL))
        self.system: ServiceProcess | None = None
        self.output: ServiceProcess | None = None
        self._offsets_client = None
        self._input_partitions: list = []
        self._output_partitions: list = []
        self._last: dict[str, Samples] = {}
        self.steps = 0

    # -- setting up ------------------------------------------------------------------------

    def __enter__(self) -> "Session":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _deadline(self, seconds: float) -> None:
        self.stack.deadline = time.monotonic() + seconds

    def start(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        s, k = self.settings, self.kafka
        # A session has topics of its own; a checkpoint or Quix state left here by an earlier
        # `make bench` names other topics, and Spark refuses to start from it.
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True)
        self._deadline(600)
        self._status("creating topics")
        ensure_topics(k.bootstrap_servers, [*self.stack.topic_names(), self.passthrough_topic], s.partitions)
        self._offsets_client = KafkaConsumer(bootstrap_servers=k.bootstrap_servers.split(","),
                                             client_id="marketspread-bench", enable_auto_commit=False)
        self._input_partitions = [TopicPartition(t, p) for t in (k.nbbo_topic, k.orders_topic)
                                  for p in range(s.partitions)]
        outputs = [self.passthrough_topic] if self.spec.output == "probe" else [k.rejections_topic,
                                                                                 k.dead_letter_topic]
        self._output_partitions = [TopicPartition(t, p) for t in outputs for p in range(s.partitions)]

        self._status("starting the output consumer")
        if self.spec.output == "receiver":
            self.output = self.stack.start_receiver()
        else:
            port = free_port()
            probe = ProbeSettings(**self.stack.kafka_fields(), topic=self.passthrough_topic,
                                  out_dir=str((self.out / "probe").resolve()), metrics_port=port)
            self.output = self.stack.spawn("probe", ["bench-probe", *probe.to_args()], port)
        self.output.wait_metrics(self.stack.left(120))
        self._status(f"starting {self.spec.name}")
        self.system = start_system(self.spec.name, self.stack, self.out, parse_job_settings(s.job_settings),
                                   passthrough_topic=self.passthrough_topic)
        self.sampler.track("broker", self.broker.pid)
        self.sampler.track(self.spec.name, self.system.pid, pss=True)
        self.sampler.track(self.spec.output, self.output.pid)
        self.sampler.track("harness", os.getpid(), recursive=False)

        self._status("initial NBBO")
        initial = self.out / "initial-nbbo.msg"
        initial.write_bytes(self._initial_nbbo())
        sender = self.stack.start_sender("nbbo", initial, 0.0, 10_000, name="initial-nbbo")
        self.stack.wait_finished(sender)
        self._wait_processed(self._end_offsets(self._input_partitions), "the initial NBBO to be processed")

    def _initial_nbbo(self) -> bytes:
        from ..generate import initial_nbbo, load_symbol_set

        return initial_nbbo(load_symbol_set(self.symbols))

    def stop(self) -> None:
        try:
            self.stack.stop_all()
        finally:
            if self._offsets_client is not None:
                self._offsets_client.close()
                self._offsets_client = None
            self._delete_topics()

    def _delete_topics(self) -> None:
        try:
            if self.broker.private:
                # Everything but Kafka's internal topics: ours and Quix's changelogs.
                admin = admin_client(self.kafka.bootstrap_servers)
                try:
                    names = [n for n in admin.list_topics() if not n.startswith("__")]
                finally:
                    admin.close()
            else:
                names = [*self.stack.topic_names(), self.passthrough_topic]
            if names:
                delete_topics(self.kafka.bootstrap_servers, names)
        except Exception as error:  # cleaning up must not hide the run's own outcome
            log.warning("could not delete the session's topics: %r", error)

    # -- reading the stack ------------------------------------------------------------------

    def _status(self, text: str) -> None:
        self.stack.status = text
        self.progress.show(f"[{self.spec.name} {self.record_format}]", None, text)

    def _end_offsets(self, partitions) -> dict[tuple[str, int], int]:
        result = self._offsets_client.end_offsets(partitions)
        return {(tp.topic, tp.partition): int(offset) for tp, offset in result.items()}

    def _metrics(self, service: ServiceProcess) -> Samples:
        """Current metrics, or the last ones seen (a scrape can fail on a busy machine, or after exit)."""
        samples = service.metrics()
        if samples is not None:
            self._last[service.name] = samples
        return self._last.get(service.name, Samples())

    def processed_offsets(self) -> dict[tuple[str, int], int]:
        inputs = {self.kafka.nbbo_topic, self.kafka.orders_topic}
        offsets = offsets_from(self._metrics(self.system), self.spec.processed_offset_metric)
        return {tp: int(v) for tp, v in offsets.items() if tp[0] in inputs}

    def _output_consumed(self) -> dict[tuple[str, int], int]:
        metric = ("marketspread_receiver_consumed_offset" if self.spec.output == "receiver"
                  else "marketspread_probe_processed_offset")
        return {tp: int(v) for tp, v in offsets_from(self._metrics(self.output), metric).items()}

    def _output_count(self) -> float:
        metric = ("marketspread_receiver_rejections_total" if self.spec.output == "receiver"
                  else "marketspread_probe_input_messages_total")
        return self._metrics(self.output).total(metric)

    @staticmethod
    def _reached(have: dict, target: dict) -> bool:
        return all(have.get(tp, 0) >= offset for tp, offset in target.items())

    def _wait_processed(self, target: dict, what: str) -> None:
        self.stack.wait_until(lambda: self._reached(self.processed_offsets(), target), what, poll=0.5)

    def _sample(self, senders: list[ServiceProcess]) -> Sample:
        sent = records = behind = 0.0
        for sender in senders:
            m = self._metrics(sender)
            sent += m.total("marketspread_sender_messages_total")
            records += m.total("marketspread_sender_records_total")
            behind = max([behind] + [v for _, v in m.matching("marketspread_sender_behind_schedule_seconds")])
        end = self._end_offsets(self._input_partitions)
        processed = self.processed_offsets()
        usage = self.sampler.sample()
        return Sample(
            t=time.time(), sent=sent, sent_records=records, behind=behind, end_records=sum(end.values()),
            processed_records=sum(processed.get(tp, 0) for tp in end),
            processed_messages=self._metrics(self.system).total(self.spec.processed_messages_metric),
            output=self._output_count(), cpu={n: u.cpu_seconds for n, u in usage.items()},
            rss={n: u.rss_bytes for n, u in usage.items()}, pss={n: u.pss_bytes for n, u in usage.items() if u.pss_bytes is not None},
            load=os.getloadavg()[0])

    # -- a step ----------------------------------------------------------------------------

    def step(self, rate: float, duration: float, reject_ratio: float, seed: int, label: str) -> StepData:
        s = self.settings
        k = s.senders_per_stream
        per_sender = rate / 2 / k
        batch = max(1, round(per_sender * s.batch_interval_ms / 1000))
        count = max(1, round(per_sender * duration))
        self.steps += 1
        self._deadline(duration * 3 + s.drain_timeout + 300)
        # Each step generates new data: its own seeds, so its order ids are its own.
        seeds = [seed + i for i in range(k)]
        start_at = time.time() + START_DELAY
        senders = []
        self.sampler.forget("senders")
        for i, pair_seed in enumerate(seeds):
            for stream in ("nbbo", "orders"):
                sender = self.stack.start_sender(
                    stream, "", per_sender, batch, start_at, name=f"{label}-{stream}-{i}", symbols=self.symbols,
                    seed=pair_seed, reject_ratio=reject_ratio, max_messages=count)
                senders.append(sender)
                self.sampler.track("senders", sender.pid)
        self.sampler.reset_peaks()
        heading = f"[{self.spec.name} {self.record_format} {human(rate)}/s {label}]"
        samples: list[Sample] = []
        give_up = start_at + duration * 1.5 + 15

        def record(phase: str, fraction: float | None) -> Sample:
            sample = self._sample(senders)
            samples.append(sample)
            lag = max(0, sample.end_records - sample.processed_records)
            self.progress.show(heading, fraction, f"{phase} sent {human(sample.sent)} processed "
                                                  f"{human(sample.processed_messages)} lag {human(lag)} rec "
                                                  f"out {human(sample.output)} load {sample.load:.1f}")
            return sample

        stopped_early = False
        while any(sender.running() for sender in senders):
            for sender in senders:
                sender.check()
            self.system.check()
            now = time.time()
            record("load", (now - start_at) / duration if now >= start_at else 0.0)
            if now > give_up and not stopped_early:
                log.warning("%s: the senders are far behind schedule; stopping them", label)
                for sender in senders:
                    sender.stop(30)
                stopped_early = True
            time.sleep(max(0.0, SAMPLE_INTERVAL - (time.time() - now)))
        for sender in senders:
            sender.wait(30)
        send_end = time.time()
        record("load", 1.0)

        # Drain: the system processes everything sent, the output consumer receives everything written.
        target = self._end_offsets(self._input_partitions)
        drain_start = time.time()
        drained, settled = False, 0
        while time.time() - drain_start < s.drain_timeout:
            now = time.time()
            self.system.check()
            record("drain", None)
            done = self._reached(self.processed_offsets(), target) and self._reached(
                self._output_consumed(), self._end_offsets(self._output_partitions))
            settled = settled + 1 if done else 0
            if settled >= 2:  # twice in a row: asynchronous producers have delivered
                drained = True
                break
            time.sleep(max(0.0, SAMPLE_INTERVAL - (time.time() - now)))
        drain_seconds = time.time() - drain_start

        sent = {"nbbo": 0, "orders": 0}
        for sender in senders:
            counted = _sent_from_log(sender)
            stream = "nbbo" if "-nbbo-" in sender.name else "orders"
            sent[stream] = None if counted is None or sent[stream] is None else sent[stream] + counted
        self._status("checking the results")
        outputs = self._outputs(start_at, duration, reject_ratio, seeds, senders, sent)
        peaks = {name: self.sampler.peak_rss(name) for name in self.sampler.names()}
        return StepData(label=label, system=self.spec.name, record_format=self.record_format, symbols=self.symbols,
                        reject_ratio=reject_ratio, rate=rate, duration=duration, start=start_at, send_end=send_end,
                        samples=samples, drained=drained, drain_seconds=drain_seconds, outputs=outputs, sent=sent,
                        batch_size=batch, senders_per_stream=k, peak_rss=peaks)

    def _outputs(self, start: float, duration: float, reject_ratio: float, seeds: list[int],
                 senders: list[ServiceProcess], sent: dict) -> Outputs:
        if self.spec.output == "probe":
            return probe_outputs_in_window(read_probe(self.out / "probe"), start, duration, sent["orders"])
        per_sender = {sender.name: _sent_from_log(sender) for sender in senders}
        parts = []
        for i, seed in enumerate(seeds):
            nbbo = per_sender.get(next(n for n in per_sender if n.endswith(f"-nbbo-{i}")))
            orders = per_sender.get(next(n for n in per_sender if n.endswith(f"-orders-{i}")))
            parts.append(None if nbbo is None or orders is None else StreamPart(seed, nbbo, orders))
        expected = None if None in parts else expected_rejections(self.symbols, reject_ratio, parts)
        results, receive = _receiver_files(self.out)
        return receiver_outputs_in_window(results, receive, start, duration, expected)


def _sent_from_log(sender: ServiceProcess) -> int | None:
    """Messages the sender had acknowledged when it finished: the last line of its report."""
    try:
        found = _SENT_LINE.findall(sender.log_file.read_text(errors="replace"))
    except OSError:
        return None
    return int(found[-1][0].replace(",", "")) if found else None


def _receiver_files(out: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every OrderResult the receiver wrote out and its receive time (ns)."""
    size = ORDER_RESULT.framed_size
    try:
        raw = (out / RESULTS).read_bytes()
        receive = np.frombuffer((out / RECEIVE_TIMES).read_bytes(), dtype=RECEIVE_TIME_DTYPE)
    except FileNotFoundError:
        return np.empty(0, ORDER_RESULT.framed_dtype), np.empty(0, np.int64)
    n = min(len(raw) // size, len(receive))
    if not n:
        return np.empty(0, ORDER_RESULT.framed_dtype), np.empty(0, np.int64)
    return decode_order_results(raw[:n * size], framed=True), receive[:n].astype(np.int64)

