"""k8s/: what the cluster needs beside the chart, consistent with the chart's values."""

import os
import re
import subprocess

import kubernetes_validate
import pytest
import yaml

import chart_support as cs

K8S = cs.REPO / "k8s"


def load(path):
    return yaml.safe_load((K8S / path).read_text())


def chart_values():
    return yaml.safe_load((cs.CHART / "values.yaml").read_text())


def test_the_pinned_kubelet_hands_out_exclusive_whole_physical_cores():
    config = load("pinned-pool/kubelet-config.yaml")
    assert (config["apiVersion"], config["kind"]) == ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration")
    assert config["cpuManagerPolicy"] == "static"
    assert config["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
    assert re.fullmatch(r"\d+([-,]\d+)*", config["reservedSystemCPUs"])
    assert config["topologyManagerPolicy"] in {"single-numa-node", "restricted"}
    assert config["topologyManagerScope"] in {"pod", "container"}


def test_the_chart_asks_for_even_cpus_because_the_kubelet_allocates_whole_cores():
    assert load("pinned-pool/kubelet-config.yaml")["cpuManagerPolicyOptions"]["full-pcpus-only"] == "true"
    assert chart_values()["pinnedPool"]["cpuMultiple"] == 2


def test_the_documented_label_and_taint_are_the_ones_the_chart_selects_and_tolerates():
    readme = (K8S / "pinned-pool" / "README.md").read_text()
    pool = chart_values()["pinnedPool"]
    (key, value), = pool["nodeSelector"].items()
    (toleration,) = pool["tolerations"]
    assert f"kubectl label node NODE {key}={value}" in readme
    assert (toleration["key"], toleration["value"]) == (key, value)
    assert f"kubectl taint node NODE {key}={value}:{toleration['effect']}" in readme


def test_the_namespace_enforces_pod_security_restricted_and_is_valid():
    namespace = load("namespace.yaml")
    kubernetes_validate.validate(namespace, cs.VALIDATE_VERSIONS[-1], strict=True)
    labels = namespace["metadata"]["labels"]
    assert namespace["metadata"]["name"] == cs.NAMESPACE
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


def test_strimzi_watches_the_namespace_and_makes_its_pods_pass_restricted():
    values = load("operators/strimzi-values.yaml")
    assert values["watchNamespaces"] == [cs.NAMESPACE] and values["watchAnyNamespace"] is False
    assert {"name": "STRIMZI_POD_SECURITY_PROVIDER_CLASS", "value": "restricted"} in values["extraEnvs"]


def test_the_spark_operator_submits_in_the_namespace_with_its_webhook_and_leaves_the_account_to_the_chart():
    values = load("operators/spark-operator-values.yaml")
    assert values["spark"]["jobNamespaces"] == [cs.NAMESPACE]
    assert values["webhook"]["enable"] is True
    assert values["spark"]["serviceAccount"]["create"] is False
    assert chart_values()["job"]["serviceAccount"]["create"] is True
    assert values["prometheus"]["podMonitor"]["labels"]["release"] == chart_values()["monitoring"]["prometheusRelease"]


@pytest.mark.helm
def test_grafana_loads_the_charts_dashboard_configmaps_into_their_folder(default_docs):
    sidecar = load("operators/kube-prometheus-stack-values.yaml")["grafana"]["sidecar"]["dashboards"]
    config_map = cs.by_kind(default_docs, "ConfigMap")[0]["metadata"]
    assert sidecar["enabled"] is True
    assert config_map["labels"][sidecar["label"]] == sidecar["labelValue"]
    assert sidecar["folderAnnotation"] in config_map["annotations"]
    assert sidecar["searchNamespace"] == "ALL"


def test_prometheus_selects_monitors_by_the_release_label_the_chart_sets():
    spec = load("operators/kube-prometheus-stack-values.yaml")["prometheus"]["prometheusSpec"]
    assert spec["serviceMonitorSelectorNilUsesHelmValues"] is True
    assert spec["podMonitorSelectorNilUsesHelmValues"] is True
    assert spec["ruleSelectorNilUsesHelmValues"] is True


@pytest.fixture()
def recorded_install(tmp_path):
    """Run install-operators.sh with stand-ins for helm and kubectl that record their arguments."""
    log = tmp_path / "calls.log"
    for tool in ("helm", "kubectl"):
        stub = tmp_path / tool
        stub.write_text(f'#!/usr/bin/env bash\nprintf "{tool}" >> "{log}"\n'
                        f'for a in "$@"; do printf " %s" "$a" >> "{log}"; done\necho >> "{log}"\n'
                        f'if [ "{tool}" = kubectl ]; then cat > "{tmp_path}/applied.yaml"; fi\n')
        stub.chmod(0o755)

    def run(**env):
        result = subprocess.run(["bash", str(K8S / "install-operators.sh")], capture_output=True, text=True,
                                env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", **env}, timeout=60)
        assert result.returncode == 0, result.stderr
        return log.read_text().splitlines(), yaml.safe_load((tmp_path / "applied.yaml").read_text())
    return run


def test_the_install_script_installs_the_namespace_then_the_three_operators_in_order(recorded_install):
    calls, namespace = recorded_install()
    assert namespace == load("namespace.yaml")
    installs = [call for call in calls if call.startswith("helm upgrade --install")]
    assert [call.split()[3:5] for call in installs] == [
        ["kube-prometheus-stack", "oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack"],
        ["strimzi", "oci://quay.io/strimzi-helm/strimzi-kafka-operator"],
        ["spark-operator", "spark-operator/spark-operator"]]
    assert calls[0] == "kubectl apply -f -"
    assert "--version 88." in installs[0] and "--version 1.2.0" in installs[1] and "--version 2.5.2" in installs[2]
    for call in installs:
        values_file = call.split("--values ")[1].split()[0]
        assert os.path.isfile(values_file) and values_file.startswith(str(K8S / "operators"))
        assert "--wait" in call
    # The chart's monitors carry `release: <monitoring.prometheusRelease>`: the release name must match.
    assert installs[0].split()[3] == chart_values()["monitoring"]["prometheusRelease"]


def test_the_install_script_points_the_operators_at_another_namespace_when_asked(recorded_install):
    calls, namespace = recorded_install(NAMESPACE="bench")
    assert namespace["metadata"]["name"] == "bench"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert any("--set watchNamespaces={bench}" in call for call in calls)
    assert any("--set spark.jobNamespaces={bench}" in call for call in calls)


def test_the_install_script_is_strict_bash():
    text = (K8S / "install-operators.sh").read_text()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert subprocess.run(["bash", "-n", str(K8S / "install-operators.sh")]).returncode == 0
    assert os.access(K8S / "install-operators.sh", os.X_OK)
