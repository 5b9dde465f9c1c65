"""The sender's Prometheus metrics (names and labels: docs/architecture.md), on an injected registry.

The counters are read from the delivery totals when Prometheus scrapes, instead of being
incremented per record: acknowledgements arrive on kafka-python's I/O thread, thousands per
produce response in `message` format, and a metric update each would stall that thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .delivery import Delivery

__all__ = ["SenderMetrics"]

# (metric name without _total, help, Delivery attribute)
_COUNTERS = (
    ("marketspread_sender_messages", "fixish messages sent (acknowledged by Kafka)", "messages"),
    ("marketspread_sender_records", "Kafka records sent (acknowledged by Kafka)", "records"),
    ("marketspread_sender_bytes", "record value bytes sent (acknowledged by Kafka)", "bytes"),
    ("marketspread_sender_send_errors", "records the producer failed to deliver", "failed_records"),
)


class _DeliveryCollector(Collector):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deliveries: list[Delivery] = []

    def add(self, delivery: Delivery) -> None:
        with self._lock:
            self._deliveries.append(delivery)

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            deliveries = list(self._deliveries)
        for name, text, attribute in _COUNTERS:
            family = CounterMetricFamily(name, text, labels=["topic"])
            totals: dict[str, int] = {}
            for delivery in deliveries:
                totals[delivery.topic] = totals.get(delivery.topic, 0) + getattr(delivery, attribute)
            for topic, value in totals.items():
                family.add_metric([topic], value)
            yield family


class SenderMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self._deliveries = _DeliveryCollector()
        registry.register(self._deliveries)
        self.behind = Gauge("marketspread_sender_behind_schedule_seconds",
                            "how far the sender is behind its intended send times", ["topic"], registry=registry)
        self.target_rate = Gauge("marketspread_sender_target_rate_messages_per_second",
                                 "configured rate (0: unpaced)", ["topic"], registry=registry)

    def delivery(self, topic: str, message_bytes: int = 0) -> Delivery:
        """A new delivery tally for `topic`, counted in the metrics from now on."""
        delivery = Delivery(topic, message_bytes)
        self._deliveries.add(delivery)
        return delivery
