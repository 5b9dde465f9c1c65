"""The local Kubernetes cluster of `make cluster-up` (k8s/cluster/cluster.py) for the `k8s` tests.

A cluster that is already up is used as it is and left running; otherwise the session starts
one (building it first on a fresh machine, which takes many minutes) and stops it at the end.
Each test module gets its own namespace, so tests never see each other's objects; the
end-to-end modules (test_e2e_*.py) install the chart into theirs with the real helm (e2e_support.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # e2e_support, beside this file

from e2e_support import wait_for  # noqa: E402  (importable once the path is set)

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "k8s" / "cluster" / "cluster.py"


def _cluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLUSTER_SCRIPT), *args], capture_output=True, text=True)


def _status() -> dict:
    return json.loads(_cluster("status", "--json").stdout)


@pytest.fixture(scope="session")
def cluster() -> dict:
    """`status --json` of a running cluster: kubeconfig, server, components with their pids."""
    started_here = not _status()["up"]
    if started_here:
        result = _cluster("up")
        if result.returncode != 0:
            pytest.fail(f"`cluster.py up` failed:\n{result.stderr}", pytrace=False)
    report = _status()
    if not report["up"]:
        pytest.fail(f"the cluster is not healthy after `up`: {report}", pytrace=False)
    yield report
    if started_here:
        _cluster("down")


class Kubectl:
    """The cluster's own kubectl (the pinned release), speaking JSON.

    kubectl rather than the `kubernetes` Python client: client 37.0.1 sends creates without a
    Content-Type and the API server answers 415; kubectl is also what the chart tests will use.
    """

    def __init__(self, binary: Path, kubeconfig: str):
        self.binary, self.kubeconfig = binary, kubeconfig

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([str(self.binary), f"--kubeconfig={self.kubeconfig}", *args], input=stdin,
                                capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)}: {result.stderr.strip()}", pytrace=False)
        return result

    def get(self, *args: str) -> dict:
        return json.loads(self.run("get", *args, "-o", "json").stdout)

    def create(self, manifest: dict, namespace: str | None = None) -> dict:
        scope = [f"--namespace={namespace}"] if namespace else []
        return json.loads(self.run("create", *scope, "-o", "json", "-f", "-", stdin=json.dumps(manifest)).stdout)


@pytest.fixture(scope="session")
def kubectl(cluster) -> Kubectl:
    binary = Path(cluster["kubeconfig"]).parent / "bin" / "kubectl"
    return Kubectl(binary, cluster["kubeconfig"])


@pytest.fixture(scope="module")
def namespace(kubectl) -> str:
    name = f"ms-test-{uuid.uuid4().hex[:8]}"
    kubectl.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # Pods are refused until the namespace's default ServiceAccount exists.
    wait_for(lambda: kubectl.run("get", "serviceaccount", "default", f"--namespace={name}",
                                 check=False).returncode == 0,
             f"the default ServiceAccount in {name}")
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


@pytest.fixture
def eventually():
    """`eventually(condition, what, timeout=60)`: poll until truthy and return that value."""
    return wait_for


# -- the end-to-end tests (test_e2e_*.py): the chart installed with the real helm ----------------

@pytest.fixture(scope="session")
def tools(cluster):
    from e2e_support import Tools

    helm = REPO / ".local" / "bin" / "helm"
    if not helm.is_file():
        pytest.fail("helm is missing: `make setup` builds .local/bin/helm", pytrace=False)
    kubeconfig = Path(cluster["kubeconfig"])
    return Tools(kubeconfig=kubeconfig, kubectl=kubeconfig.parent / "bin" / "kubectl", helm=helm)


@pytest.fixture(scope="session")
def submitted_release(tools, cluster, tmp_path_factory):
    """The chart installed (`helm install --wait`, ci/pinned-values.yaml) in a namespace of its own,
    then its SparkApplication submitted by spark-submit as the Spark operator would: the driver pod
    exists in the API server. Shared by the modules that look at the driver; removed at the end."""
    from e2e_support import (PINNED_VALUES, Release, create_namespace, delete_release_and_namespace,
                             grant_submitter, new_namespace_name, pinned_values, provide_checkpoint_volume,
                             spark_submit)

    namespace = new_namespace_name("ms-driver")
    create_namespace(tools, namespace)
    claim = pinned_values()["job"]["checkpoint"]["persistentVolumeClaim"]
    volume = provide_checkpoint_volume(tools, namespace, claim["size"], claim["accessModes"])
    release = Release(tools, namespace)
    try:
        release.helm("install", release.name, "charts/market-spread", "--values", str(PINNED_VALUES),
                     "--wait", "--timeout=3m")
        grant_submitter(tools, namespace)
        submission = spark_submit(tools, release, cluster["server"],
                                  Path(cluster["kubeconfig"]).parent / "pki" / "ca.crt",
                                  tmp_path_factory.mktemp("spark-submit"))
        wait_for(lambda: release.get("pods", f"--field-selector=metadata.name={submission.driver_pod}")["items"],
                 "the driver pod")
        yield release, submission
    finally:
        delete_release_and_namespace(tools, namespace, volume)
