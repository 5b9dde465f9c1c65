"""The metric names the services export, read from docs/architecture.md, and a check of PromQL against them.

Dashboards and alerts are only as good as the names they query: a typo or a renamed metric gives an
empty panel or an alert that can never fire, silently. So every expression is checked here against
the contract table (name, type, labels) plus the few series that come from the platform
(cAdvisor, kube-state-metrics, Strimzi's Kafka Exporter).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import MarketSpreadError

__all__ = ["Metric", "MetricCatalogue", "MetricNameError", "load_catalogue", "ARCHITECTURE_DOC", "PLATFORM_METRICS"]

ARCHITECTURE_DOC = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"

# Labels Prometheus (or the prometheus-operator's monitors) attach to every scraped series.
TARGET_LABELS = frozenset({"namespace", "pod", "container", "job", "instance", "service", "endpoint"})


@dataclass(frozen=True)
class Metric:
    name: str
    type: str  # counter | gauge | histogram
    labels: frozenset[str]
    source: str


# Series the dashboards and alerts use that the platform exports, not this project.
PLATFORM_METRICS = {
    m.name: m for m in (
        Metric("container_cpu_usage_seconds_total", "counter", frozenset({"cpu", "image", "id"}),
               "cAdvisor (kubelet), scraped by kube-prometheus-stack"),
        Metric("kube_pod_container_resource_limits", "gauge", frozenset({"resource", "unit", "node", "uid"}),
               "kube-state-metrics"),
        Metric("kafka_consumergroup_lag", "gauge", frozenset({"consumergroup", "topic", "partition"}),
               "Strimzi Kafka Exporter"),
    )
}

_FUNCTIONS_OVER_COUNTERS = ("rate", "irate", "increase")
_KEYWORDS = frozenset({
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
    "inf", "nan", "Inf", "NaN",
    # Aggregations may put their `by (...)` clause before the parenthesis.
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "limitk", "limit_ratio",
})
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class MetricNameError(MarketSpreadError):
    """An expression names a metric (or a label) no component exports."""


class MetricCatalogue:
    def __init__(self, metrics: dict[str, Metric]):
        self.metrics = dict(metrics)

    def resolve(self, series: str) -> tuple[Metric, str] | None:
        """The metric a series name belongs to, and the suffix (`_bucket`, ...) for a histogram's series."""
        if series in self.metrics:
            return self.metrics[series], ""
        for suffix in _HISTOGRAM_SUFFIXES:
            base = series.removesuffix(suffix)
            if base != series and base in self.metrics and self.metrics[base].type == "histogram":
                return self.metrics[base], suffix
        return None

    def problems(self, expr: str) -> list[str]:
        """Everything wrong with the metric names, labels and functions in one PromQL expression."""
        found = []
        for series, matchers in _selectors(expr):
            resolved = self.resolve(series)
            if resolved is None:
                found.append(f"{series!r} is not a metric any component exports")
                continue
            metric, suffix = resolved
            if metric.type == "histogram" and not suffix:
                found.append(f"{series!r} is a histogram: query its _bucket, _sum or _count series")
            allowed = metric.labels | TARGET_LABELS | ({"le"} if suffix == "_bucket" else set())
            for label in matchers:
                if label not in allowed:
                    found.append(f"{series!r} has no label {label!r} (it has {sorted(metric.labels) or 'none'})")
        for function, series in re.findall(r"\b(" + "|".join(_FUNCTIONS_OVER_COUNTERS) + r")\s*\(\s*([A-Za-z_:][\w:]*)",
                                           _strip_strings(expr)):
            resolved = self.resolve(series)
            if resolved and resolved[0].type == "gauge":
                found.append(f"{function}() over {series!r}, a gauge")
        if "histogram_quantile" in expr and not re.search(r"_bucket\b", expr):
            found.append("histogram_quantile() over no _bucket series")
        return found

    def check(self, exprs: dict[str, str]) -> None:
        """Raise MetricNameError listing every problem in `{where: expr}`."""
        errors = [f"{where}: {problem}" for where, expr in exprs.items() for problem in self.problems(expr)]
        if errors:
            raise MetricNameError("PromQL names what the services do not export:\n  " + "\n  ".join(errors))


def load_catalogue(doc: Path = ARCHITECTURE_DOC, include_platform: bool = True) -> MetricCatalogue:
    """The metrics table of docs/architecture.md (| `name` | type | `labels` | meaning |)."""
    metrics = dict(PLATFORM_METRICS) if include_platform else {}
    rows = re.findall(r"^\|\s*`(marketspread_\w+)`\s*\|\s*(\w+)\s*\|([^|]*)\|", doc.read_text(), re.MULTILINE)
    if not rows:
        raise MetricNameError(f"{doc}: no metrics table found")
    for name, kind, labels in rows:  # label values are listed in parentheses: `stat` (`max`,`avg`,`min`)
        metrics[name] = Metric(name, kind, frozenset(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", labels))), "docs/architecture.md")
    return MetricCatalogue(metrics)


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def _selectors(expr: str) -> list[tuple[str, list[str]]]:
    """(series name, label names it matches on) for every vector selector in `expr`."""
    text = _strip_strings(expr)
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations, $__rate_interval
    # Label lists of grouping and matching clauses are labels, not series.
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    selectors = []
    # A name not glued to a number or a variable (`1e-05`, `$namespace`), then its optional {matchers}.
    for match in re.finditer(r"(?<![\w.$])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?", text):
        name, braces = match.group(1), match.group(2) or ""
        if name in _KEYWORDS or (not braces and text[match.end():].lstrip().startswith("(")):
            continue  # a keyword, an aggregation or a function call
        selectors.append((name, re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", braces)))
    return selectors
