"""The job's driver pod, made for real: Spark's own spark-submit creates it in the API server.

No Spark operator can run here (no container runtime), so the tests do what the operator does
with a SparkApplication: read it (as the API server stores what `helm install` rendered from
ci/pinned-values.yaml) and run pyspark's `spark-submit --master k8s://... --deploy-mode cluster`
with the same options the operator derives from it (e2e_support.spark_submit_argv), and what the
operator's webhook would patch in (tolerations, security contexts, volumes, env, ports) as Spark
pod templates.

Real: spark-submit and its Kubernetes client creating the driver pod, its ConfigMap, Service and
NetworkPolicy; the API server's admission (RBAC for the submitter, Pod Security "restricted",
the QoS class); the scheduler's choice of node. Simulated: the driver never runs: kwok marks the
pod Running and Ready without starting a container, so no executor is ever requested.
"""

from __future__ import annotations

import re

import pytest
import yaml
from e2e_support import (CHART, GENERAL_NODE, INSTANCE, PINNED_NODES, POOL, SPARK_DRIVER_CONTAINER, pinned_values,
                         running_and_ready, wait_for)

# The first module to need the cluster may start it (and on a fresh machine build it first).
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]


def _bytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([a-zA-Z]*)", quantity).groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[unit]


@pytest.fixture(scope="module")
def driver(submitted_release) -> dict:
    release, submission = submitted_release
    return wait_for(lambda: next((p for p in [release.get("pod", submission.driver_pod)] if running_and_ready(p)), None),
                    "the driver pod to be scheduled and marked Running")


def test_spark_submit_returns_at_once_having_deployed_the_application(submitted_release):
    release, submission = submitted_release
    assert "--deploy-mode" in submission.argv and submission.argv[submission.argv.index("--deploy-mode") + 1] == "cluster"
    assert "spark.kubernetes.submission.waitAppCompletion=false" in submission.argv
    assert re.search(rf"Deployed Spark application {release.name}-job with application ID spark-\w+ and submission "
                     rf"ID {release.namespace}:{submission.driver_pod} into Kubernetes", submission.result.stderr)


def test_the_submission_carries_the_spark_applications_settings(submitted_release):
    release, submission = submitted_release
    app = release.spark_application()["spec"]
    conf = dict(arg.split("=", 1) for arg in submission.argv if "=" in arg and arg.startswith("spark."))
    for key, value in app["sparkConf"].items():
        assert conf[key] == value, key
    assert conf["spark.kubernetes.container.image"] == app["image"]
    assert conf["spark.kubernetes.namespace"] == release.namespace
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == app["driver"]["serviceAccount"]
    assert (conf["spark.driver.cores"], conf["spark.kubernetes.driver.request.cores"],
            conf["spark.kubernetes.driver.limit.cores"]) == (str(app["driver"]["cores"]),) * 3
    assert (conf["spark.driver.memory"], conf["spark.driver.memoryOverhead"]) == (
        app["driver"]["memory"], app["driver"]["memoryOverhead"])
    assert conf[f"spark.kubernetes.driver.node.selector.{POOL}"] == "pinned"
    assert submission.argv[-1] == app["mainApplicationFile"] == "local:///opt/marketspread/job.py"


def test_the_scheduler_puts_the_driver_on_a_pinned_node(driver, submitted_release):
    release, _ = submitted_release
    assert driver["spec"]["nodeName"] in PINNED_NODES
    assert driver["spec"]["nodeSelector"] == {POOL: "pinned"}
    assert {"key": POOL, "operator": "Equal", "value": "pinned", "effect": "NoSchedule"} in driver["spec"]["tolerations"]
    events = wait_for(lambda: release.get("events", f"--field-selector=involvedObject.name={driver['metadata']['name']},"
                                                    "reason=Scheduled")["items"], "the driver's Scheduled event")
    assert events[0]["reportingComponent"] == "default-scheduler"
    assert f"to {driver['spec']['nodeName']}" in events[0]["message"]
    assert GENERAL_NODE not in events[0]["message"]


def test_the_api_server_reports_the_driver_as_guaranteed_with_whole_cpus(driver):
    values = pinned_values()["job"]["driver"]
    assert driver["status"]["qosClass"] == "Guaranteed"
    container = next(c for c in driver["spec"]["containers"] if c["name"] == SPARK_DRIVER_CONTAINER)
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert requests == limits
    assert requests["cpu"] == str(values["cores"]) == "2"
    # Spark asks for the JVM heap plus the overhead, requested and limited alike.
    assert _bytes(requests["memory"]) == _bytes(values["memory"]) + _bytes(values["memoryOverhead"]) == 3 * 2**30


def test_the_driver_carries_the_release_labels_and_runs_as_the_charts_spark_account(driver, submitted_release):
    release, _ = submitted_release
    labels = driver["metadata"]["labels"]
    assert labels[INSTANCE] == release.name
    assert labels["app.kubernetes.io/component"] == "job"
    assert labels["spark-role"] == "driver"
    assert labels["sparkoperator.k8s.io/app-name"] == f"{release.name}-job"
    assert driver["spec"]["serviceAccountName"] == f"{release.name}-spark"


def test_the_driver_is_admitted_under_pod_security_restricted_with_the_charts_security_context(driver,
                                                                                               submitted_release):
    release, _ = submitted_release
    namespace = release.tools.get("namespace", release.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["job"]  # pinned-values keeps these
    assert driver["spec"]["securityContext"] == chart["podSecurityContext"]
    assert driver["spec"]["securityContext"]["runAsNonRoot"] is True
    container = next(c for c in driver["spec"]["containers"] if c["name"] == SPARK_DRIVER_CONTAINER)
    assert container["securityContext"] == chart["securityContext"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_driver_mounts_the_checkpoint_claim_and_gets_the_jobs_settings(driver, submitted_release):
    release, _ = submitted_release
    volumes = {v["name"]: v for v in driver["spec"]["volumes"]}
    assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == f"{release.name}-checkpoints"
    container = next(c for c in driver["spec"]["containers"] if c["name"] == SPARK_DRIVER_CONTAINER)
    assert {"name": "checkpoint", "mountPath": "/checkpoints"} in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MARKETSPREAD_CHECKPOINT_DIR"] == "/checkpoints/market-spread"
    assert env["MARKETSPREAD_BOOTSTRAP_SERVERS"] == f"{release.name}-kafka-bootstrap.{release.namespace}.svc:9092"
    assert {"name": "metrics", "containerPort": 9103, "protocol": "TCP"} in container["ports"]


def test_spark_submit_made_the_drivers_configmap_service_and_network_policy_owned_by_the_driver(driver,
                                                                                               submitted_release):
    release, _ = submitted_release
    owned = {}
    for kind in ("configmaps", "services", "networkpolicies"):
        for item in release.get(kind)["items"]:
            for owner in item["metadata"].get("ownerReferences", []):
                if owner["kind"] == "Pod" and owner["uid"] == driver["metadata"]["uid"]:
                    owned.setdefault(kind, []).append(item)
    assert set(owned) == {"configmaps", "services", "networkpolicies"}
    service = owned["services"][0]
    assert service["spec"]["clusterIP"] == "None"  # headless: the executors' way back to the driver
    assert {p["name"] for p in service["spec"]["ports"]} >= {"driver-rpc-port", "blockmanager", "spark-ui"}
    # Spark 4 fences the executors: only pods of the same application may reach them.
    policy = owned["networkpolicies"][0]["spec"]
    assert policy["podSelector"]["matchLabels"]["spark-role"] == "executor"
