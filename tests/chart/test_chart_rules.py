"""The alerts, by the real promtool: syntax (`check rules`) and behaviour (`test rules`, rules-test.yaml)."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import chart_support as cs
from marketspread.dashboards.catalogue import load_catalogue

pytestmark = [pytest.mark.helm, pytest.mark.prometheus]

RULES_TEST = Path(__file__).resolve().parent / "rules-test.yaml"
EXPECTED = {"MarketSpreadJobDown", "MarketSpreadJobStalled", "MarketSpreadJobLagGrowing", "MarketSpreadDeadLetters",
            "MarketSpreadNoRejections", "MarketSpreadReceiverLagGrowing", "MarketSpreadLatencyAboveObjective"}


def rule_groups(docs) -> list[dict]:
    return cs.one(docs, "PrometheusRule")["spec"]["groups"]


def alerts(docs) -> list[dict]:
    return [rule for group in rule_groups(docs) for rule in group["rules"]]


@pytest.fixture()
def rules_dir(tmp_path, default_docs) -> Path:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups(default_docs)}, sort_keys=False))
    shutil.copy(RULES_TEST, tmp_path / "rules-test.yaml")
    return tmp_path


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([cs.promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_chart_has_the_alerts_the_pipeline_needs(default_docs):
    assert {rule["alert"] for rule in alerts(default_docs)} == EXPECTED


def test_promtool_accepts_the_rendered_rules(rules_dir):
    result = promtool("check", "rules", "rules.yaml", cwd=rules_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(EXPECTED)} rules found" in result.stdout


def test_each_alert_fires_when_it_should_and_only_then(rules_dir):
    result = promtool("test", "rules", "rules-test.yaml", cwd=rules_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rules_test_has_a_firing_and_a_quiet_case_for_every_alert():
    cases = [case for test in yaml.safe_load(RULES_TEST.read_text())["tests"] for case in test["alert_rule_test"]]
    firing = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert firing == EXPECTED and quiet == EXPECTED


def test_every_alert_has_a_severity_a_summary_and_a_description(pinned_docs):
    for rule in alerts(pinned_docs):
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and len(rule["annotations"]["description"]) > 60, rule["alert"]


def test_every_alert_query_names_only_metrics_the_services_export(pinned_docs):
    load_catalogue().check({rule["alert"]: rule["expr"] for rule in alerts(pinned_docs)})


def test_alerts_look_only_at_the_release_namespace(default_docs):
    for rule in alerts(default_docs):
        selectors = rule["expr"].count("{")
        assert rule["expr"].count('namespace="market-spread"') == selectors, rule["alert"]


def test_alert_thresholds_and_topic_follow_the_values():
    docs = cs.render(sets=("monitoring.rules.latencyObjectiveSeconds=1", "monitoring.rules.lagRecords=5000",
                           "default.settings.orders_topic=orders-v2", "components.receiver.settings.group_id=rx"))
    exprs = {rule["alert"]: rule["expr"] for rule in alerts(docs)}
    assert exprs["MarketSpreadLatencyAboveObjective"].endswith("> 1")
    assert "> 5000" in exprs["MarketSpreadJobLagGrowing"]
    assert 'topic="orders-v2"' in exprs["MarketSpreadNoRejections"]
    assert 'consumergroup=~"rx"' in exprs["MarketSpreadReceiverLagGrowing"]


def test_the_rules_can_be_turned_off_alone():
    kinds = {doc["kind"] for doc in cs.render(sets=("monitoring.rules.enabled=false",))}
    assert "PrometheusRule" not in kinds and "PodMonitor" in kinds
