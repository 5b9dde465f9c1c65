"""Prometheus plumbing shared by every process: serve a registry, read another process's metrics.

Each service builds its metrics on its own `CollectorRegistry` (never the global one), so
tests can create services side by side and compare exact metric families.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["serve", "scrape", "parse", "Samples", "LATENCY_BUCKETS"]

# Buckets a factor sqrt(2) apart from 100 µs to ~105 s: the client's defaults start at 5 ms and
# would lump every sub-millisecond peer together, and a factor 2 is too coarse to tell a 300 ms
# p50 from a 400 ms one (Spark micro-batches live in the 0.1-2 s decade).
LATENCY_BUCKETS = tuple(round(0.0001 * 2 ** (i / 2), 7) for i in range(41))


def serve(registry: CollectorRegistry, port: int, host: str = "0.0.0.0"):
    """Serve `/metrics` in a daemon thread; returns the server (call `.shutdown()`), or None for port 0."""
    if not port:
        return None
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server


class Samples(dict):
    """Scraped samples keyed by (name, frozenset of label items)."""

    def value(self, name: str, default: float | None = None, **labels) -> float | None:
        return self.get((name, frozenset(labels.items())), default)

    def matching(self, name: str, **labels) -> Iterable[tuple[dict, float]]:
        wanted = set(labels.items())
        for (sample_name, label_items), value in self.items():
            if sample_name == name and wanted <= set(label_items):
                yield dict(label_items), value

    def total(self, name: str, **labels) -> float:
        return sum(value for _, value in self.matching(name, **labels))


def parse(text: str) -> Samples:
    samples = Samples()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def scrape(url: str, timeout: float = 5.0) -> Samples:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse(response.read().decode())
