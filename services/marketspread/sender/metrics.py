"""The sender's Prometheus metrics (names and labels: docs/architecture.md), on an injected registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["SenderMetrics", "TopicMetrics"]


class SenderMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        # Messages, records and bytes count what Kafka acknowledged; failures count separately.
        self.messages = Counter("marketspread_sender_messages", "fixish messages sent (acknowledged)",
                                ["topic"], registry=registry)
        self.records = Counter("marketspread_sender_records", "Kafka records sent (acknowledged)",
                               ["topic"], registry=registry)
        self.bytes = Counter("marketspread_sender_bytes", "record value bytes sent (acknowledged)",
                             ["topic"], registry=registry)
        self.send_errors = Counter("marketspread_sender_send_errors", "records the producer failed to deliver",
                                   ["topic"], registry=registry)
        self.behind = Gauge("marketspread_sender_behind_schedule_seconds",
                            "how far the sender is behind its intended send times", ["topic"], registry=registry)
        self.target_rate = Gauge("marketspread_sender_target_rate_messages_per_second",
                                 "configured rate (0: unpaced)", ["topic"], registry=registry)

    def for_topic(self, topic: str) -> TopicMetrics:
        return TopicMetrics(self, topic)


class TopicMetrics:
    """The children of one topic, resolved once: labels() is too slow to call per record."""

    def __init__(self, metrics: SenderMetrics, topic: str):
        self.messages = metrics.messages.labels(topic=topic)
        self.records = metrics.records.labels(topic=topic)
        self.bytes = metrics.bytes.labels(topic=topic)
        self.send_errors = metrics.send_errors.labels(topic=topic)
        self.behind = metrics.behind.labels(topic=topic)
        self.target_rate = metrics.target_rate.labels(topic=topic)
