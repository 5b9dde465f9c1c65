"""The chart installed with the real helm into the real API server: `helm install --wait`, what the
API server stores, where the scheduler puts the pods, `helm upgrade` and `helm rollback`.

Real: helm, the API server (schema validation of every object, the operators' CRDs included,
RBAC, Pod Security admission, QoS classes), the controller-manager (Deployments -> ReplicaSets ->
Pods, the persistent-volume binder), the scheduler. Simulated: the nodes, and the pods' running
state: kwok marks each scheduled pod Running and Ready at once, without running a container or
the readiness probe. No operator runs, so Kafka, KafkaNodePool, KafkaTopic, SparkApplication,
PodMonitor, ServiceMonitor and PrometheusRule are accepted and stored, and nothing acts on them.
"""

from __future__ import annotations

import json
import time

import pytest
from e2e_support import (CHECKPOINT_CLAIM, COMPONENT, GENERAL_NODE, INSTANCE, PINNED_VALUES, RELEASE, Release,
                         create_namespace, delete_release_and_namespace, new_namespace_name, pinned_values,
                         provide_checkpoint_volume, running_and_ready, wait_for)

# The first module to need the cluster may start it (and on a fresh machine build it first).
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]

SERVICES = ("sender-nbbo", "sender-orders", "receiver")
CUSTOM_KINDS = {"Kafka", "KafkaNodePool", "KafkaTopic", "SparkApplication", "PodMonitor", "ServiceMonitor",
                "PrometheusRule"}


@pytest.fixture(scope="module")
def release(tools):
    namespace = new_namespace_name()
    create_namespace(tools, namespace)
    claim = pinned_values()["job"]["checkpoint"]["persistentVolumeClaim"]
    volume = provide_checkpoint_volume(tools, namespace, claim["size"], claim["accessModes"])
    started = time.monotonic()
    tools.helm_run("install", RELEASE, "charts/market-spread", f"--namespace={namespace}",
                   "--values", str(PINNED_VALUES), "--wait", "--timeout=3m")
    print(f"helm install --wait took {time.monotonic() - started:.1f} s")
    yield Release(tools, namespace)
    delete_release_and_namespace(tools, namespace, volume)


def _stored(release: Release, doc: dict) -> dict:
    kind, name = doc["kind"], doc["metadata"]["name"]
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    resource = f"{kind.lower()}.{group}" if group else kind.lower()
    return release.get(resource, name)


def _contains(stored, rendered, path: str = "") -> list[str]:
    """Where `rendered` is not found within `stored` (the API server may add defaults, never drop)."""
    if isinstance(rendered, dict):
        if not isinstance(stored, dict):
            return [path]
        return [miss for key, value in rendered.items()
                for miss in (_contains(stored[key], value, f"{path}.{key}") if key in stored else [f"{path}.{key}"])]
    if isinstance(rendered, list):
        if not isinstance(stored, list) or len(stored) != len(rendered):
            return [path]
        return [miss for i, (s, r) in enumerate(zip(stored, rendered)) for miss in _contains(s, r, f"{path}[{i}]")]
    return [] if stored == rendered or str(stored) == str(rendered) else [f"{path}: {stored!r} != {rendered!r}"]


def test_helm_install_waited_until_every_deployment_was_available(release):
    [first] = release.history()
    assert (first["revision"], first["status"]) == (1, "deployed")
    for component in SERVICES:
        status = release.deployment(component)["status"]
        assert status["availableReplicas"] == status["readyReplicas"] == status["replicas"] == 1, component


def test_every_object_helm_rendered_is_stored_as_rendered(release):
    manifest = release.manifest()
    assert CUSTOM_KINDS <= {doc["kind"] for doc in manifest}
    for doc in manifest:
        stored = _stored(release, doc)
        assert stored["metadata"]["labels"][INSTANCE] == RELEASE, doc["metadata"]["name"]
        # Custom resources pass through their CRD's structural schema, which would silently prune
        # any field it does not know: every rendered field is still there.
        for part in ("spec", "data", "rules", "roleRef", "subjects"):
            if part in doc:
                assert _contains(stored[part], doc[part]) == [], f"{doc['kind']} {doc['metadata']['name']}"


def test_the_custom_resources_are_accepted_but_nothing_reconciles_them(release):
    manifest = release.manifest()
    counts = {kind: sum(1 for d in manifest if d["kind"] == kind) for kind in CUSTOM_KINDS}
    # ci/pinned-values.yaml: a controller pool and a broker pool, four topics, two pod monitors
    # (the driver, the brokers), one service monitor (senders and receiver), one rule set.
    assert counts == {"Kafka": 1, "KafkaNodePool": 2, "KafkaTopic": 4, "SparkApplication": 1, "PodMonitor": 2,
                      "ServiceMonitor": 1, "PrometheusRule": 1}
    for doc in manifest:
        if doc["kind"] in CUSTOM_KINDS:
            assert "status" not in _stored(release, doc), f"{doc['kind']} {doc['metadata']['name']} has a status"
    assert release.get("pods", "--selector=strimzi.io/cluster")["items"] == []  # no Strimzi, no brokers


def test_the_api_server_refuses_a_custom_resource_that_its_crd_does_not_allow(release):
    topic = next(d for d in release.manifest() if d["kind"] == "KafkaTopic")
    topic["metadata"]["name"] = "not-a-topic"
    topic["spec"]["partitions"] = "eight"
    refused = release.tools.kubectl_run("create", "--dry-run=server", release.ns, "-f", "-",
                                        stdin=json.dumps(topic), check=False)
    assert refused.returncode != 0
    assert 'spec.partitions: Invalid value: "string": spec.partitions in body must be of type integer' in refused.stderr


@pytest.mark.parametrize("component", SERVICES)
def test_the_controller_manager_makes_the_pods_and_the_scheduler_puts_them_on_the_general_node(release, component):
    [pod] = wait_for(lambda: release.running_on_the_general_node(component), f"{component} running")
    deployment = release.deployment(component)
    replica_set = release.get("replicaset", pod["metadata"]["ownerReferences"][0]["name"])
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert replica_set["metadata"]["ownerReferences"][0]["uid"] == deployment["metadata"]["uid"]
    # The only node without the pinned pool's taint.
    assert pod["spec"]["nodeName"] == GENERAL_NODE
    events = wait_for(lambda: release.get("events", f"--field-selector=involvedObject.name={pod['metadata']['name']},"
                                                    "reason=Scheduled")["items"], "the Scheduled event")
    assert events[0]["reportingComponent"] == "default-scheduler"
    # Requests below limits (ci/pinned-values.yaml: 1 CPU, limit 2): only the job is Guaranteed.
    assert pod["status"]["qosClass"] == "Burstable"


@pytest.mark.parametrize("component", SERVICES)
def test_kwok_reports_ready_pods_although_their_readiness_probe_never_runs(release, component):
    [pod] = release.component_pods(component)
    container = pod["spec"]["containers"][0]
    # The chart's probe is there, and no kubelet runs it: kwok sets Ready itself, which is what
    # lets `helm install --wait` see the Deployments available.
    assert container["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics", "scheme": "HTTP"}
    assert running_and_ready(pod)
    assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_the_checkpoint_claim_is_bound_by_the_persistent_volume_controller(release):
    claim = release.get("pvc", CHECKPOINT_CLAIM)
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["volumeName"] == f"{release.namespace}-checkpoints"
    assert claim["status"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def test_helm_upgrade_changes_the_deployments_and_helm_rollback_restores_them(release):
    before = release.history()[-1]["revision"]
    assert release.env_of("sender-orders")["MARKETSPREAD_RATE"] == "100000"
    old_pod = release.component_pods("sender-nbbo")[0]["metadata"]["name"]

    release.helm("upgrade", RELEASE, "charts/market-spread", "--reset-then-reuse-values", "--wait", "--timeout=3m",
                 "--set", "components.sender-orders.settings.rate=5000",
                 "--set", "components.sender-nbbo.replicas=0", "--set", "job.executor.instances=3")
    assert [(h["revision"], h["status"]) for h in release.history()[-2:]] == [
        (before, "superseded"), (before + 1, "deployed")]
    assert release.env_of("sender-orders")["MARKETSPREAD_RATE"] == "5000"
    assert release.deployment("sender-nbbo")["spec"]["replicas"] == 0
    wait_for(lambda: not release.component_pods("sender-nbbo"), "the nbbo sender's pod to go")
    assert release.spark_application()["spec"]["executor"]["instances"] == 3

    release.helm("rollback", RELEASE, str(before), "--wait", "--timeout=3m")
    latest = release.history()[-1]
    assert (latest["revision"], latest["status"], latest["description"]) == (
        before + 2, "deployed", f"Rollback to {before}")
    assert release.env_of("sender-orders")["MARKETSPREAD_RATE"] == "100000"
    assert release.deployment("sender-nbbo")["spec"]["replicas"] == 1
    assert release.spark_application()["spec"]["executor"]["instances"] == 2
    [pod] = wait_for(lambda: release.running_on_the_general_node("sender-nbbo"), "the nbbo sender back")
    assert pod["metadata"]["name"] != old_pod  # a new pod, made and placed anew
    assert pod["metadata"]["labels"][COMPONENT] == "sender-nbbo"
