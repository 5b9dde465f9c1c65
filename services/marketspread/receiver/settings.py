"""The receiver's settings."""

from __future__ import annotations

from pydantic import Field

from ..settings import KafkaSettings

__all__ = ["ReceiverSettings"]


class ReceiverSettings(KafkaSettings):
    group_id: str = Field("marketspread-receiver", description="consumer group (offsets committed after writing)")
    out_dir: str = Field("", description="directory for rejections.msg, dead-letters.msg, stats.json; empty: none")
    from_beginning: bool = Field(True, description="with no committed offset, start at the earliest record")
    metrics_port: int = Field(9102, ge=0, description="port of /metrics; 0: none")
    stats_interval_seconds: float = Field(5.0, gt=0, description="how often stats.json is rewritten")
