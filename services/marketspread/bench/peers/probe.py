"""The passthrough's latency probe: receive time - record timestamp for every forwarded record.

The passthrough forwards order records unchanged, so a record's timestamp is still its
intended send time. The probe reads every partition of the passthrough topic from the start
and appends, per record, (receive time ns, record timestamp ms, messages in it) to
`probe.bin`; the harness computes the percentiles with the same nearest-rank code as the
receiver, each record weighted by its messages. confluent-kafka with a 5 ms batch wait, so
the receive time is late by at most that (plus the client's fetch).

Metrics: `marketspread_probe_consumed_offset{topic,partition}` and
`marketspread_probe_messages_total`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np

from ...fixish import ORDER
from ..settings import ProbeSettings
from .counters import PeerCounters

__all__ = ["run", "PROBE_FILE", "PROBE_DTYPE", "read_probe"]

log = logging.getLogger(__name__)

PROBE_FILE = "probe.bin"
PROBE_DTYPE = np.dtype([("receive_ns", "<i8"), ("timestamp_ms", "<i8"), ("messages", "<i4")])


def read_probe(out_dir: str | Path) -> np.ndarray:
    path = Path(out_dir) / PROBE_FILE
    if not path.exists():
        return np.empty(0, PROBE_DTYPE)
    data = path.read_bytes()
    return np.frombuffer(data[:len(data) - len(data) % PROBE_DTYPE.itemsize], dtype=PROBE_DTYPE)


def run(settings: ProbeSettings, stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "marketspread-probe",
                         "enable.auto.commit": False, "client.id": "marketspread-probe"})
    counters = PeerCounters(prefix="marketspread_probe")
    counters.serve(settings.metrics_port)
    partitions = sorted(consumer.list_topics(settings.topic, timeout=30).topics[settings.topic].partitions)
    consumer.assign([TopicPartition(settings.topic, p, OFFSET_BEGINNING) for p in partitions])
    for p in partitions:
        counters.offsets[(settings.topic, p)] = 0
    counters.ready = 1
    framed = settings.record_format == "framed"
    out = Path(settings.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / PROBE_FILE, "wb") as file:
        try:
            while not stop.is_set():
                batch = consumer.consume(num_messages=10_000, timeout=0.005)
                if not batch:
                    continue
                receive_ns = time.time_ns()
                rows = np.empty(len(batch), PROBE_DTYPE)
                rows["receive_ns"] = receive_ns
                kept = 0
                for record in batch:
                    if record.error():
                        continue
                    value = record.value() or b""
                    rows[kept] = (receive_ns, record.timestamp()[1], len(value) // ORDER.framed_size if framed else 1)
                    kept += 1
                    counters.offsets[(record.topic(), record.partition())] = record.offset() + 1
                file.write(rows[:kept].tobytes())
                file.flush()
                counters.records += kept
                counters.messages += int(rows["messages"][:kept].sum())
        finally:
            consumer.close()
            counters.shutdown()
