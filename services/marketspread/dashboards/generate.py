"""The Grafana dashboards, built from the metric names the services export.

The chart ships the output (`charts/market-spread/dashboards/*.json`, one ConfigMap each);
`marketspread dashboards generate` rewrites those files and `--check` fails when they differ from
what this module builds, so the JSON is never edited by hand. Every query is checked against the
metric table of docs/architecture.md before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .catalogue import ARCHITECTURE_DOC, MetricCatalogue, load_catalogue

__all__ = ["CHART_DASHBOARD_DIR", "Panel", "build_dashboards", "dashboard_files", "write_dashboards",
           "check_dashboards", "dashboard_exprs", "SCHEMA_VERSION"]

CHART_DASHBOARD_DIR = Path(__file__).resolve().parents[3] / "charts" / "market-spread" / "dashboards"
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace="$namespace"'
RATE = "$__rate_interval"
# Grafana's grid is 24 units wide; two panels a row.
WIDTH, HEIGHT = 12, 8


@dataclass
class Panel:
    title: str
    targets: list[tuple[str, str]]  # (expr, legendFormat)
    unit: str = "short"
    description: str = ""
    kind: str = "timeseries"
    overrides: dict = field(default_factory=dict)


def _quantiles(series: str, by: str = "") -> list[tuple[str, str]]:
    group = f"le{', ' + by if by else ''}"
    legend = f"{{{{{by}}}}} " if by else ""
    return [(f"histogram_quantile({q}, sum by ({group}) (rate({series}{{{NS}}}[{RATE}])))", f"{legend}p{label}")
            for q, label in (("0.5", "50"), ("0.9", "90"), ("0.99", "99"), ("0.999", "99.9"))]


def _pipeline_panels() -> list[Panel]:
    return [
        Panel("Throughput per stream (messages/s)", [
            (f"sum by (topic) (rate(marketspread_sender_messages_total{{{NS}}}[{RATE}]))", "sent {{topic}}"),
            (f"sum(rate(marketspread_job_input_messages_total{{{NS}}}[{RATE}]))", "job input"),
            (f"sum(rate(marketspread_job_rejections_total{{{NS}}}[{RATE}]))", "job rejections"),
            (f"sum(rate(marketspread_receiver_rejections_total{{{NS}}}[{RATE}]))", "received rejections"),
        ], unit="short", description="Fixish messages per second at each step; rejections are ~1 in 70,000 orders."),
        Panel("End-to-end latency (order's intended send time to receipt)",
              _quantiles("marketspread_receiver_latency_seconds_bucket"), unit="s",
              description="Open-loop latency: receive time minus the order's intended send time, so a sender "
                          "behind schedule shows up here rather than hiding (no coordinated omission)."),
        Panel("Lag", [
            (f'max by (stat) (marketspread_job_offsets_behind_latest{{{NS}}})', "job behind latest ({{stat}})"),
            (f'sum by (consumergroup) (kafka_consumergroup_lag{{{NS}, consumergroup=~"marketspread.*"}})',
             "{{consumergroup}}"),
        ], unit="short", description="Records the job (Kafka source) and the receiver's group have yet to read."),
        Panel("Sender behind schedule", [
            (f"max by (topic) (marketspread_sender_behind_schedule_seconds{{{NS}}})", "{{topic}}"),
        ], unit="s", description="How far each sender is behind its intended send times; above 0 it cannot keep "
                                 "its configured rate."),
        Panel("Dead letters", [
            (f"sum(rate(marketspread_job_dead_letters_total{{{NS}}}[{RATE}]))", "written by the job"),
            (f"sum by (reason, source_topic) (rate(marketspread_receiver_dead_letters_total{{{NS}}}[{RATE}]))",
             "received {{source_topic}}: {{reason}}"),
        ], unit="short", description="Input that is not fixish; none is expected from the generator."),
        Panel("Delivery problems", [
            (f"sum by (topic) (rate(marketspread_sender_send_errors_total{{{NS}}}[{RATE}]))", "send errors {{topic}}"),
            (f"sum(rate(marketspread_receiver_duplicates_total{{{NS}}}[{RATE}]))", "duplicate OrderResults"),
            (f"sum(rate(marketspread_receiver_malformed_total{{{NS}}}[{RATE}]))", "malformed records"),
        ], unit="short", description="Records per second the producer failed to deliver, and what the receiver "
                                     "could not count once (duplicates after a job restart) or decode."),
    ]


def _job_panels() -> list[Panel]:
    return [
        Panel("Micro-batch duration", _quantiles("marketspread_job_batch_duration_seconds_bucket"), unit="s",
              description="Wall time of each micro-batch (triggerExecution): the floor of end-to-end latency."),
        Panel("Micro-batch phases (last batch)", [
            (f"max by (phase) (marketspread_job_batch_phase_seconds{{{NS}}})", "{{phase}}"),
        ], unit="s", description="Where the last batch's time went (StreamingQueryProgress.durationMs)."),
        Panel("Rows per second", [
            (f"max(marketspread_job_input_rows_per_second{{{NS}}})", "input"),
            (f"max(marketspread_job_processed_rows_per_second{{{NS}}})", "processed"),
            (f"sum(rate(marketspread_job_batches_total{{{NS}}}[{RATE}]))", "batches/s"),
        ], unit="short", description="Processed below input for long means the job falls behind."),
        Panel("State", [
            (f"max(marketspread_job_state_rows{{{NS}}})", "state rows (keys)"),
        ], unit="short", description="Keys in the state store: shards of symbols."),
        Panel("State memory", [
            (f"max(marketspread_job_state_memory_bytes{{{NS}}})", "state store memory"),
        ], unit="bytes"),
        Panel("Query active", [
            (f"max(marketspread_job_query_active{{{NS}}})", "active"),
            (f"time() - max(marketspread_job_last_progress_timestamp_seconds{{{NS}}})", "seconds since last batch"),
        ], unit="short", description="1 while the streaming query runs; the age of the last completed micro-batch."),
        Panel("CPU per pod (cores)", [
            (f'sum by (pod) (rate(container_cpu_usage_seconds_total{{{NS}, container!=""}}[{RATE}]))', "{{pod}}"),
            (f'sum by (pod) (kube_pod_container_resource_limits{{{NS}, resource="cpu"}})', "{{pod}} limit"),
        ], unit="short", description="Usage against the limit: pinned pods should sit below their exclusive cores."),
    ]


def _dashboard(uid: str, title: str, description: str, panels: list[Panel]) -> dict:
    built = []
    for index, panel in enumerate(panels):
        built.append({
            "id": index + 1,
            "type": panel.kind,
            "title": panel.title,
            "description": panel.description,
            "datasource": DATASOURCE,
            "gridPos": {"h": HEIGHT, "w": WIDTH, "x": (index % 2) * WIDTH, "y": (index // 2) * HEIGHT},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
            "targets": [
                {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
                for i, (expr, legend) in enumerate(panel.targets)
            ],
        })
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["market-spread"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "timezone": "utc",
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {
                "name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": [],
            },
            {
                "name": "namespace", "label": "Namespace", "type": "query", "datasource": DATASOURCE,
                "definition": "label_values(marketspread_job_query_active, namespace)",
                "query": {"query": "label_values(marketspread_job_query_active, namespace)", "refId": "namespace"},
                "current": {}, "hide": 0, "refresh": 2, "regex": "", "sort": 1, "options": [],
            },
        ]},
        "annotations": {"list": []},
        "panels": built,
    }


def build_dashboards() -> dict[str, dict]:
    """{file name: dashboard} for every dashboard the project ships."""
    return {
        "market-spread-pipeline.json": _dashboard(
            "market-spread-pipeline", "Market Spread: pipeline",
            "Sender to Kafka to the Spark job to the receiver: throughput, latency, lag, dead letters.",
            _pipeline_panels()),
        "market-spread-job.json": _dashboard(
            "market-spread-job", "Market Spread: Spark job",
            "The stateful Structured Streaming job: micro-batches, state store, CPU of every pod.",
            _job_panels()),
    }


def dashboard_exprs(dashboards: dict[str, dict]) -> dict[str, str]:
    """{'file: panel [refId]': expr} for every query, templating variables included."""
    exprs = {}
    for name, dashboard in dashboards.items():
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                exprs[f"{name}: {panel['title']} [{target['refId']}]"] = target["expr"]
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                query = variable["query"]["query"]
                exprs[f"{name}: ${variable['name']}"] = query.removeprefix("label_values(").split(",")[0]
    return exprs


def render(dashboard: dict) -> str:
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def check_dashboards(dashboards: dict[str, dict], catalogue: MetricCatalogue | None = None) -> None:
    (catalogue or load_catalogue(ARCHITECTURE_DOC)).check(dashboard_exprs(dashboards))


def dashboard_files(directory: Path = CHART_DASHBOARD_DIR) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(directory.glob("*.json"))}


def write_dashboards(directory: Path = CHART_DASHBOARD_DIR, check: bool = False) -> list[str]:
    """Write the dashboards (or with `check`, only compare); return the names that differ(ed)."""
    dashboards = build_dashboards()
    check_dashboards(dashboards)
    wanted = {name: render(dashboard) for name, dashboard in dashboards.items()}
    present = dashboard_files(directory) if directory.is_dir() else {}
    differing = sorted(name for name in wanted.keys() | present.keys() if wanted.get(name) != present.get(name))
    if not check:
        directory.mkdir(parents=True, exist_ok=True)
        for name in differing:
            if name in wanted:
                (directory / name).write_text(wanted[name])
            else:
                (directory / name).unlink()
    return differing
