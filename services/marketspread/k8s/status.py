"""`marketspread k8s status`: one screen on a release of the chart, read from the Kubernetes API.

Where each figure comes from:

- the Helm release: its newest release record (the Secret `sh.helm.release.v1.<release>.v<N>`),
  so revision and state are Helm's own;
- the SparkApplication: `.status.applicationState.state`, which only the Spark operator writes
  (none: no operator has reconciled it yet), its driver pod and its executors;
- every pod of the release, with phase, readiness, restarts, node and QoS class as the API
  server reports them: the pods labelled `app.kubernetes.io/instance=<release>`, plus Strimzi's
  (`strimzi.io/cluster=<the release's Kafka>`) and Spark's (`spark-app-name=<the SparkApplication>`);
- the Kafka cluster and its KafkaTopics, with the `Ready` condition Strimzi writes;
- the receiver's latest figures from its `/metrics` (names: docs/architecture.md), through the
  API server's service proxy by default, or from a URL given directly.

Only reads: nothing here writes to the cluster.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..errors import MarketSpreadError
from ..metrics import Samples, parse

__all__ = ["StatusError", "Connection", "ReleaseStatus", "PodRow", "SparkJob", "KafkaCluster", "Topic",
           "ReceiverFigures", "connect", "collect", "receiver_figures", "render", "histogram_quantile"]

INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
SPARK_GROUP, SPARK_VERSION = "sparkoperator.k8s.io", "v1beta2"
STRIMZI_GROUP, STRIMZI_VERSION = "kafka.strimzi.io", "v1"
RECEIVER_COMPONENT = "receiver"
NO_OPERATOR = "no status: no operator has reconciled it"


class StatusError(MarketSpreadError):
    pass


@dataclass(frozen=True)
class Connection:
    api: object  # kubernetes.client.ApiClient
    server: str
    context: str  # the kubeconfig context, or "in-cluster"


def connect(kubeconfig: str | None = None, context: str | None = None, in_cluster: bool = False) -> Connection:
    """An API client from a kubeconfig (the given file, else $KUBECONFIG, else ~/.kube/config), or,
    inside a pod (or with `in_cluster`), from the pod's service account."""
    from kubernetes import client, config

    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser("~/.kube/config")
    if in_cluster or (not kubeconfig and not os.path.exists(path) and os.environ.get("KUBERNETES_SERVICE_HOST")):
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as error:
            raise StatusError(f"no in-cluster configuration: {error}") from None
        return Connection(client.ApiClient(configuration), configuration.host, "in-cluster")
    if not os.path.exists(path):
        raise StatusError(f"no kubeconfig at {path}: pass --kubeconfig, set KUBECONFIG, or run inside the cluster")
    try:
        api = config.new_client_from_config(config_file=path, context=context, persist_config=False)
        contexts, active = config.list_kube_config_contexts(path)
    except (config.ConfigException, OSError, ValueError) as error:
        raise StatusError(f"cannot use the kubeconfig {path}: {error}") from None
    name = context or active["name"]
    return Connection(api, api.configuration.host, name)


# -- what is shown ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodRow:
    name: str
    component: str
    phase: str
    ready: str  # "ready containers/containers"
    restarts: int
    node: str | None
    qos: str | None
    note: str = ""  # why it is not running, when the API server says so


@dataclass(frozen=True)
class SparkJob:
    name: str
    state: str | None  # the operator's applicationState.state; None: never reconciled
    detail: str
    suspended: bool
    executors: int | None
    executor_cores: int | None
    driver_pod: str | None
    driver_phase: str | None


@dataclass(frozen=True)
class KafkaCluster:
    name: str
    ready: bool | None  # None: no Ready condition (no operator)
    detail: str


@dataclass(frozen=True)
class Topic:
    resource: str
    topic: str
    partitions: int | None
    replicas: int | None
    ready: bool | None
    detail: str


@dataclass(frozen=True)
class ReceiverFigures:
    source: str
    error: str | None = None
    received: int | None = None
    duplicates: int | None = None
    unique: int | None = None
    dead_letters: int | None = None
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    malformed: int | None = None
    latency_count: int | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_mean_ms: float | None = None
    last_receive_time: float | None = None
    consumed: dict[str, int] = field(default_factory=dict)  # topic -> records written out, all partitions


@dataclass(frozen=True)
class ReleaseStatus:
    release: str
    namespace: str
    server: str
    context: str
    taken_at: float
    helm_revision: int | None
    helm_status: str | None
    spark_jobs: list[SparkJob]
    pods: list[PodRow]
    kafka: list[KafkaCluster]
    topics: list[Topic]
    receiver: ReceiverFigures | None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


# -- reading the API -------------------------------------------------------------------------------

def collect(connection: Connection, namespace: str, release: str, receiver_metrics_url: str | None = None,
            clock: Callable[[], float] = time.time) -> ReleaseStatus:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    core = client.CoreV1Api(connection.api)
    custom = client.CustomObjectsApi(connection.api)
    selector = f"{INSTANCE}={release}"
    try:
        core.read_namespace(namespace)
    except ApiException as error:
        raise StatusError(f"namespace {namespace!r}: {_api_reason(error)}") from None
    except (HTTPError, OSError) as error:  # urllib3's, after its retries
        raise StatusError(f"cannot reach the API server at {connection.server}: {error}") from None

    def custom_objects(group: str, version: str, plural: str, label_selector: str) -> list[dict]:
        try:
            return custom.list_namespaced_custom_object(group, version, namespace, plural,
                                                        label_selector=label_selector)["items"]
        except ApiException as error:
            if error.status == 404:  # the CRD is not installed: nothing of that kind can exist
                return []
            raise StatusError(f"listing {plural}.{group}: {_api_reason(error)}") from None

    revision, helm_state = _helm_release(core, namespace, release)
    applications = custom_objects(SPARK_GROUP, SPARK_VERSION, "sparkapplications", selector)
    kafkas = custom_objects(STRIMZI_GROUP, STRIMZI_VERSION, "kafkas", selector)
    topics = custom_objects(STRIMZI_GROUP, STRIMZI_VERSION, "kafkatopics", selector)

    pods: dict[str, dict] = {}
    selectors = [selector]
    selectors += [f"strimzi.io/cluster={k['metadata']['name']}" for k in kafkas]
    selectors += [f"spark-app-name={a['metadata']['name']}" for a in applications]
    for pod_selector in selectors:
        for pod in core.list_namespaced_pod(namespace, label_selector=pod_selector).items:
            pods[pod.metadata.name] = pod
    if not (revision or applications or kafkas or topics or pods):
        raise StatusError(f"no release {release!r} in namespace {namespace!r}: no Helm record, pods or "
                          f"custom resources labelled {selector}")

    rows = [_pod_row(pod) for pod in pods.values()]
    rows.sort(key=lambda r: (r.component, r.name))
    receiver = receiver_figures(_scrape_direct(receiver_metrics_url) if receiver_metrics_url
                                else _scrape_through_proxy(core, namespace, release))
    return ReleaseStatus(
        release=release, namespace=namespace, server=connection.server, context=connection.context,
        taken_at=clock(), helm_revision=revision, helm_status=helm_state,
        spark_jobs=[_spark_job(app, pods) for app in applications],
        pods=rows, kafka=[_kafka(k) for k in kafkas], topics=sorted((_topic(t) for t in topics), key=lambda t: t.topic),
        receiver=receiver,
    )


def _api_reason(error) -> str:
    import json

    try:
        return json.loads(error.body)["message"]
    except (TypeError, ValueError, KeyError):
        return f"{error.status} {error.reason}"


def _helm_release(core, namespace: str, release: str) -> tuple[int | None, str | None]:
    """Helm's newest record of the release: its Secrets carry the revision and the state as labels."""
    from kubernetes.client.exceptions import ApiException

    try:
        secrets = core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={release}").items
    except ApiException:
        return None, None  # not allowed to list Secrets: the rest of the screen still stands
    records = [(int(s.metadata.labels.get("version", 0)), s.metadata.labels.get("status")) for s in secrets]
    return max(records) if records else (None, None)


def _conditions(obj: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}


def _ready(obj: dict) -> tuple[bool | None, str]:
    """A Strimzi resource's Ready condition, and what it says."""
    if not obj.get("status"):
        return None, NO_OPERATOR
    ready = _conditions(obj).get("Ready")
    if ready is None:
        return None, "no Ready condition yet"
    detail = ready.get("message") or ready.get("reason") or ""
    return ready.get("status") == "True", detail


def _pod_row(pod) -> PodRow:
    labels = pod.metadata.labels or {}
    component = labels.get(COMPONENT) or labels.get("strimzi.io/kind", "").lower() or "?"
    if labels.get("spark-role"):
        component = f"{component if component != '?' else 'job'}/{labels['spark-role']}"
    statuses = pod.status.container_statuses or []
    containers = len(pod.spec.containers)
    ready = sum(1 for s in statuses if s.ready)
    restarts = sum(s.restart_count or 0 for s in statuses)
    note = ""
    if pod.metadata.deletion_timestamp:
        note = "terminating"
    else:
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                note = f"{condition.reason}: {condition.message}"
    return PodRow(name=pod.metadata.name, component=component, phase=pod.status.phase or "?",
                  ready=f"{ready}/{containers}", restarts=restarts, node=pod.spec.node_name,
                  qos=pod.status.qos_class, note=note)


def _spark_job(app: dict, pods: dict) -> SparkJob:
    status = app.get("status") or {}
    spec = app.get("spec") or {}
    state = (status.get("applicationState") or {}).get("state")
    detail = (status.get("applicationState") or {}).get("errorMessage") or ""
    if not status:
        detail = NO_OPERATOR
    name = app["metadata"]["name"]
    driver_name = (status.get("driverInfo") or {}).get("podName")
    drivers = [p for p in pods.values() if (p.metadata.labels or {}).get("spark-role") == "driver"
               and (p.metadata.labels or {}).get("spark-app-name") == name]
    if driver_name is None and drivers:
        driver_name = drivers[0].metadata.name
    driver = pods.get(driver_name) if driver_name else None
    executor = spec.get("executor") or {}
    return SparkJob(name=name, state=state, detail=detail, suspended=bool(spec.get("suspend")),
                    executors=executor.get("instances"), executor_cores=executor.get("cores"),
                    driver_pod=driver_name, driver_phase=driver.status.phase if driver else None)


def _kafka(kafka: dict) -> KafkaCluster:
    ready, detail = _ready(kafka)
    return KafkaCluster(name=kafka["metadata"]["name"], ready=ready, detail=detail)


def _topic(topic: dict) -> Topic:
    spec = topic.get("spec") or {}
    ready, detail = _ready(topic)
    return Topic(resource=topic["metadata"]["name"], topic=spec.get("topicName") or topic["metadata"]["name"],
                 partitions=spec.get("partitions"), replicas=spec.get("replicas"), ready=ready, detail=detail)


# -- the receiver's metrics ------------------------------------------------------------------------

def _scrape_direct(url: str) -> tuple[Samples | None, str, str | None]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return parse(response.read().decode()), url, None
    except (urllib.error.URLError, OSError, ValueError) as error:
        return None, url, str(getattr(error, "reason", error))


def _scrape_through_proxy(core, namespace: str, release: str) -> tuple[Samples | None, str, str | None] | None:
    """GET /metrics of the receiver's Service through the API server (`.../services/<name>:metrics/proxy/metrics`)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    services = core.list_namespaced_service(
        namespace, label_selector=f"{INSTANCE}={release},{COMPONENT}={RECEIVER_COMPONENT}").items
    if not services:
        return None
    name = services[0].metadata.name
    source = f"service {name} through the API server's proxy"
    try:
        text = core.connect_get_namespaced_service_proxy_with_path(f"{name}:metrics", namespace, "metrics")
    except ApiException as error:
        return None, source, _api_reason(error)
    except (HTTPError, OSError) as error:
        return None, source, str(error)
    return parse(text if isinstance(text, str) else text.decode()), source, None


def receiver_figures(scraped: tuple[Samples | None, str, str | None] | None) -> ReceiverFigures | None:
    """The figures of one scrape: (samples or None, where from, error or None); None: no receiver."""
    if scraped is None:
        return None
    samples, source, error = scraped
    if samples is None:
        return ReceiverFigures(source=source, error=error)
    if not any(name.startswith("marketspread_receiver_") for name, _ in samples):
        return ReceiverFigures(source=source, error="no marketspread_receiver_* metrics there")

    def count(name: str) -> int | None:
        value = samples.value(name)
        return None if value is None else int(value)

    received, duplicates = count("marketspread_receiver_rejections_total"), count("marketspread_receiver_duplicates_total")
    by_reason: dict[str, int] = {}
    for labels, value in samples.matching("marketspread_receiver_dead_letters_total"):
        by_reason[labels.get("reason", "?")] = by_reason.get(labels.get("reason", "?"), 0) + int(value)
    consumed: dict[str, int] = {}
    for labels, value in samples.matching("marketspread_receiver_consumed_offset"):
        consumed[labels.get("topic", "?")] = consumed.get(labels.get("topic", "?"), 0) + int(value)
    buckets = sorted((float(labels["le"]), value)
                     for labels, value in samples.matching("marketspread_receiver_latency_seconds_bucket"))
    latency_count = count("marketspread_receiver_latency_seconds_count")
    latency_sum = samples.value("marketspread_receiver_latency_seconds_sum")

    def quantile_ms(q: float) -> float | None:
        value = histogram_quantile(q, buckets)
        return None if value is None else value * 1000

    return ReceiverFigures(
        source=source, received=received, duplicates=duplicates,
        unique=None if received is None or duplicates is None else received - duplicates,
        dead_letters=sum(by_reason.values()), dead_letters_by_reason=dict(sorted(by_reason.items())),
        malformed=count("marketspread_receiver_malformed_total"), latency_count=latency_count,
        latency_p50_ms=quantile_ms(0.5), latency_p99_ms=quantile_ms(0.99),
        latency_mean_ms=latency_sum / latency_count * 1000 if latency_count and latency_sum is not None else None,
        last_receive_time=samples.value("marketspread_receiver_last_receive_timestamp_seconds"),
        consumed=dict(sorted(consumed.items())),
    )


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of a cumulative histogram [(le, count), ..., (inf, total)] as Prometheus'
    `histogram_quantile` estimates it: linear within the bucket holding the rank; a rank in the
    +Inf bucket gives the largest finite bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower_bound
            if cumulative == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (cumulative - lower_count)
        lower_bound, lower_count = bound, cumulative
    return lower_bound


# -- the screen ------------------------------------------------------------------------------------

def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _readiness(ready: bool | None, detail: str) -> str:
    word = {True: "Ready", False: "NotReady", None: "unknown"}[ready]
    return f"{word} ({detail})" if detail else word


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return [indent + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [header, *rows]]


def render(status: ReleaseStatus) -> str:
    s = status
    helm = (f"Helm revision {s.helm_revision} {s.helm_status}" if s.helm_revision is not None
            else "no Helm release record")
    lines = [f"release {s.release} in namespace {s.namespace}: {helm}",
             f"  API server {s.server} (context {s.context}), read at {_utc(s.taken_at)}", ""]

    lines.append("Spark job")
    if not s.spark_jobs:
        lines.append("  no SparkApplication")
    for job in s.spark_jobs:
        state = job.state or "-"
        lines.append(f"  {job.name}: state {state}{' (' + job.detail + ')' if job.detail else ''}"
                     f"{', suspended' if job.suspended else ''}")
        driver = f"{job.driver_pod} ({job.driver_phase})" if job.driver_pod else "none"
        lines.append(f"  driver {driver}; executors {job.executors} x {job.executor_cores} cores requested")
    lines.append("")

    lines.append(f"Pods ({len(s.pods)})")
    if s.pods:
        lines += _table(("NAME", "COMPONENT", "PHASE", "READY", "RESTARTS", "NODE", "QOS"),
                        [(p.name, p.component, p.phase, p.ready, str(p.restarts), p.node or "<none>", p.qos or "-")
                         for p in s.pods])
        lines += [f"  {p.name}: {p.note}" for p in s.pods if p.note]
    lines.append("")

    for kafka in s.kafka:
        lines.append(f"Kafka {kafka.name}: {_readiness(kafka.ready, kafka.detail)}")
    if not s.kafka:
        lines.append("Kafka: no Kafka resource in this release")
    if s.topics:
        # The reason is the same for every topic that no operator has seen: say it once.
        unreconciled = [t for t in s.topics if t.detail == NO_OPERATOR]
        lines += _table(("TOPIC", "KAFKATOPIC", "PARTITIONS", "REPLICAS", "READY"),
                        [(t.topic, t.resource, str(t.partitions), str(t.replicas),
                          _readiness(t.ready, "" if t.detail == NO_OPERATOR else t.detail)) for t in s.topics])
        if unreconciled:
            lines.append(f"  {len(unreconciled)} of {len(s.topics)} KafkaTopics have no status: "
                         "no operator has reconciled them")
    lines.append("")

    r = s.receiver
    if r is None:
        lines.append("Receiver: no receiver Service in this release")
    elif r.error:
        lines.append(f"Receiver ({r.source}): metrics unavailable: {r.error}")
    else:
        lines.append(f"Receiver ({r.source})")
        reasons = ", ".join(f"{reason} {n:,}" for reason, n in r.dead_letters_by_reason.items())
        lines.append(f"  rejections {r.received:,} received ({r.unique:,} unique, {r.duplicates:,} duplicates), "
                     f"dead letters {r.dead_letters:,}{' (' + reasons + ')' if reasons else ''}, "
                     f"malformed {r.malformed:,}")
        if r.latency_count:
            lines.append(f"  latency over {r.latency_count:,} orders: p50 ~{r.latency_p50_ms:,.1f} ms, "
                         f"p99 ~{r.latency_p99_ms:,.1f} ms (from the histogram's buckets), "
                         f"mean {r.latency_mean_ms:,.1f} ms")
        else:
            lines.append("  latency: no rejection received yet")
        last = (f"{_utc(r.last_receive_time)} ({max(0.0, s.taken_at - r.last_receive_time):,.0f} s ago)"
                if r.last_receive_time is not None else "never")
        consumed = ", ".join(f"{topic} {n:,}" for topic, n in r.consumed.items()) or "nothing yet"
        lines.append(f"  last rejection received {last}; records consumed: {consumed}")
    return "\n".join(lines) + "\n"
