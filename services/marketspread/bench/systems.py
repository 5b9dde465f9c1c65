"""The systems under test: how each starts on the stack, and how the harness reads its progress.

Every system reads the same two input topics in the same record format. What it has
*processed* is read from the system itself: the Spark job's committed offsets (the end of its
last completed micro-batch) and its decoded-message counter; each peer's processed offsets and
message counter (peers/counters.py). Its output is measured by the receiver (OrderResults on the
rejections topic: spark, plain, quix) or by the probe (the passthrough's forwarded orders).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import MarketSpreadError
from ..run.processes import ServiceProcess
from ..run.stack import Stack, free_port
from ..settings import KafkaSettings
from .peers.counters import INPUT_MESSAGES, PROCESSED_OFFSET, READY
from .settings import PeerSettings

__all__ = ["SystemSpec", "SPECS", "start_system", "parse_job_settings"]


@dataclass(frozen=True)
class SystemSpec:
    name: str
    output: str  # "receiver" or "probe"
    processed_offset_metric: str
    processed_messages_metric: str
    description: str


SPECS = {
    "spark": SystemSpec("spark", "receiver", "marketspread_job_committed_offset", "marketspread_job_input_messages_total",
                        "the PySpark job (ours): applyInPandasWithState, in-memory state store, local[2]"),
    "passthrough": SystemSpec("passthrough", "probe", PROCESSED_OFFSET, INPUT_MESSAGES,
                              "consume both topics, forward order records unchanged (confluent-kafka): the floor"),
    "plain": SystemSpec("plain", "receiver", PROCESSED_OFFSET, INPUT_MESSAGES,
                        "one kafka-python process, a dict, one message at a time"),
    "plain-bulk": SystemSpec("plain-bulk", "receiver", PROCESSED_OFFSET, INPUT_MESSAGES,
                             "plain, but each framed record decoded by the numpy bulk decoder first"),
    "quix": SystemSpec("quix", "receiver", PROCESSED_OFFSET, INPUT_MESSAGES,
                       "Quix Streams: concat of the two topics + stateful apply"),
}


def parse_job_settings(text: str) -> dict[str, str]:
    """'name=value,name=value' -> dict, refusing the fields the bench sets itself."""
    result = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise MarketSpreadError(f"--job-settings: {item!r} is not name=value")
        name = name.strip().replace("-", "_")
        if name in KafkaSettings.model_fields or name in ("checkpoint_dir", "metrics_port"):
            raise MarketSpreadError(f"--job-settings: {name} is set by the bench itself")
        result[name] = value.strip()
    return result


def start_system(name: str, stack: Stack, out: Path, job_settings: dict[str, str], timeout: float = 240,
                 passthrough_topic: str = "passthrough") -> ServiceProcess:
    """Start the system and return once it answers on /metrics (the Spark query is active)."""
    if name == "spark":
        job = stack.start_job(out / "checkpoint", **job_settings)
        stack.status = "starting the Spark job"
        stack.wait_job_ready(timeout)
        return job
    port = free_port()
    settings = PeerSettings(**stack.kafka_fields(), system=name, group_id=f"peer-{name}-{uuid.uuid4().hex[:8]}",
                            passthrough_topic=passthrough_topic, metrics_port=port,
                            state_dir=str((out / "quix-state").resolve()))
    peer = stack.spawn(f"peer-{name}", ["bench-peer", *settings.to_args()], port)
    stack.status = f"starting {name}"
    peer.wait_metrics(stack.left(timeout), ready=lambda m: m.value(READY) == 1.0)
    return peer
