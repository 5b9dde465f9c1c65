"""Settings of `marketspread chaos`: which fault, on which streams, how fast, where the results go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..settings import KafkaSettings, RecordFormat, Settings

__all__ = ["ChaosSettings", "SCENARIO_NAMES"]

SCENARIO_NAMES = ("job-kill", "receiver-kill", "broker-restart")


class ChaosSettings(Settings):
    scenario: Literal["job-kill", "receiver-kill", "broker-restart", "all"] = Field(
        ..., description="the fault to inject: job-kill, receiver-kill, broker-restart, or all three in turn")
    out: str = Field(..., description="directory; each scenario writes OUT/<scenario>/summary.json, logs and results")
    initial_nbbo: str = Field("", description="framed NBBO file sent (and processed) first; empty: generated")
    nbbo: str = Field("", description="framed NBBO stream file; empty: generated")
    orders: str = Field("", description="framed order stream file; empty: generated")
    symbols: str = Field("350", description="symbol set of the generated streams (350, 700, 1400, 2100, r3k)")
    messages: int = Field(150_000, ge=1, description="messages per generated stream")
    seed: int = Field(7, ge=0, description="seed of the generated streams")
    reject_ratio: float = Field(0.002, ge=0, le=1, description="share of generated orders on rejecting symbols")
    rate: float = Field(5_000, gt=0, description="messages per second per stream")
    batch_size: int = Field(100, ge=1, description="messages per paced sender batch")
    record_format: RecordFormat = Field("message", description="record format of every component")
    partitions: int = Field(2, ge=1, description="partitions of each topic")
    shards: int = Field(KafkaSettings.model_fields["shards"].default, ge=1, description="the job's state shards")
    shuffle_partitions: int = Field(2, ge=1, description="the job's spark.sql.shuffle.partitions")
    fault_at: float = Field(0.3, gt=0, lt=1, description="inject the fault once this share of each stream is "
                                                         "acknowledged by Kafka and results are flowing")
    broker_down_seconds: float = Field(0, ge=0, description="broker-restart: how long the broker stays down before "
                                                            "it is started again")
    broker_heap: str = Field("512m", description="heap of the scenario's own broker")
    timeout_seconds: float = Field(900, gt=0, description="give up a scenario (and stop everything) after this long")
