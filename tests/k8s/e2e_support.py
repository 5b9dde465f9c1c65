"""What the end-to-end tests share: the real helm and kubectl, a release of the chart in its own
namespace, the commands of docs/kubernetes.md, and spark-submit standing in for the Spark operator.

Real: the API server, etcd, the scheduler and the controller-manager of `make cluster-up`, the
helm and kubectl CLIs, and Spark's own spark-submit (from pyspark). Simulated: the nodes and the
pods' running state (kwok marks a scheduled pod Running and Ready; no container ever starts), and
the operators (nothing reconciles the custom resources; where a test needs an operator's output,
the status it writes is said to come from a stand-in).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "market-spread"
PINNED_VALUES = CHART / "ci" / "pinned-values.yaml"
DOC = REPO / "docs" / "kubernetes.md"
NAMESPACE_MANIFEST = REPO / "k8s" / "namespace.yaml"
RELEASE = "market-spread"
GENERAL_NODE = "kwok-general-0"
PINNED_NODES = {"kwok-pinned-0", "kwok-pinned-1"}
POOL = "marketspread.io/pool"
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
CHECKPOINT_CLAIM = f"{RELEASE}-checkpoints"


def wait_for(condition, what: str, timeout: float = 60.0, interval: float = 0.2):
    """Poll `condition` until it returns something truthy, which is returned; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}", pytrace=False)
        time.sleep(interval)


# -- the tools -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tools:
    """helm (`make setup`), kubectl of the cluster's own release, and the environment that points
    both, and `marketspread`, at the local cluster."""

    kubeconfig: Path
    kubectl: Path
    helm: Path

    @property
    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.kubectl.parent), str(self.helm.parent), str(Path(sys.executable).parent),
                                os.environ.get("PATH", "")])
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": path}

    def run(self, argv: list[str], *, check: bool = True, stdin: str | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess:
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=self.env, cwd=REPO,
                                timeout=timeout)
        if check and result.returncode != 0:
            pytest.fail(f"`{shlex.join(argv)}` exited {result.returncode}:\n{result.stderr.strip()}\n"
                        f"{result.stdout.strip()}", pytrace=False)
        return result

    def kubectl_run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run([str(self.kubectl), *args], **kwargs)

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl_run("get", *args, "-o", "json").stdout)

    def helm_run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.run([str(self.helm), *args], **kwargs)

    def apply(self, manifest: dict | list[dict], namespace: str | None = None) -> None:
        items = manifest if isinstance(manifest, list) else [manifest]
        scope = [f"--namespace={namespace}"] if namespace else []
        self.kubectl_run("apply", *scope, "-f", "-",
                         stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


# -- a release in its own namespace ----------------------------------------------------------------

@dataclass
class Release:
    tools: Tools
    namespace: str
    name: str = RELEASE

    @property
    def ns(self) -> str:
        return f"--namespace={self.namespace}"

    def get(self, *args: str) -> dict:
        return self.tools.get(*args, self.ns)

    def pods(self, selector: str) -> list[dict]:
        return self.get("pods", f"--selector={selector}")["items"]

    def component_pods(self, component: str) -> list[dict]:
        return self.pods(f"{INSTANCE}={self.name},{COMPONENT}={component}")

    def deployment(self, component: str) -> dict:
        return self.get("deployment", f"{self.name}-{component}")

    def helm(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return self.tools.helm_run(*args, self.ns, **kwargs)

    def history(self) -> list[dict]:
        return json.loads(self.helm("history", self.name, "-o", "json").stdout)

    def manifest(self) -> list[dict]:
        text = self.helm("get", "manifest", self.name).stdout
        return [doc for doc in yaml.safe_load_all(text) if doc]

    def spark_application(self) -> dict:
        return self.get("sparkapplication", f"{self.name}-job")

    def env_of(self, component: str) -> dict[str, str]:
        container = self.deployment(component)["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value") for e in container.get("env", [])}

    def running_on_the_general_node(self, component: str, replicas: int = 1) -> list[dict] | None:
        pods = [p for p in self.component_pods(component) if not p["metadata"].get("deletionTimestamp")]
        ok = len(pods) == replicas and all(running_and_ready(p) and p["spec"].get("nodeName") == GENERAL_NODE
                                           for p in pods)
        return pods if ok else None


def running_and_ready(pod: dict) -> bool:
    ready = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}.get("Ready")
    return pod.get("status", {}).get("phase") == "Running" and ready == "True"


def create_namespace(tools: Tools, name: str) -> None:
    """The chart's namespace as k8s/namespace.yaml makes it (Pod Security "restricted" enforced),
    under another name, as k8s/install-operators.sh does with NAMESPACE=."""
    manifest = yaml.safe_load(NAMESPACE_MANIFEST.read_text())
    manifest["metadata"]["name"] = name
    tools.apply(manifest)
    # Pods are refused until the controller-manager has made the namespace's default ServiceAccount.
    wait_for(lambda: tools.kubectl_run("get", "serviceaccount", "default", f"--namespace={name}",
                                       check=False).returncode == 0, f"the default ServiceAccount in {name}")


def provide_checkpoint_volume(tools: Tools, namespace: str, size: str, access_modes: list[str]) -> str:
    """A PersistentVolume reserved for the chart's checkpoint claim, which the real persistent-volume
    controller binds to it: there is no provisioner here, and `helm --wait` waits for the claim to
    be Bound. (No pod ever mounts it: the NFS server named is never contacted.)"""
    name = f"{namespace}-checkpoints"
    tools.apply({"apiVersion": "v1", "kind": "PersistentVolume",
                 "metadata": {"name": name, "labels": {"marketspread.io/test-namespace": namespace}},
                 "spec": {"capacity": {"storage": size}, "accessModes": access_modes,
                          "persistentVolumeReclaimPolicy": "Retain",
                          "claimRef": {"namespace": namespace, "name": CHECKPOINT_CLAIM},
                          "nfs": {"server": "192.0.2.1", "path": "/checkpoints"}}})
    return name


def delete_release_and_namespace(tools: Tools, namespace: str, volume: str | None) -> None:
    # Foreground: helm returns once the pods are gone, so the next release's pods find the CPU free.
    tools.helm_run("uninstall", RELEASE, f"--namespace={namespace}", "--wait", "--cascade=foreground",
                   "--ignore-not-found", check=False)
    tools.kubectl_run("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)
    if volume:
        tools.kubectl_run("delete", "persistentvolume", volume, "--ignore-not-found", "--wait=false", check=False)


def new_namespace_name(prefix: str = "ms-e2e") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def pinned_values() -> dict:
    return yaml.safe_load(PINNED_VALUES.read_text())


# -- docs/kubernetes.md ----------------------------------------------------------------------------

def doc_sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def doc_commands(section: str) -> list[str]:
    """The command lines of a section's ```sh blocks, continuation lines joined, comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", doc_sections()[section], re.DOTALL)
    lines = [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines()]
    commands = []
    for line in lines:
        code = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if code:
            commands.append(code)
    return commands


def localize(command: str, namespace: str) -> list[str]:
    """The doc's command for this cluster: the test's namespace for `market-spread`, and a registry
    that does not exist for REGISTRY (kwok never pulls an image). Nothing else changes."""
    argv = shlex.split(command.replace("REGISTRY/", "registry.invalid/"))
    out = []
    for i, token in enumerate(argv):
        previous = argv[i - 1] if i else ""
        if token == "market-spread" and (previous in ("-n", "--namespace") or argv[i - 2:i] == ["delete", "namespace"]):
            token = namespace
        out.append(token)
    return out


# -- spark-submit, as the Spark operator runs it ---------------------------------------------------

SPARK_DRIVER_CONTAINER = "spark-kubernetes-driver"
SPARK_EXECUTOR_CONTAINER = "spark-kubernetes-executor"
# Who submits: the operator runs spark-submit under its own service account. Here a service
# account of the test namespace with the rights spark-submit of Spark 4.3 uses: the driver pod,
# its ConfigMap and headless Service, and a NetworkPolicy for the executors (new in Spark 4).
SUBMITTER = "spark-submitter"
SUBMITTER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "configmaps", "services", "persistentvolumeclaims"],
     "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
]


def grant_submitter(tools: Tools, namespace: str) -> None:
    meta = {"name": SUBMITTER, "namespace": namespace}
    tools.apply([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": SUBMITTER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SUBMITTER},
         "subjects": [{"kind": "ServiceAccount", "name": SUBMITTER, "namespace": namespace}]},
    ])


def _pod_template(role: dict, volumes: list[dict], container: str) -> dict:
    """What the operator's mutating webhook adds to a driver or executor pod, as a Spark pod
    template: Spark keeps a template's security contexts, tolerations, volumes, env and ports."""
    mounts = role.get("volumeMounts", [])
    wanted = {m["name"] for m in mounts}
    spec: dict = {"containers": [{"name": container}]}
    main = spec["containers"][0]
    for key, target, source in (("securityContext", spec, "podSecurityContext"),
                                ("tolerations", spec, "tolerations"), ("affinity", spec, "affinity"),
                                ("securityContext", main, "securityContext"), ("env", main, "env"),
                                ("ports", main, "ports"), ("volumeMounts", main, "volumeMounts")):
        if role.get(source):
            target[key] = role[source]
    if wanted:
        spec["volumes"] = [v for v in volumes if v["name"] in wanted]
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec}


def spark_submit_argv(app: dict, master: str, workdir: Path) -> list[str]:
    """The spark-submit command line for a SparkApplication, built the way the Spark operator
    (v2, internal/controller/sparkapplication/submission.go) builds it: the same options from the
    same fields. What the operator's webhook would patch into the pods goes into pod templates."""
    spec, meta = app["spec"], app["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    driver, executor = spec["driver"], spec["executor"]
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": spec["image"],
        "spark.kubernetes.container.image.pullPolicy": spec.get("imagePullPolicy", "IfNotPresent"),
        # The operator never lets spark-submit wait for the application to end.
        "spark.kubernetes.submission.waitAppCompletion": "false",
    }
    if spec.get("imagePullSecrets"):
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(spec["imagePullSecrets"])
    conf.update({k: str(v) for k, v in spec.get("sparkConf", {}).items()})
    conf["spark.kubernetes.driver.pod.name"] = f"{name}-driver"
    for role, prefix, spark in ((driver, "spark.kubernetes.driver", "spark.driver"),
                                (executor, "spark.kubernetes.executor", "spark.executor")):
        labels = {"sparkoperator.k8s.io/app-name": name, "sparkoperator.k8s.io/launched-by-spark-operator": "true",
                  **meta.get("labels", {}), **role.get("labels", {})}
        conf.update({f"{prefix}.label.{k}": v for k, v in labels.items()})
        conf[f"{prefix}.container.image"] = role.get("image", spec["image"])
        if "cores" in role:
            conf[f"{spark}.cores"] = str(role["cores"])
        if "coreRequest" in role:
            conf[f"{prefix}.request.cores"] = str(role["coreRequest"])
        if "coreLimit" in role:
            conf[f"{prefix}.limit.cores"] = str(role["coreLimit"])
        if "memory" in role:
            conf[f"{spark}.memory"] = role["memory"]
        if "memoryOverhead" in role:
            conf[f"{spark}.memoryOverhead"] = role["memoryOverhead"]
        # Spark 3.3+ selects nodes per role; the operator's webhook would add the same selector.
        conf.update({f"{prefix}.node.selector.{k}": v for k, v in role.get("nodeSelector", {}).items()})
    if "instances" in executor:
        conf["spark.executor.instances"] = str(executor["instances"])
    if driver.get("serviceAccount"):
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"] = driver["serviceAccount"]
    volumes = spec.get("volumes", [])
    for role, kind, container in ((driver, "driver", SPARK_DRIVER_CONTAINER),
                                  (executor, "executor", SPARK_EXECUTOR_CONTAINER)):
        path = workdir / f"{kind}-pod-template.yaml"
        path.write_text(yaml.safe_dump(_pod_template(role, volumes, container)))
        conf[f"spark.kubernetes.{kind}.podTemplateFile"] = str(path)
        conf[f"spark.kubernetes.{kind}.podTemplateContainerName"] = container
    argv = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
            "--deploy-mode", spec.get("mode", "cluster"), "--name", name]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + [spec["mainApplicationFile"], *spec.get("arguments", [])]


@dataclass(frozen=True)
class Submission:
    argv: list[str]
    result: subprocess.CompletedProcess
    driver_pod: str
    seconds: float


def spark_submit(tools: Tools, release: Release, server: str, ca_file: Path, workdir: Path) -> Submission:
    """Run pyspark's own spark-submit in cluster mode against the local API server, for the
    release's SparkApplication as the API server stores it (what helm rendered, so the two cannot
    drift). It authenticates with a token of the submitter's service account; the kubeconfig is
    hidden from it, so its rights are exactly the submitter Role's."""
    import pyspark

    app = release.spark_application()
    argv = spark_submit_argv(app, f"k8s://{server}", workdir)
    token = tools.kubectl_run("create", "token", SUBMITTER, release.ns, "--duration=15m").stdout.strip()
    token_file = workdir / "submitter.token"
    token_file.write_text(token)
    argv[1:1] = ["--conf", f"spark.kubernetes.authenticate.submission.caCertFile={ca_file}",
                 "--conf", f"spark.kubernetes.authenticate.submission.oauthTokenFile={token_file}"]
    env = {**tools.env, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
           "KUBECONFIG": str(workdir / "no-kubeconfig")}
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=workdir)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(f"spark-submit exited {result.returncode}:\n{result.stderr[-4000:]}", pytrace=False)
    return Submission(argv, result, f"{app['metadata']['name']}-driver", seconds)
