"""`marketspread k8s status` against the local cluster: what it prints is what the API server says.

The release is the one of test_e2e_spark_driver (the chart from ci/pinned-values.yaml, with the
driver pod spark-submit made). The receiver's figures come from a real `marketspread receiver`
process fed real OrderResults and dead letters through the session's real Kafka broker, read at
its /metrics (`--receiver-metrics-url`): in this cluster no pod serves anything, and the API
server's service proxy, the command's default way to the receiver, is refused (a test shows it).

Simulated: the nodes and the pods' running state (kwok), and the operators. Where a test needs
what an operator would write (the SparkApplication's state, a KafkaTopic's Ready condition), a
stand-in writes it through the status subresource, as the operator would, and says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest
from e2e_support import INSTANCE, PINNED_NODES, RELEASE, wait_for
from kafka import KafkaProducer

from marketspread.fixish import OrderResult, Side, encode_order_result
from marketspread.k8s.status import histogram_quantile
from marketspread.metrics import scrape
from marketspread.run.stack import free_port

# The first module to need the cluster may start it (and on a fresh machine build it first).
pytestmark = [pytest.mark.k8s, pytest.mark.kafka, pytest.mark.timeout(3600)]

RESULTS, DUPLICATES = 25, 5
DEAD_LETTERS = {"bad-side": 2, "empty": 1}


@pytest.fixture(scope="module")
def receiver_url(kafka_broker):
    """A real receiver process that has received 25 OrderResults (5 of them twice) and 3 dead letters."""
    from marketspread.localkafka import ensure_topics
    from marketspread.receiver import ReceiverSettings

    suffix = uuid.uuid4().hex[:8]
    settings = ReceiverSettings(bootstrap_servers=kafka_broker.bootstrap_servers, rejections_topic=f"rejections-{suffix}",
                                dead_letter_topic=f"dead-letters-{suffix}", group_id=f"status-{suffix}",
                                metrics_port=free_port())
    ensure_topics(settings.bootstrap_servers, [settings.rejections_topic, settings.dead_letter_topic], 2)
    now = time.time_ns()
    results = [encode_order_result(OrderResult(Side.SELL, 42, f"O{i:05d}", "NI", 100.0, 10.25, 10.0, 10.6,
                                               now - (i + 1) * 10_000_000)) for i in range(RESULTS)]
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers)
    for value in results + results[:DUPLICATES]:
        producer.send(settings.rejections_topic, key=b"NI", value=value)
    for reason, count in DEAD_LETTERS.items():
        for _ in range(count):
            producer.send(settings.dead_letter_topic, key=b"NI", value=b"\x01junk",
                          headers=[("marketspread.reason", reason.encode()),
                                   ("marketspread.source.topic", b"orders")])
    producer.flush()
    producer.close()
    process = subprocess.Popen([sys.executable, "-m", "marketspread", "receiver", *settings.to_args()],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{settings.metrics_port}/metrics"

    def consumed_everything() -> bool:
        assert process.poll() is None, process.communicate()[1]
        try:
            samples = scrape(url, timeout=2)
        except OSError:
            return False
        return (samples.total("marketspread_receiver_consumed_offset", topic=settings.rejections_topic)
                == RESULTS + DUPLICATES and
                samples.total("marketspread_receiver_consumed_offset", topic=settings.dead_letter_topic)
                == sum(DEAD_LETTERS.values()))

    try:
        wait_for(consumed_everything, "the receiver to consume both topics", timeout=120)
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=60)


def status(release, *args: str) -> str:
    result = release.tools.run([sys.executable, "-m", "marketspread", "k8s", "status", "-n", release.namespace,
                                "--kubeconfig", str(release.tools.kubeconfig), *args])
    return result.stdout


def rows(screen: str, header: str) -> list[list[str]]:
    """The rows of the table whose header line starts with `header`: the lines after it with as
    many cells (separated by two spaces or more) as the header has."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    width = len(re.split(r"\s{2,}", lines[start].strip()))
    table = []
    for line in lines[start + 1:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != width:
            break
        table.append(cells)
    return table


def test_the_header_gives_the_release_the_helm_revision_and_the_api_server(submitted_release, cluster, receiver_url):
    release, _ = submitted_release
    screen = status(release, "--receiver-metrics-url", receiver_url)
    [latest] = release.history()[-1:]
    assert screen.splitlines()[0] == (f"release {RELEASE} in namespace {release.namespace}: "
                                      f"Helm revision {latest['revision']} {latest['status']}")
    assert screen.splitlines()[1].startswith(f"  API server {cluster['server']} (context marketspread-local)")


def test_every_pod_of_the_release_is_shown_with_the_node_and_qos_class_the_api_server_reports(submitted_release,
                                                                                              receiver_url):
    release, submission = submitted_release
    screen = status(release, "--receiver-metrics-url", receiver_url)
    pods = {p["metadata"]["name"]: p for p in release.pods(f"{INSTANCE}={RELEASE}")}
    assert submission.driver_pod in pods and len(pods) == 4  # the driver, two senders, the receiver
    assert f"Pods ({len(pods)})" in screen
    shown = {row[0]: row for row in rows(screen, "NAME")}
    assert set(shown) == set(pods)
    for name, pod in pods.items():
        ready = sum(1 for s in pod["status"]["containerStatuses"] if s["ready"])
        assert shown[name][2:] == [pod["status"]["phase"], f"{ready}/{len(pod['spec']['containers'])}",
                                   str(sum(s["restartCount"] for s in pod["status"]["containerStatuses"])),
                                   pod["spec"]["nodeName"], pod["status"]["qosClass"]], name
    assert shown[submission.driver_pod][1] == "job/driver"
    assert shown[submission.driver_pod][5] in PINNED_NODES
    assert shown[submission.driver_pod][6] == "Guaranteed"


def test_the_spark_application_shows_no_state_until_an_operator_writes_one(submitted_release, receiver_url):
    release, submission = submitted_release
    app = release.spark_application()
    screen = status(release, "--receiver-metrics-url", receiver_url)
    assert "status" not in app
    assert f"  {app['metadata']['name']}: state - (no status: no operator has reconciled it)" in screen
    executor = app["spec"]["executor"]
    assert (f"  driver {submission.driver_pod} (Running); executors {executor['instances']} x {executor['cores']} "
            "cores requested") in screen

    # A stand-in for the Spark operator records the application as running.
    release.tools.kubectl_run("patch", "sparkapplication", app["metadata"]["name"], release.ns, "--subresource=status",
                              "--type=merge", "-p", json.dumps({"status": {
                                  "applicationState": {"state": "RUNNING"},
                                  "driverInfo": {"podName": submission.driver_pod}}}))
    assert release.spark_application()["status"]["applicationState"]["state"] == "RUNNING"
    assert f"  {app['metadata']['name']}: state RUNNING\n" in status(release, "--receiver-metrics-url", receiver_url)


def test_the_kafka_topics_are_shown_with_their_readiness(submitted_release, receiver_url):
    release, _ = submitted_release
    topics = {t["metadata"]["name"]: t for t in release.get("kafkatopics", f"--selector={INSTANCE}={RELEASE}")["items"]}
    screen = status(release, "--receiver-metrics-url", receiver_url)
    shown = {row[1]: row for row in rows(screen, "TOPIC")}
    assert set(shown) == set(topics)
    for name, topic in topics.items():
        assert shown[name] == [topic["spec"]["topicName"], name, str(topic["spec"]["partitions"]),
                               str(topic["spec"]["replicas"]), "unknown"]
    assert f"  {len(topics)} of {len(topics)} KafkaTopics have no status: no operator has reconciled them" in screen
    assert f"Kafka {RELEASE}: unknown (no status: no operator has reconciled it)" in screen

    # A stand-in for Strimzi's topic operator: one topic ready, one refused.
    for name, condition in ((f"{RELEASE}-orders", {"type": "Ready", "status": "True"}),
                            (f"{RELEASE}-nbbo", {"type": "Ready", "status": "False", "reason": "KafkaError",
                                                 "message": "replication factor 3 > 1 broker"})):
        release.tools.kubectl_run("patch", "kafkatopic", name, release.ns, "--subresource=status", "--type=merge",
                                  "-p", json.dumps({"status": {"conditions": [condition]}}))
    shown = {row[1]: row for row in rows(status(release, "--receiver-metrics-url", receiver_url), "TOPIC")}
    assert shown[f"{RELEASE}-orders"][-1] == "Ready"
    assert shown[f"{RELEASE}-nbbo"][-1] == "NotReady (replication factor 3 > 1 broker)"
    assert shown[f"{RELEASE}-rejections"][-1] == "unknown"


def test_the_receivers_figures_are_its_latest_metrics(submitted_release, receiver_url):
    release, _ = submitted_release
    screen = status(release, "--receiver-metrics-url", receiver_url)
    samples = scrape(receiver_url)
    assert samples.value("marketspread_receiver_rejections_total") == RESULTS + DUPLICATES
    assert f"Receiver ({receiver_url})" in screen
    assert (f"  rejections {RESULTS + DUPLICATES} received ({RESULTS} unique, {DUPLICATES} duplicates), "
            f"dead letters 3 (bad-side 2, empty 1), malformed 0") in screen
    count = samples.value("marketspread_receiver_latency_seconds_count")
    mean_ms = samples.value("marketspread_receiver_latency_seconds_sum") / count * 1000
    buckets = sorted((float(labels["le"]), value)
                     for labels, value in samples.matching("marketspread_receiver_latency_seconds_bucket"))
    assert count == RESULTS  # an order's first OrderResult only
    assert (f"  latency over {RESULTS} orders: p50 ~{histogram_quantile(0.5, buckets) * 1000:,.1f} ms, "
            f"p99 ~{histogram_quantile(0.99, buckets) * 1000:,.1f} ms (from the histogram's buckets), "
            f"mean {mean_ms:,.1f} ms") in screen
    # The orders were sent 10 to 250 ms before they were produced: no latency can be below that.
    assert mean_ms >= 130
    last = samples.value("marketspread_receiver_last_receive_timestamp_seconds")
    last_line = next(line for line in screen.splitlines() if "records consumed:" in line)
    assert last_line.startswith(f"  last rejection received {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(last))}")
    topics = {labels["topic"] for labels, _ in samples.matching("marketspread_receiver_consumed_offset")}
    rejections = next(t for t in topics if t.startswith("rejections-"))
    dead = next(t for t in topics if t.startswith("dead-letters-"))
    assert last_line.endswith(f"records consumed: {dead} 3, {rejections} {RESULTS + DUPLICATES}")


def test_without_a_url_it_asks_the_api_servers_service_proxy_which_cannot_reach_a_simulated_pod(submitted_release):
    release, _ = submitted_release
    screen = status(release)
    assert (f"Receiver (service {RELEASE}-receiver through the API server's proxy): metrics unavailable: "
            "error trying to reach service: dial unix ") in screen
    assert "no-egress.sock: connect: no such file or directory" in screen


def test_json_says_the_same(submitted_release, receiver_url):
    release, _ = submitted_release
    report = json.loads(status(release, "--receiver-metrics-url", receiver_url, "--json"))
    pods = {p["metadata"]["name"]: p for p in release.pods(f"{INSTANCE}={RELEASE}")}
    assert {p["name"]: (p["node"], p["qos"]) for p in report["pods"]} == {
        name: (pod["spec"]["nodeName"], pod["status"]["qosClass"]) for name, pod in pods.items()}
    assert report["receiver"]["received"] == RESULTS + DUPLICATES
    assert report["receiver"]["dead_letters_by_reason"] == DEAD_LETTERS
