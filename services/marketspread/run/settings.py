"""Settings of `marketspread run`: which files, how fast, where the results go."""

from __future__ import annotations

from pydantic import Field

from ..settings import KafkaSettings

__all__ = ["RunSettings"]


class RunSettings(KafkaSettings):
    initial_nbbo: str = Field(..., description="framed NBBO file sent (and processed) before everything else")
    nbbo: str = Field(..., description="framed NBBO stream file")
    orders: str = Field(..., description="framed order stream file")
    out: str = Field(..., description="directory for rejections.msg, summary.json, logs and the checkpoint")
    rate: float = Field(20_000, ge=0, description="messages per second per stream; 0: as fast as possible")
    batch_size: int = Field(100, ge=1, description="messages per paced sender batch")
    sequential: bool = Field(False, description="send initial NBBO, NBBO, orders one after another, each sent and "
                                                "processed before the next (Wallaroo's test harness)")
    start_at: float = Field(0.0, ge=0, description="epoch seconds of the streams' first intended send time (the "
                                                   "OrderResults' timestamps follow from it); 0: when they start")
    partitions: int = Field(2, ge=1, description="partitions of each topic (topics are recreated for the run)")
    shuffle_partitions: int = Field(1, ge=1, description="the job's spark.sql.shuffle.partitions")
    trigger_interval: str = Field("0 seconds", description="the job's micro-batch trigger interval")
    max_offsets_per_trigger: int = Field(0, ge=0, description="the job's cap on records per micro-batch; 0: none")
    kafka_port: int = Field(9092, description="port of the local broker started when none answers")
    kafka_controller_port: int = Field(9093, description="controller port of that broker")
    timeout_seconds: float = Field(1800, gt=0, description="give up (and stop everything) after this long")
    progress: bool = Field(True, description="show a live progress line")
