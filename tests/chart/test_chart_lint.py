"""helm lint and helm template, for the chart's own values and every ci/*-values.yaml."""

import subprocess

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


def lint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cs.helm(), "lint", str(cs.CHART), "--strict", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_chart_lints_strictly_with_its_own_values():
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", cs.CI_VALUES, ids=lambda p: p.name)
def test_the_chart_lints_strictly_with_each_ci_values_file(values):
    result = lint("--values", str(values))
    assert result.returncode == 0, result.stdout + result.stderr


def test_there_are_ci_values_for_a_local_cluster_and_for_a_pinned_pool():
    assert [p.name for p in cs.CI_VALUES] == ["default-values.yaml", "pinned-values.yaml"]


@pytest.mark.parametrize("values", [(), *[(str(p),) for p in cs.CI_VALUES]], ids=["values.yaml", "default", "pinned"])
def test_helm_template_renders_every_object_kind_the_chart_promises(values):
    kinds = {doc["kind"] for doc in cs.render(values)}
    assert kinds == {
        "Deployment", "Service", "Kafka", "KafkaNodePool", "KafkaTopic", "SparkApplication",
        "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim",
        "ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap",
    }


def test_notes_name_the_commands_to_follow_the_release_and_say_when_monitors_were_skipped():
    # helm template does not render NOTES.txt; a client-side install dry run does.
    notes = subprocess.run([cs.helm(), "install", cs.RELEASE, str(cs.CHART), "--dry-run=client",
                            "--namespace", cs.NAMESPACE], capture_output=True, text=True, timeout=120)
    assert notes.returncode == 0, notes.stderr
    text = notes.stdout.split("NOTES:", 1)[1]
    assert "kubectl -n market-spread logs -f deploy/market-spread-receiver" in text
    assert "spark-role=driver" in text
    # No prometheus-operator API on a bare client: the notes say the monitors were not installed.
    assert "No prometheus-operator API" in text
