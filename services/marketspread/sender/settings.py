"""The sender's settings: what to send, where, and how fast."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..settings import KafkaSettings

__all__ = ["SenderSettings"]


class SenderSettings(KafkaSettings):
    stream: Literal["nbbo", "orders"] = Field("nbbo", description="which stream (and so which topic) to send")
    file: str = Field("", description="framed fixish file to send; empty: generate the stream")
    initial_nbbo_file: str = Field(
        "", description="framed NBBO file sent to completion before the stream (Wallaroo's initial NBBO)")
    symbols: str = Field("350", description="symbol set when generating: 350, 700, 1400, 2100, r3k or synthetic:N")
    seed: int = Field(1, description="random seed when generating")
    reject_ratio: float = Field(5 / 350_000, ge=0, le=1,
                                description="share of generated orders on rejecting symbols (Wallaroo: 1 in 70,000)")
    rate: float = Field(10_000, ge=0, description="messages per second; 0 sends as fast as possible")
    batch_size: int = Field(100, ge=1, description="messages per paced batch (Giles: N messages every interval)")
    loop: bool = Field(False, description="start the file again at its end")
    max_messages: int = Field(0, ge=0, description="stop after this many stream messages; 0: the whole file, "
                                                   "or forever when looping or generating")
    start_at: float = Field(0.0, description="epoch seconds of the first intended send time; 0: now")
    linger_ms: int = Field(5, ge=0, description="producer linger.ms")
    producer_batch_bytes: int = Field(1 << 20, ge=1024, description="producer batch.size in bytes")
    acks: Literal["all", "1", "0"] = Field("all", description="producer acks")
    delivery_timeout_seconds: float = Field(
        600, ge=2, description="how long the producer retries a record (delivery.timeout.ms): a broker outage "
                               "shorter than this loses nothing; a record still undelivered then is a send error "
                               "and the sender exits non-zero")
    metrics_port: int = Field(9101, ge=0, description="port of /metrics; 0: none")
