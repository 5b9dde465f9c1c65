"""Policies over everything the chart renders: exclusive cores on the pinned pool, and no root anywhere."""

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm

PINNED = {"marketspread.io/pool": "pinned"}


def qos(containers: list[dict]) -> str:
    """Kubernetes' QoS class of a pod from its containers (init containers included)."""
    guaranteed = True
    for container in containers:
        resources = container.get("resources", {})
        limits, requests = resources.get("limits", {}), resources.get("requests", {})
        for resource in ("cpu", "memory"):
            if resource not in limits or str(requests.get(resource, limits[resource])) != str(limits[resource]):
                guaranteed = False
    return "Guaranteed" if guaranteed else "not Guaranteed"


def whole_cpus(value) -> int:
    text = str(value)
    assert text.isdigit() and int(text) > 0, f"cpu {value!r} is not a whole number of CPUs"
    return int(text)


def spark_pods(app: dict) -> dict[str, dict]:
    return {role: app["spec"][role] for role in ("driver", "executor")}


def spark_containers(pod: dict) -> list[dict]:
    """The containers Spark will create for a driver or executor, as Kubernetes will see them.

    Spark sets the main container's memory request = limit (memory + overhead); its CPU request
    comes from coreRequest, its limit from coreLimit. Sidecars and init containers are taken as written.
    """
    main = {"resources": {"requests": {"cpu": pod["coreRequest"], "memory": "m"},
                          "limits": {"cpu": pod["coreLimit"], "memory": "m"}}}
    if "memoryLimit" in pod:
        main["resources"]["limits"]["memory"] = pod["memoryLimit"]
    return [main, *pod.get("sidecars", []), *pod.get("initContainers", [])]


def test_the_pinned_spark_driver_and_executors_are_guaranteed_with_whole_even_cpus(pinned_docs):
    app = cs.one(pinned_docs, "SparkApplication")
    for role, pod in spark_pods(app).items():
        assert pod["nodeSelector"] == PINNED, role
        assert qos(spark_containers(pod)) == "Guaranteed", role
        assert whole_cpus(pod["coreRequest"]) == whole_cpus(pod["coreLimit"]) == pod["cores"], role
        assert pod["cores"] % 2 == 0, f"{role}: full-pcpus-only needs whole physical cores"
        for container in [*pod.get("sidecars", []), *pod.get("initContainers", [])]:
            whole_cpus(container["resources"]["limits"]["cpu"])
    for key in ("spark.kubernetes.driver.request.cores", "spark.kubernetes.executor.limit.cores"):
        assert key not in app["spec"]["sparkConf"]  # nothing overrides the CRD's cores


def test_the_pinned_brokers_are_guaranteed_with_whole_even_cpus(pinned_docs):
    brokers = [pool for pool in cs.by_kind(pinned_docs, "KafkaNodePool") if "broker" in pool["spec"]["roles"]]
    assert brokers
    for pool in brokers:
        spec = pool["spec"]
        terms = spec["template"]["pod"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": "marketspread.io/pool", "operator": "In", "values": ["pinned"]}]
        # Strimzi runs one container per broker pod (an init container only with rack awareness,
        # which the chart never sets).
        assert qos([{"resources": spec["resources"]}]) == "Guaranteed"
        assert whole_cpus(spec["resources"]["limits"]["cpu"]) % 2 == 0
    assert "rack" not in cs.one(pinned_docs, "Kafka")["spec"]["kafka"]


@pytest.mark.parametrize("docs_fixture", ["default_docs", "pinned_docs", "local_docs"])
def test_everything_scheduled_on_the_pinned_pool_is_guaranteed(docs_fixture, request):
    docs = request.getfixturevalue(docs_fixture)
    for deployment in cs.by_kind(docs, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        if pod.get("nodeSelector") == PINNED:
            assert qos(pod["containers"] + pod.get("initContainers", [])) == "Guaranteed"
    for app in cs.by_kind(docs, "SparkApplication"):
        for role, pod in spark_pods(app).items():
            assert qos(spark_containers(pod)) == "Guaranteed", role  # unpinned too: requests equal limits


def test_the_job_is_guaranteed_even_off_the_pinned_pool(default_docs):
    for role, pod in spark_pods(cs.one(default_docs, "SparkApplication")).items():
        assert pod["coreRequest"] == pod["coreLimit"] == str(pod["cores"]), role


def restricted_problems(pod_context: dict, container_context: dict) -> list[str]:
    """What Pod Security "restricted" would refuse, from a pod's and a container's securityContext."""
    merged = {**pod_context, **container_context}
    problems = []
    if merged.get("runAsNonRoot") is not True:
        problems.append("runAsNonRoot is not true")
    if merged.get("runAsUser") == 0:
        problems.append("runAsUser is 0")
    if container_context.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation is not false")
    if container_context.get("capabilities", {}).get("drop") != ["ALL"]:
        problems.append("capabilities are not dropped")
    if merged.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("no RuntimeDefault seccomp profile")
    if container_context.get("privileged"):
        problems.append("privileged")
    return problems


@pytest.mark.parametrize("variant", ["values.yaml", "pinned", "security"])
def test_every_container_runs_as_non_root_under_pod_security_restricted(variant):
    values, sets = {"values.yaml": ((), ()), "pinned": (cs.ci_values("pinned"), ()),
                    "security": (cs.ci_values("pinned"), ("kafka.security.enabled=true",))}[variant]
    docs = cs.render(values, sets)
    checked = 0
    for deployment in cs.by_kind(docs, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] > 0
        for container in pod["containers"] + pod.get("initContainers", []):
            assert restricted_problems(pod["securityContext"], container["securityContext"]) == [], \
                f"{deployment['metadata']['name']}/{container['name']}"
            checked += 1
        assert not any("hostPath" in volume for volume in pod.get("volumes", []))
    for role, pod in spark_pods(cs.one(docs, "SparkApplication")).items():
        assert restricted_problems(pod["podSecurityContext"], pod["securityContext"]) == [], role
        assert pod["securityContext"]["runAsUser"] == 185  # the apache/spark image's user
        checked += 1
    assert checked == 5


def test_every_strimzi_pod_template_asks_for_non_root(pinned_docs):
    kafka = cs.one(pinned_docs, "Kafka")["spec"]
    templates = [kafka["entityOperator"]["template"]["pod"], kafka["kafkaExporter"]["template"]["pod"]]
    templates += [pool["spec"]["template"]["pod"] for pool in cs.by_kind(pinned_docs, "KafkaNodePool")]
    for template in templates:
        assert template["securityContext"]["runAsNonRoot"] is True
        assert template["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_sender_and_receiver_cannot_write_their_root_filesystem_nor_call_the_api(default_docs):
    for deployment in cs.by_kind(default_docs, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_qos_check_tells_burstable_from_guaranteed():
    guaranteed = {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
    limits_only = {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}  # requests default to limits
    burstable = {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
    assert qos([guaranteed, limits_only]) == "Guaranteed"
    assert qos([guaranteed, burstable]) == "not Guaranteed"
    assert qos([{"resources": {}}]) == "not Guaranteed"
