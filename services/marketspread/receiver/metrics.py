"""The receiver's Prometheus metrics (names: docs/architecture.md), read from its Tally when scraped.

Reading at scrape time keeps /metrics and stats.json the same numbers, lets a restarted
receiver expose the totals it rebuilt from its files, and records a poll's latencies into the
histogram with one numpy call instead of one observe() each.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .tally import Tally

__all__ = ["ReceiverMetrics"]


class ReceiverMetrics(Collector):
    def __init__(self, tally: Tally, registry: CollectorRegistry):
        self.tally = tally
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        t = self.tally
        with t.lock:
            received, duplicates, malformed = t.received, t.duplicates, t.malformed
            dead_letters = dict(t.dead_letters)
            offsets = dict(t.offsets)
            last_ns = t.last_receive_ns
            buckets = t.latency.cumulative_buckets()
            latency_sum = t.latency.sum_seconds
        yield CounterMetricFamily("marketspread_receiver_rejections",
                                  "OrderResults received, duplicates included", value=received)
        yield CounterMetricFamily("marketspread_receiver_duplicates",
                                  "OrderResults whose order id was already received", value=duplicates)
        yield HistogramMetricFamily(
            "marketspread_receiver_latency_seconds",
            "receive time - intended send time of the order (first OrderResult of each order)",
            buckets=[(floatToGoString(le), count) for le, count in buckets], sum_value=latency_sum)
        family = CounterMetricFamily("marketspread_receiver_dead_letters", "dead letters seen",
                                     labels=["reason", "source_topic"])
        for (reason, topic), count in sorted(dead_letters.items()):
            family.add_metric([reason, topic], count)
        yield family
        yield CounterMetricFamily("marketspread_receiver_malformed",
                                  "records on the rejections topic that are not OrderResults (kept in a file)",
                                  value=malformed)
        family = GaugeMetricFamily("marketspread_receiver_consumed_offset",
                                   "next offset after the last record written out", labels=["topic", "partition"])
        for (topic, partition), offset in sorted(offsets.items()):
            family.add_metric([topic, str(partition)], offset)
        yield family
        family = GaugeMetricFamily("marketspread_receiver_last_receive_timestamp_seconds",
                                   "wall clock of the last OrderResult")
        if last_ns is not None:
            family.add_metric([], last_ns / 1e9)
        yield family
