"""What a sender run did: the final report and the live progress snapshot."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["SendReport", "Progress"]


@dataclass(frozen=True)
class SendReport:
    """Counts are what Kafka acknowledged; `send_errors` are records it did not (initial NBBO included)."""

    stream: str
    topic: str
    record_format: str
    initial_messages: int
    messages: int
    records: int
    bytes: int
    send_errors: int
    failed_messages: int
    first_intended_ns: int | None
    last_intended_ns: int | None
    wall_seconds: float
    stopped: bool

    @property
    def achieved_rate(self) -> float:
        """Stream messages per second of wall time, from the first batch to the final flush."""
        return self.messages / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.send_errors == 0

    def to_dict(self) -> dict:
        return asdict(self) | {"achieved_rate": self.achieved_rate}

    def summary(self) -> str:
        lines = [
            f"sent {self.messages:,} {self.stream} messages in {self.records:,} records ({self.bytes:,} bytes) "
            f"to {self.topic} [{self.record_format}] in {self.wall_seconds:.2f} s: {self.achieved_rate:,.0f} msgs/s",
        ]
        if self.initial_messages:
            lines.append(f"initial NBBO: {self.initial_messages:,} messages sent first")
        if self.first_intended_ns is not None and self.last_intended_ns is not None:
            span = (self.last_intended_ns - self.first_intended_ns) / 1e9
            lines.append(f"intended send times span {span:.3f} s")
        if self.stopped:
            lines.append("stopped before the end of the stream")
        if self.send_errors:
            lines.append(f"FAILED: {self.send_errors:,} records ({self.failed_messages:,} messages) not delivered")
        return "\n".join(lines)


@dataclass(frozen=True)
class Progress:
    phase: str
    submitted_messages: int
    acknowledged_messages: int
    send_errors: int
    behind_seconds: float
    elapsed_seconds: float

    def line(self) -> str:
        rate = self.acknowledged_messages / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
        return (f"{self.phase}: {self.acknowledged_messages:,} acknowledged of {self.submitted_messages:,} sent, "
                f"{rate:,.0f} msgs/s, {self.behind_seconds:.3f} s behind, {self.send_errors} errors")
