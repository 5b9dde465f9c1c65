"""The local cluster of `make cluster-up` behaves as the Helm chart's tests will rely on.

The API server, the scheduler and the controller-manager are the real ones; only the nodes and
their kubelets are simulated (by kwok). So these tests check what the real components decide:
where pods are placed, what QoS class they get, which CRDs are served.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import sys
from pathlib import Path

import pytest
import yaml

# The first test may have to build the control plane from source (cold: many minutes).
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]

POOL = "marketspread.io/pool"
GENERAL_NODE = "kwok-general-0"
PINNED_NODES = {"kwok-pinned-0", "kwok-pinned-1"}
PINNED_TOLERATION = {"key": POOL, "operator": "Equal", "value": "pinned", "effect": "NoSchedule"}
CLUSTER_SCRIPT = Path(__file__).resolve().parents[2] / "k8s" / "cluster" / "cluster.py"


def _cluster_module():
    """k8s/cluster/cluster.py, where the pinned versions and the CRD folder are read."""
    if (module := sys.modules.get("marketspread_cluster")) is None:
        spec = importlib.util.spec_from_file_location("marketspread_cluster", CLUSTER_SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def _nodes(kubectl) -> dict[str, dict]:
    return {node["metadata"]["name"]: node for node in kubectl.get("nodes")["items"]}


def _conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def _pod(name: str, *, requests: dict | None = None, limits: dict | None = None,
         node_selector: dict | None = None, tolerations: list | None = None) -> dict:
    resources = {"requests": requests or {"cpu": "100m", "memory": "64Mi"}}
    if limits:
        resources["limits"] = limits
    spec = {"containers": [{"name": "main", "image": "registry.invalid/never-pulled:1",  # kwok runs nothing
                            "resources": resources}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": spec}


def _running_and_ready(kubectl, namespace: str, name: str) -> dict | None:
    pod = kubectl.get("pod", name, f"--namespace={namespace}")
    ready = _conditions(pod).get("Ready", {}).get("status") == "True"
    return pod if pod["status"].get("phase") == "Running" and ready else None


def _unschedulable_message(kubectl, namespace: str, name: str) -> str | None:
    scheduled = _conditions(kubectl.get("pod", name, f"--namespace={namespace}")).get("PodScheduled", {})
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return scheduled["message"]
    return None


def test_the_api_server_answers_as_the_pinned_kubernetes_release(kubectl, cluster):
    server = json.loads(kubectl.run("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == _cluster_module().module_versions()["kubernetes"]
    assert kubectl.run("get", "--raw=/readyz").stdout == "ok"
    assert cluster["server"].startswith("https://127.0.0.1:")
    assert {name for name, state in cluster["components"].items() if state["healthy"]} == {
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}


def test_there_are_exactly_three_simulated_nodes_and_all_are_ready(kubectl):
    nodes = _nodes(kubectl)
    assert set(nodes) == {GENERAL_NODE} | PINNED_NODES
    for name, node in nodes.items():
        assert _conditions(node)["Ready"]["status"] == "True", name
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert node["metadata"]["labels"]["kubernetes.io/os"] == "linux"
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
        assert not node["spec"].get("unschedulable")
        # A kubelet of the control plane's own version, as far as anything can tell.
        assert node["status"]["nodeInfo"]["kubeletVersion"] == _cluster_module().module_versions()["kubernetes"]


def test_the_general_node_is_untainted_with_4_cpus_and_16_gib(kubectl):
    node = _nodes(kubectl)[GENERAL_NODE]
    assert node["metadata"]["labels"][POOL] == "general"
    assert not node["spec"].get("taints")
    capacity, allocatable = node["status"]["capacity"], node["status"]["allocatable"]
    assert (capacity["cpu"], capacity["memory"], capacity["pods"]) == ("4", "16Gi", "110")
    # A kubelet's reservations come off capacity.
    assert (allocatable["cpu"], allocatable["memory"]) == ("3800m", "15260Mi")


def test_the_pinned_nodes_are_labelled_and_tainted_with_8_cpus_and_32_gib(kubectl):
    nodes = _nodes(kubectl)
    for name in PINNED_NODES:
        node = nodes[name]
        assert node["metadata"]["labels"][POOL] == "pinned"
        assert node["spec"]["taints"] == [{"key": POOL, "value": "pinned", "effect": "NoSchedule"}]
        capacity, allocatable = node["status"]["capacity"], node["status"]["allocatable"]
        assert (capacity["cpu"], capacity["memory"]) == ("8", "32Gi")
        # One physical core (two hardware threads) reserved for the system, as the pinned pool's
        # reservedSystemCPUs does: what remains is whole CPUs for Guaranteed pods to own.
        assert (allocatable["cpu"], allocatable["memory"]) == ("6", "30620Mi")


def test_every_operator_crd_from_the_shared_schemas_is_established(kubectl):
    crds_dir = _cluster_module().Settings.from_env().crds_dir
    expected = [yaml.safe_load(path.read_text()) for path in sorted(crds_dir.rglob("*.yaml"))]
    assert {crd["spec"]["group"] for crd in expected} == {
        "kafka.strimzi.io", "sparkoperator.k8s.io", "monitoring.coreos.com"}
    installed = {crd["metadata"]["name"]: crd for crd in kubectl.get("crd")["items"]}
    for crd in expected:
        name = crd["metadata"]["name"]
        assert name in installed, f"{name} is not installed"
        conditions = _conditions(installed[name])
        assert conditions["Established"]["status"] == "True", name
        assert conditions["NamesAccepted"]["status"] == "True", name
        assert {v["name"] for v in installed[name]["spec"]["versions"] if v["served"]} == {
            v["name"] for v in crd["spec"]["versions"] if v["served"]}


def test_the_api_server_serves_the_custom_resource_versions_the_chart_will_use(kubectl):
    served = set(kubectl.run("api-versions").stdout.split())
    assert {"kafka.strimzi.io/v1", "sparkoperator.k8s.io/v1beta2", "monitoring.coreos.com/v1"} <= served
    assert "kafka.strimzi.io/v1beta2" not in served  # Strimzi 1.x serves v1 only


def test_a_deployment_gets_its_pods_scheduled_onto_the_general_node_by_the_real_scheduler(kubectl, namespace,
                                                                                          eventually):
    template = _pod("spread-web")
    kubectl.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "spread-web"},
                    "spec": {"replicas": 2, "selector": {"matchLabels": template["metadata"]["labels"]},
                             "template": {"metadata": template["metadata"], "spec": template["spec"]}}},
                   namespace)

    eventually(lambda: kubectl.get("deployment", "spread-web", f"--namespace={namespace}")["status"].get(
        "readyReplicas") == 2, "2 ready replicas")
    pods = kubectl.get("pods", "--selector=app=spread-web", f"--namespace={namespace}")["items"]
    assert len(pods) == 2
    for pod in pods:
        # The controller-manager made them (Deployment -> ReplicaSet -> Pod) ...
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        # ... the scheduler placed them, on the only node without a taint ...
        assert pod["spec"]["nodeName"] == GENERAL_NODE
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        # ... and kwok, as the node's kubelet, reported them running with an address.
        assert pod["status"]["phase"] == "Running"
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network("10.244.0.0/16")
        name = pod["metadata"]["name"]
        selector = f"--field-selector=involvedObject.name={name},reason=Scheduled"
        events = eventually(lambda: kubectl.get("events", f"--namespace={namespace}", selector)["items"],
                            f"the Scheduled event of {name}")
        assert events[0]["reportingComponent"] == "default-scheduler"
        assert f"to {GENERAL_NODE}" in events[0]["message"]


def test_a_pod_that_selects_and_tolerates_the_pinned_pool_lands_on_a_pinned_node(kubectl, namespace, eventually):
    kubectl.create(_pod("pinned-worker", node_selector={POOL: "pinned"}, tolerations=[PINNED_TOLERATION]), namespace)
    pod = eventually(lambda: _running_and_ready(kubectl, namespace, "pinned-worker"), "pinned-worker to run")
    assert pod["spec"]["nodeName"] in PINNED_NODES


def test_a_pod_that_selects_the_pinned_pool_without_the_toleration_stays_pending(kubectl, namespace, eventually):
    kubectl.create(_pod("intolerant", node_selector={POOL: "pinned"}), namespace)
    message = eventually(lambda: _unschedulable_message(kubectl, namespace, "intolerant"), "intolerant to be refused")
    assert "untolerated taint" in message
    assert "nodeName" not in kubectl.get("pod", "intolerant", f"--namespace={namespace}")["spec"]


def test_a_pod_asking_more_cpu_than_the_general_node_allocates_is_not_scheduled(kubectl, namespace, eventually):
    # 4 CPUs of capacity but 3.8 allocatable: the scheduler counts allocatable.
    kubectl.create(_pod("too-big", requests={"cpu": "3900m", "memory": "64Mi"}), namespace)
    message = eventually(lambda: _unschedulable_message(kubectl, namespace, "too-big"), "too-big to be refused")
    assert "Insufficient cpu" in message


def test_a_pod_with_integer_cpu_and_requests_equal_to_limits_is_guaranteed(kubectl, namespace, eventually):
    resources = {"cpu": "2", "memory": "4Gi"}
    kubectl.create(_pod("guaranteed", requests=resources, limits=resources, node_selector={POOL: "pinned"},
                        tolerations=[PINNED_TOLERATION]), namespace)
    pod = eventually(lambda: _running_and_ready(kubectl, namespace, "guaranteed"), "guaranteed to run")
    assert pod["status"]["qosClass"] == "Guaranteed"
    assert pod["spec"]["nodeName"] in PINNED_NODES


def test_a_pod_with_requests_below_its_limits_is_only_burstable(kubectl, namespace, eventually):
    # Small, so it fits beside whatever other modules' releases still hold on the general node.
    kubectl.create(_pod("burstable", requests={"cpu": "100m", "memory": "64Mi"},
                        limits={"cpu": "200m", "memory": "64Mi"}), namespace)
    pod = eventually(lambda: _running_and_ready(kubectl, namespace, "burstable"), "burstable to run")
    assert pod["status"]["qosClass"] == "Burstable"


def test_the_api_server_never_dials_a_simulated_node_or_pod(kubectl, namespace, eventually):
    # Logs, exec, webhooks and aggregated APIs would make the API server connect to addresses
    # that nothing serves here; all of that egress goes to a socket that does not exist.
    kubectl.create(_pod("quiet"), namespace)
    eventually(lambda: _running_and_ready(kubectl, namespace, "quiet"), "quiet to run")
    logs = kubectl.run("logs", "quiet", f"--namespace={namespace}", check=False)
    assert logs.returncode != 0
    assert "no-egress.sock" in logs.stderr
