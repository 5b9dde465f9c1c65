"""Scrape targets and dashboards for kube-prometheus-stack."""

import json

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


def selects(selector: dict, labels: dict) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        if expression["operator"] == "In" and labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_no_monitor_or_rule_is_rendered_where_the_prometheus_operator_api_is_missing():
    kinds = {doc["kind"] for doc in cs.render(api_versions=())}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert "ConfigMap" in kinds  # dashboards need only the Grafana sidecar


def test_each_monitor_kind_is_guarded_by_its_own_api():
    kinds = {doc["kind"] for doc in cs.render(api_versions=("monitoring.coreos.com/v1/PodMonitor",))}
    assert "PodMonitor" in kinds and not kinds & {"ServiceMonitor", "PrometheusRule"}


def test_monitors_and_rules_carry_the_release_label_kube_prometheus_stack_selects(default_docs):
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        for doc in cs.by_kind(default_docs, kind):
            assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", doc["metadata"]["name"]


def test_the_release_label_follows_the_prometheus_release_value():
    docs = cs.render(sets=("monitoring.prometheusRelease=prom",))
    assert {d["metadata"]["labels"]["release"] for d in docs if d["kind"].endswith(("Monitor", "Rule"))} == {"prom"}


def test_monitors_watch_only_the_release_namespace(default_docs):
    for doc in cs.by_kind(default_docs, "ServiceMonitor") + cs.by_kind(default_docs, "PodMonitor"):
        assert doc["spec"]["namespaceSelector"] == {"matchNames": ["market-spread"]}


@pytest.mark.parametrize("docs_fixture", ["default_docs", "pinned_docs"])
def test_every_component_has_a_scrape_target(docs_fixture, request):
    docs = request.getfixturevalue(docs_fixture)
    service_monitor = cs.one(docs, "ServiceMonitor")
    endpoint_ports = {e["port"] for e in service_monitor["spec"]["endpoints"]}
    for deployment in cs.by_kind(docs, "Deployment"):
        name = deployment["metadata"]["name"]
        services = [s for s in cs.by_kind(docs, "Service")
                    if selects(service_monitor["spec"]["selector"], s["metadata"]["labels"])
                    and selects({"matchLabels": s["spec"]["selector"]}, deployment["spec"]["template"]["metadata"]["labels"])]
        assert len(services) == 1, f"{name}: no Service the ServiceMonitor scrapes"
        assert {p["name"] for p in services[0]["spec"]["ports"]} & endpoint_ports, name

    job = cs.one(docs, "PodMonitor", "market-spread-job")
    driver = cs.one(docs, "SparkApplication")["spec"]["driver"]
    driver_labels = {**driver["labels"], "spark-role": "driver"}  # Spark adds spark-role itself
    assert selects(job["spec"]["selector"], driver_labels)
    assert {"name": "metrics", "containerPort": 9103, "protocol": "TCP"} in driver["ports"]
    paths = {(e["port"], e["path"]) for e in job["spec"]["podMetricsEndpoints"]}
    assert paths == {("metrics", "/metrics"), ("spark-ui", "/metrics/prometheus"),
                     ("spark-ui", "/metrics/executors/prometheus")}

    kafka = cs.one(docs, "PodMonitor", "market-spread-kafka")
    # Strimzi labels every pod of the cluster with these; brokers and the exporter serve tcp-prometheus.
    assert selects(kafka["spec"]["selector"], {"strimzi.io/cluster": "market-spread", "strimzi.io/kind": "Kafka",
                                              "strimzi.io/pool-name": "broker"})
    assert [e["port"] for e in kafka["spec"]["podMetricsEndpoints"]] == ["tcp-prometheus"]


def test_without_spark_metrics_only_the_jobs_own_endpoint_is_scraped():
    job = cs.one(cs.render(sets=("monitoring.sparkMetrics=false",)), "PodMonitor", "market-spread-job")
    assert [e["port"] for e in job["spec"]["podMetricsEndpoints"]] == ["metrics"]


def test_each_dashboard_file_is_a_configmap_for_the_grafana_sidecar(default_docs):
    maps = {m["metadata"]["name"]: m for m in cs.by_kind(default_docs, "ConfigMap")}
    files = sorted(p.name for p in (cs.CHART / "dashboards").glob("*.json"))
    assert len(maps) == len(files) == 2
    for config_map in maps.values():
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"]["grafana_folder"] == "Market Spread"
        (file_name, content), = config_map["data"].items()
        assert content == (cs.CHART / "dashboards" / file_name).read_text()
        assert json.loads(content)["uid"].startswith("market-spread-")
    assert set(maps) == {"market-spread-dashboard-pipeline", "market-spread-dashboard-job"}


def test_dashboards_can_be_left_to_marketspread_dashboards_push():
    assert not cs.by_kind(cs.render(sets=("monitoring.dashboards.enabled=false",)), "ConfigMap")
