"""Grafana dashboards as code.

`generate.py` builds every dashboard from the metric names the services export (the table in
docs/architecture.md is the contract, checked by `catalogue.py`); the Helm chart ships the
generated JSON (`charts/market-spread/dashboards/`), and `push.py` uploads the same dashboards
with grafana-client where Grafana has no dashboard sidecar.
"""

from .catalogue import Metric, MetricCatalogue, MetricNameError, load_catalogue
from .generate import CHART_DASHBOARD_DIR, build_dashboards, dashboard_files, write_dashboards

__all__ = [
    "Metric", "MetricCatalogue", "MetricNameError", "load_catalogue",
    "CHART_DASHBOARD_DIR", "build_dashboards", "dashboard_files", "write_dashboards",
]
