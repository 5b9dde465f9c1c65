"""The metric table in docs/architecture.md is what the running services really serve.

Dashboards and alerts are checked against that table (tests/chart/test_grafana_dashboards.py,
test_chart_rules.py); this closes the loop with a live scrape of the real local stack: a
sender, the Spark job and the receiver, run as processes exactly as `marketspread run` runs
them, with enough traffic (a rejection, a dead letter) that every labelled series exists.
"""

from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from marketspread.dashboards.catalogue import load_catalogue
from marketspread.fixish import Nbbo, Order, Side, encode, frame_all
from marketspread.run.stack import Stack

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(600)]

# Labels a Prometheus histogram adds to its series, not part of the metric's own label set.
HISTOGRAM_LABELS = {"le"}


def families(port: int) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (type, label names) of every marketspread_* family a process serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("marketspread_"):
            continue
        labels = frozenset(set().union(*(s.labels.keys() for s in family.samples)) - HISTOGRAM_LABELS)
        # The parser names a counter's family without the `_total` its samples (and the contract) carry.
        name = family.name + "_total" if family.type == "counter" else family.name
        found[name] = (family.type, labels)
    return found


@pytest.fixture(scope="module")
def live_metrics(tmp_path_factory, kafka_broker):
    """Scrapes of a sender (mid-stream), the job and the receiver after real traffic."""
    from marketspread.settings import KafkaSettings

    out = tmp_path_factory.mktemp("metrics-contract")
    kafka = KafkaSettings(bootstrap_servers=kafka_broker.bootstrap_servers, nbbo_topic="mc-nbbo",
                          orders_topic="mc-orders", rejections_topic="mc-rejections",
                          dead_letter_topic="mc-dead-letters")
    stack = Stack(kafka, out, time.monotonic() + 400)
    nbbo = out / "nbbo.msg"
    nbbo.write_bytes(frame_all(encode(Nbbo(s, 10.0, 10.01)) for s in ("AA", "BB", "CC")))
    orders = out / "orders.msg"
    # "ZZ" was never quoted: its order is rejected, so an OrderResult (and a latency) exists.
    orders.write_bytes(frame_all(encode(Order(Side.BUY, 1, f"ID{i:04d}", s, 1.0, 10.0))
                                 for i, s in enumerate(["AA", "ZZ"] * 10)))
    try:
        stack.fresh_topics(partitions=1)
        receiver = stack.start_receiver()
        job = stack.start_job(out / "checkpoint")
        receiver.wait_metrics(60)
        stack.wait_job_ready()
        stack.wait_finished(stack.start_sender("nbbo", nbbo, rate=0, batch_size=10))
        # A looping sender keeps running, so it can be scraped mid-stream.
        sender = stack.start_sender("orders", orders, rate=200, batch_size=10, loop=True)
        sender.wait_metrics(60, ready=lambda m: m.total("marketspread_sender_messages_total") > 0)
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        producer.send(kafka.orders_topic, key=b"AA", value=b"\x09not fixish").get(30)
        producer.close()
        stack.wait_until(lambda: (job.metrics() or {}) and job.metrics().value("marketspread_job_dead_letters_total", 0) >= 1
                         and job.metrics().value("marketspread_job_rejections_total", 0) >= 1, "a rejection and a dead letter")
        stack.wait_until(lambda: receiver.metrics().total("marketspread_receiver_dead_letters_total") >= 1
                         and receiver.metrics().value("marketspread_receiver_latency_seconds_count", 0) >= 1,
                         "the receiver to see both")
        yield {"sender": families(sender.metrics_port), "job": families(job.metrics_port),
               "receiver": families(receiver.metrics_port)}
    finally:
        stack.stop_all()


def test_every_metric_of_the_contract_is_served_with_its_type_and_labels(live_metrics):
    served = {name: family for scrape in live_metrics.values() for name, family in scrape.items()}
    for metric in load_catalogue(include_platform=False).metrics.values():
        assert metric.name in served, f"{metric.name} is in docs/architecture.md but no service serves it"
        kind, labels = served[metric.name]
        assert kind == metric.type, f"{metric.name} is served as a {kind}, the contract says {metric.type}"
        assert labels == metric.labels, f"{metric.name} has labels {sorted(labels)}, the contract {sorted(metric.labels)}"


def test_every_metric_a_service_serves_is_in_the_contract(live_metrics):
    contract = load_catalogue(include_platform=False).metrics
    for component, scrape in live_metrics.items():
        extra = sorted(set(scrape) - set(contract))
        assert not extra, f"the {component} serves metrics missing from docs/architecture.md: {extra}"


def test_each_component_serves_its_own_prefix(live_metrics):
    for component, scrape in live_metrics.items():
        assert scrape, f"the {component} serves no marketspread metrics"
        assert all(name.startswith(f"marketspread_{component}_") for name in scrape), sorted(scrape)
