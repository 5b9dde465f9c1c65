"""docs/kubernetes.md, run against the local cluster from top to bottom, as an operator would.

Every command of the document's ```sh blocks runs here, unchanged but for the namespace (each
run has its own instead of `market-spread`) and `REGISTRY` (`registry.invalid`: kwok never pulls
an image); only the commands in NOT_RUN are not run, each with the reason it cannot run here. A
command added to the document runs here without a change to this file, and fails the test of its
section if it fails; the checks after a command find it by a piece of its text, and a check whose
command left the document fails too.

The tests share one release and run in file order, one section of the document each.

Real: helm, kubectl, the API server, the controller-manager (Deployments, the garbage collector,
the persistent-volume binder), the scheduler, and spark-submit for the driver pod the "Restart the
job" section deletes. Simulated: the nodes and the pods' running state (kwok: Running and Ready
without a container), and the operators: nothing reconciles Kafka, KafkaTopic or
SparkApplication, so the commands that wait for an operator's work are not run.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e_support import (CHECKPOINT_CLAIM, COMPONENT, GENERAL_NODE, INSTANCE, RELEASE, Release, create_namespace,
                         delete_release_and_namespace, doc_commands, doc_sections, grant_submitter, localize,
                         new_namespace_name, pinned_values, provide_checkpoint_volume, spark_submit, wait_for)

# The first module to need the cluster may start it (and on a fresh machine build it first).
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]

NO_OPERATOR = "the operators cannot run here (no container runtime), so their installation is not tried"
NO_KUBELET = ("logs come from the node's kubelet, and the API server here has none to ask: it refuses "
              "(test_cluster.py checks that), after kubectl has retried for 20 s")
NOT_RUN = {
    "k8s/install-operators.sh": NO_OPERATOR + "; its first step, the namespace, is done as it does it",
    "docker build -f images/sender/Dockerfile -t REGISTRY/market-spread/sender:0.1.0 .": "no container runtime",
    "docker build -f images/receiver/Dockerfile -t REGISTRY/market-spread/receiver:0.1.0 .": "no container runtime",
    "docker build -f images/spark-job/Dockerfile -t REGISTRY/market-spread/spark-job:0.1.0 .": "no container runtime",
    "docker push REGISTRY/market-spread/sender:0.1.0": "no container runtime, no registry",
    "kubectl -n market-spread wait kafka/market-spread --for=condition=Ready --timeout=10m":
        "waits for the Ready condition that only Strimzi writes",
    "kubectl -n market-spread get sparkapplication market-spread-job -w": "watches until interrupted",
    "kubectl -n market-spread logs -f -l app.kubernetes.io/component=job,spark-role=driver": NO_KUBELET,
    "kubectl -n market-spread logs -f deploy/market-spread-sender-orders": NO_KUBELET,
    "kubectl -n market-spread logs -f deploy/market-spread-receiver": NO_KUBELET,
    "kubectl -n market-spread logs -f -l app.kubernetes.io/component=job,spark-role=executor --max-log-requests 10":
        "no executor ever exists: the driver never runs",
    "kubectl -n market-spread logs -f -l strimzi.io/pool-name=broker --max-log-requests 10":
        "no broker pod exists without Strimzi",
    "kubectl -n market-spread port-forward svc/market-spread-receiver 9102:9102 & curl -s localhost:9102/metrics":
        "a port-forward goes through a kubelet to a process; none runs (test_e2e_status reads a real receiver)",
    "kubectl -n market-spread port-forward pod/$(kubectl -n market-spread get pod -l spark-role=driver -o name | "
    "cut -d/ -f2) 4040:4040": "a port-forward goes through a kubelet to the Spark UI; the driver never runs",
    "kubectl -n monitoring port-forward svc/kube-prometheus-stack-prometheus 9090:9090": NO_OPERATOR,
    "kubectl -n monitoring port-forward svc/kube-prometheus-stack-grafana 3000:80": NO_OPERATOR,
    "GRAFANA_URL=http://localhost:3000 GRAFANA_TOKEN=... marketspread dashboards push":
        "needs a Grafana (tests/chart/test_grafana_dashboards.py pushes to a stand-in)",
    "helm uninstall spark-operator -n spark-operator": NO_OPERATOR,
    "helm uninstall strimzi -n strimzi": NO_OPERATOR,
    "helm uninstall kube-prometheus-stack -n monitoring": NO_OPERATOR,
}


@pytest.fixture(scope="module")
def release(tools):
    namespace = new_namespace_name("ms-doc")
    create_namespace(tools, namespace)
    claim = pinned_values()["job"]["checkpoint"]["persistentVolumeClaim"]
    volume = provide_checkpoint_volume(tools, namespace, claim["size"], claim["accessModes"])
    yield Release(tools, namespace)
    delete_release_and_namespace(tools, namespace, volume)


def walk(release: Release, section: str, checks: dict[str, Callable[[subprocess.CompletedProcess], None]]) -> None:
    """Run the section's commands in order; after each, the check whose key is part of its text."""
    commands = doc_commands(section)
    for key in checks:
        assert sum(key in command for command in commands) == 1, f"{key!r} is not one command of {section!r}"
    for command in commands:
        if command in NOT_RUN:
            continue
        result = release.tools.run(localize(command, release.namespace))
        for key, check in checks.items():
            if key in command:
                check(result)


def test_every_command_of_the_doc_runs_here_or_is_listed_with_the_reason():
    commands = {command for section in doc_sections() for command in doc_commands(section)}
    assert len(commands) >= 40
    assert set(NOT_RUN) <= commands, f"no longer in the document: {set(NOT_RUN) - commands}"
    assert all(reason for reason in NOT_RUN.values())
    # Everything that changes or reads the release does run.
    assert not {c for c in commands - set(NOT_RUN) if not c.startswith(("helm ", "kubectl ", "marketspread "))}


def test_install(release):
    def installed(result):
        [revision] = release.history()
        assert (revision["revision"], revision["status"]) == (1, "deployed")
        for component in ("sender-nbbo", "sender-orders", "receiver"):
            wait_for(lambda: release.running_on_the_general_node(component), f"{component} running")
            image = release.deployment(component)["spec"]["template"]["spec"]["containers"][0]["image"]
            assert image.startswith("registry.invalid/market-spread/") and image.endswith(":0.1.0")
        assert release.spark_application()["spec"]["image"] == "registry.invalid/market-spread/spark-job:0.1.0"
        wait_for(lambda: release.get("pvc", CHECKPOINT_CLAIM)["status"].get("phase") == "Bound", "the claim bound")

    def listed(result):
        for name in ("kafka.kafka.strimzi.io/market-spread", "kafkanodepool.kafka.strimzi.io/broker",
                     "kafkanodepool.kafka.strimzi.io/controller", "kafkatopic.kafka.strimzi.io/market-spread-orders",
                     "sparkapplication.sparkoperator.k8s.io/market-spread-job",
                     "deployment.apps/market-spread-receiver", "pod/market-spread-receiver-"):
            assert name in result.stdout, name

    def no_state_without_an_operator(result):
        assert result.stdout == ""

    walk(release, "Install", {"helm upgrade --install": installed, "get kafka,kafkanodepool": listed,
                              "applicationState": no_state_without_an_operator})


def test_look_and_operate(release):
    pods_before = {}

    def status(result):
        for pod in release.pods(f"{INSTANCE}={RELEASE}"):
            line = next(line for line in result.stdout.splitlines() if line.strip().startswith(pod["metadata"]["name"]))
            assert line.split()[-2:] == [pod["spec"]["nodeName"], pod["status"]["qosClass"]]
        assert "market-spread-job: state - (no status: no operator has reconciled it)" in result.stdout

    def wide(result):
        rows = [line.split() for line in result.stdout.splitlines()[1:]]
        assert {row[0] for row in rows} == {p["metadata"]["name"] for p in release.get("pods")["items"]}
        assert all(row[6] == GENERAL_NODE and row[2] == "Running" and row[1] == "1/1" for row in rows)

    def described_deployment(result):
        assert re.search(r"^StrategyType:\s+Recreate$", result.stdout, re.MULTILINE)
        assert "1 desired | 1 updated | 1 total | 1 available | 0 unavailable" in result.stdout

    def described_pod(result):
        [pod] = release.component_pods("receiver")
        pods_before["receiver"] = pod["metadata"]["name"]
        assert re.search(rf"^Node:\s+{GENERAL_NODE}/127.0.0.1$", result.stdout, re.MULTILINE)
        assert re.search(r"^QoS Class:\s+Burstable$", result.stdout, re.MULTILINE)
        assert f"Successfully assigned {release.namespace}/{pod['metadata']['name']} to {GENERAL_NODE}" in result.stdout

    def paused(result):
        assert release.deployment("sender-orders")["spec"]["replicas"] == 0
        wait_for(lambda: not release.component_pods("sender-orders"), "the order sender's pod to go")

    def resumed(result):
        wait_for(lambda: release.running_on_the_general_node("sender-orders"), "the order sender back")

    def restarted(result):
        annotations = release.deployment("receiver")["spec"]["template"]["metadata"]["annotations"]
        assert "kubectl.kubernetes.io/restartedAt" in annotations

    def rolled_out(result):
        assert 'deployment "market-spread-receiver" successfully rolled out' in result.stdout
        [pod] = wait_for(lambda: release.running_on_the_general_node("receiver"), "the new receiver pod")
        assert pod["metadata"]["name"] != pods_before["receiver"]

    walk(release, "Look and operate", {
        "marketspread k8s status": status, "get pods -o wide": wide, "describe deploy/": described_deployment,
        "describe pod -l": described_pod, "--replicas=0": paused, "--replicas=1": resumed,
        "rollout restart": restarted, "rollout status": rolled_out})


def test_settings(release):
    def faster(result):
        assert release.env_of("sender-orders")["MARKETSPREAD_RATE"] == "20000"
        assert release.env_of("sender-nbbo")["MARKETSPREAD_RATE"] == "20000"
        # The values the release was installed with are kept (ci/pinned-values.yaml's framed records).
        assert release.env_of("sender-orders")["MARKETSPREAD_RECORD_FORMAT"] == "framed"
        wait_for(lambda: release.running_on_the_general_node("sender-orders"), "the order sender replaced")

    walk(release, "Settings", {"settings.rate=20000": faster})


def test_scale(release):
    def partitions(result):
        topics = release.get("kafkatopics", f"--selector={INSTANCE}={RELEASE}")["items"]
        assert sorted(t["spec"]["partitions"] for t in topics) == [16] * 4

    def executors(result):
        assert release.spark_application()["spec"]["executor"]["instances"] == 4

    def no_executor_pods(result):
        assert "No resources found" in result.stderr

    walk(release, "Scale", {"kafka.topics.partitions=16": partitions, "job.executor.instances=4": executors,
                            "spark-role=executor": no_executor_pods})


def test_upgrade(release):
    revisions = {}

    def upgraded(result):
        revisions["upgraded"] = release.history()[-1]["revision"]
        for component in ("sender-nbbo", "sender-orders", "receiver"):
            image = release.deployment(component)["spec"]["template"]["spec"]["containers"][0]["image"]
            assert image.endswith(":0.2.0"), image
            [pod] = wait_for(lambda: release.running_on_the_general_node(component), f"{component} replaced")
            assert pod["spec"]["containers"][0]["image"].endswith(":0.2.0")
        assert release.spark_application()["spec"]["image"].endswith(":0.2.0")

    def history(result):
        assert f"{revisions['upgraded']}  " in result.stdout and "Upgrade complete" in result.stdout

    def rolled_back(result):
        latest = release.history()[-1]
        assert (latest["revision"], latest["description"]) == (
            revisions["upgraded"] + 1, f"Rollback to {revisions['upgraded'] - 1}")
        for component in ("sender-nbbo", "sender-orders", "receiver"):
            [pod] = wait_for(lambda: release.running_on_the_general_node(component), f"{component} back")
            assert pod["spec"]["containers"][0]["image"].endswith(":0.1.0")
        # What the earlier sections set is still there: the rollback went one revision back.
        assert release.env_of("sender-orders")["MARKETSPREAD_RATE"] == "20000"

    walk(release, "Upgrade", {"default.imageTag=0.2.0": upgraded, "history": history, "rollback": rolled_back})


def test_restart_the_job_from_its_checkpoint(release, cluster, tmp_path):
    # The driver to delete, made by spark-submit as the Spark operator would (test_e2e_spark_driver).
    grant_submitter(release.tools, release.namespace)
    submission = spark_submit(release.tools, release, cluster["server"],
                              Path(cluster["kubeconfig"]).parent / "pki" / "ca.crt", tmp_path)
    driver = wait_for(lambda: release.get("pods", f"--field-selector=metadata.name={submission.driver_pod}")["items"],
                      "the driver pod")[0]

    def driver_deleted(result):
        assert f'pod "{submission.driver_pod}" deleted' in result.stdout
        # The garbage collector takes what spark-submit made for the driver along with it.
        wait_for(lambda: not any(o["metadata"].get("ownerReferences", [{}])[0].get("uid") == driver["metadata"]["uid"]
                                 for kind in ("configmaps", "services", "networkpolicies")
                                 for o in release.get(kind)["items"]), "the driver's ConfigMap, Service and policy")

    def suspended(result):
        assert release.spark_application()["spec"]["suspend"] is True

    def resumed(result):
        assert release.spark_application()["spec"]["suspend"] is False

    claims = {}

    def job_removed(result):
        assert not release.get("sparkapplications")["items"]
        assert not release.get("serviceaccounts", f"--selector={COMPONENT}=job")["items"]
        claim = release.get("pvc", CHECKPOINT_CLAIM)  # kept: helm.sh/resource-policy: keep
        assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        claims["old"] = claim["metadata"]["uid"]

    def claim_deleted(result):
        assert not release.get("pvc")["items"]

    def job_back(result):
        assert release.spark_application()["spec"]["executor"]["instances"] == 4  # the Scale section's
        # A new, empty claim; it waits for storage (the old volume is Retained, and no provisioner runs).
        assert release.get("pvc", CHECKPOINT_CLAIM)["metadata"]["uid"] != claims["old"]

    walk(release, "Restart the job from its checkpoint", {
        "delete pod -l": driver_deleted, '"suspend":true': suspended, '"suspend":false': resumed,
        "job.enabled=false": job_removed, "delete pvc market-spread-checkpoints": claim_deleted,
        "job.enabled=true": job_back})


def test_logs_and_metrics_need_what_only_a_real_node_has():
    # Logs and port-forwards go through a kubelet to a running process; here there is neither.
    assert all(command in NOT_RUN for command in doc_commands("Logs and metrics"))


def test_uninstall(release):
    def uninstalled(result):
        gone = release.helm("status", RELEASE, check=False)
        assert gone.returncode != 0 and "release: not found" in gone.stderr
        assert not release.get("deployments")["items"]
        assert release.get("pvc", CHECKPOINT_CLAIM)  # kept on purpose

    def claim_deleted(result):
        assert not release.get("pvc")["items"]

    def namespace_deleted(result):
        listed = release.tools.kubectl_run("get", "namespace", release.namespace, check=False)
        assert listed.returncode != 0 and "NotFound" in listed.stderr

    walk(release, "Uninstall", {"helm uninstall market-spread": uninstalled,
                                "delete pvc market-spread-checkpoints": claim_deleted,
                                "delete namespace": namespace_deleted})
