"""Settings of the benchmark harness, of its peers and of the passthrough's latency probe."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..settings import KafkaSettings, RecordFormat, Settings

__all__ = ["SYSTEMS", "PEERS", "BenchSettings", "PeerSettings", "ProbeSettings", "WALLAROO_REJECT_RATIO"]

SYSTEMS = ("spark", "passthrough", "plain", "plain-bulk", "quix")
PEERS = ("passthrough", "plain", "plain-bulk", "quix")
WALLAROO_REJECT_RATIO = 5 / 350_000

System = Literal["spark", "passthrough", "plain", "plain-bulk", "quix"]


class BenchSettings(Settings):
    system: System = Field("spark", description="system under test: spark (ours), passthrough, plain or quix")
    all: bool = Field(False, description="the whole comparison (find-max and latency for all four, r3k for spark) "
                                         "and docs/benchmarks.md")
    quick: bool = Field(False, description="with --all: shorter steps and runs (less than half the time)")
    rate: float = Field(20_000, gt=0, description="offered load in messages per second, NBBO + orders (half each); "
                                                 "with --find-max the first rate tried")
    duration: float = Field(60, gt=0, description="seconds of load (one run)")
    record_format: RecordFormat = Field("framed", description="'message' (one fixish message per record) or "
                                                               "'framed' (runs of framed messages per record)")
    symbols: str = Field("350", description="symbol set: 350, 700, 1400, 2100, r3k or synthetic:N")
    reject_ratio: float = Field(WALLAROO_REJECT_RATIO, ge=0, le=1,
                                description="share of orders on rejecting symbols (Wallaroo: 1 in 70,000; a latency "
                                            "profile wants more samples, e.g. 0.01)")
    seed: int = Field(1, ge=0, description="generator seed of the first step (each step and sender adds to it)")
    find_max: bool = Field(False, description="raise the rate step by step (geometric, then bisection) until lag "
                                              "keeps growing; report the highest sustainable rate")
    step_duration: float = Field(30, gt=0, description="seconds of load per --find-max step")
    max_rate: float = Field(4_000_000, gt=0, description="highest rate --find-max tries")
    min_rate: float = Field(1_000, gt=0, description="lowest rate --find-max tries")
    factor: float = Field(2.0, gt=1, description="--find-max: rate multiplier before the first failure")
    precision: float = Field(0.10, gt=0, description="--find-max: stop when failing/passing rates are this close")
    max_steps: int = Field(7, ge=1, description="--find-max: at most this many steps")
    partitions: int = Field(2, ge=1, description="partitions of every topic")
    shards: int = Field(KafkaSettings.model_fields["shards"].default, ge=1,
                        description="state shards (framed record keys); as the job's setting")
    batch_interval_ms: float = Field(10, gt=0, description="senders send a batch every this many ms "
                                                           "(batch size = rate per stream * interval)")
    senders_per_stream: int = Field(1, ge=1, description="sender processes per stream (each its own seed)")
    drain_timeout: float = Field(90, gt=0, description="after the load, wait at most this long for the system to "
                                                       "process and the receiver to receive everything")
    bootstrap_servers: str = Field("", description="use this Kafka broker; empty: start a private one for the bench")
    kafka_heap: str = Field("1g", description="heap of the private broker")
    job_settings: str = Field("", description="extra settings of the Spark job, 'name=value,name=value' "
                                              "(JobSettings fields; the bench itself does not tune the job)")
    out: str = Field("out/bench", description="output directory (bench.json, bench.png, logs)")
    docs: str = Field("docs/benchmarks.md", description="with --all: the page to write the table into; empty: none")
    progress: bool = Field(True, description="show a progress bar (on a terminal; a line every 10 s otherwise)")


class PeerSettings(KafkaSettings):
    system: Literal["passthrough", "plain", "plain-bulk", "quix"] = Field("plain", description="which peer to run")
    group_id: str = Field("marketspread-peer", description="consumer group")
    passthrough_topic: str = Field("passthrough", description="where the passthrough forwards the order records")
    metrics_port: int = Field(0, ge=0, description="port of /metrics; 0: none")
    state_dir: str = Field("", description="quix: state directory (RocksDB); empty: a temporary one")
    commit_interval: float = Field(5.0, gt=0, description="quix: commit interval in seconds (Quix's default)")


class ProbeSettings(KafkaSettings):
    topic: str = Field("passthrough", description="topic whose records' latency is measured")
    out_dir: str = Field("", description="directory for probe.bin (receive time, record timestamp, messages)")
    metrics_port: int = Field(0, ge=0, description="port of /metrics; 0: none")
