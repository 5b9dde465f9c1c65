"""What a peer tells the harness on /metrics: how far it has processed each input partition.

Plain attributes updated by the peer's loop and read when /metrics is scraped (as the
receiver does), so counting costs the hot loop an integer addition, not a metrics call.

| metric | type | labels | meaning |
|---|---|---|---|
| `marketspread_peer_ready` | gauge | | 1 once the peer runs (has its assignment) |
| `marketspread_peer_input_records_total` | counter | | Kafka records consumed and handled |
| `marketspread_peer_input_messages_total` | counter | | fixish messages in them |
| `marketspread_peer_output_records_total` | counter | | records produced |
| `marketspread_peer_results_total` | counter | | OrderResults produced (passthrough: order messages forwarded) |
| `marketspread_peer_malformed_total` | counter | | input that is not fixish (skipped) |
| `marketspread_peer_processed_offset` | gauge | `topic`, `partition` | next offset after the last record handled |
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ... import metrics as shared_metrics

__all__ = ["PeerCounters", "PROCESSED_OFFSET", "INPUT_MESSAGES", "READY"]

PROCESSED_OFFSET = "marketspread_peer_processed_offset"
INPUT_MESSAGES = "marketspread_peer_input_messages_total"
READY = "marketspread_peer_ready"


class PeerCounters(Collector):
    def __init__(self, prefix: str = "marketspread_peer") -> None:
        self.prefix = prefix
        self.ready = 0
        self.records = 0
        self.messages = 0
        self.outputs = 0
        self.results = 0
        self.malformed = 0
        self.offsets: dict[tuple[str, int], int] = {}
        self._server = None

    def serve(self, port: int):
        registry = CollectorRegistry()
        registry.register(self)
        self._server = shared_metrics.serve(registry, port)
        return self._server

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def collect(self) -> Iterator[Metric]:
        p = self.prefix
        yield GaugeMetricFamily(f"{p}_ready", "1 once the peer runs", value=self.ready)
        yield CounterMetricFamily(f"{p}_input_records", "Kafka records consumed and handled", value=self.records)
        yield CounterMetricFamily(f"{p}_input_messages", "fixish messages in them", value=self.messages)
        yield CounterMetricFamily(f"{p}_output_records", "records produced", value=self.outputs)
        yield CounterMetricFamily(f"{p}_results", "OrderResults produced (passthrough: orders forwarded)",
                                  value=self.results)
        yield CounterMetricFamily(f"{p}_malformed", "input that is not fixish (skipped)", value=self.malformed)
        family = GaugeMetricFamily(f"{p}_processed_offset", "next offset after the last record handled",
                                   labels=["topic", "partition"])
        for (topic, partition), offset in sorted(dict(self.offsets).items()):
            family.add_metric([topic, str(partition)], offset)
        yield family
