"""Kafka over TLS with client certificates, as the chart's `kafka.security` sets it up.

A real broker with a TLS listener that requires client certificates (like Strimzi's `tls`
listener with `authentication: tls`), certificates made by openssl for the test, and the real
sender, Spark job and receiver processes configured only through their settings
(`security_protocol`, `ssl_cafile`, `ssl_certfile`, `ssl_keyfile`). The test harness itself
creates topics and reads offsets over the broker's plaintext listener.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from marketspread.fixish import Nbbo, Order, Side, encode, frame_all
from marketspread.localkafka import BrokerSettings, LocalKafka
from marketspread.reference import expected_rejections
from marketspread.run.stack import Stack, free_port
from marketspread.run.summary import read_results
from marketspread.settings import KafkaSettings



pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(600)]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> Path:
    """A CA, a broker certificate for 127.0.0.1 and a client certificate, keys in PKCS#8 as Strimzi's."""
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=marketspread-test-ca", cwd=d)
    for name, cn in (("broker", "localhost"), ("client", "marketspread-client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={cn}", cwd=d)
        (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    (d / "broker.pem").write_text((d / "broker.key").read_text() + (d / "broker.crt").read_text())
    assert "BEGIN PRIVATE KEY" in (d / "client.key").read_text()  # PKCS#8, what the Java client reads
    return d


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, certificates):
    broker = LocalKafka(BrokerSettings(port=free_port(), controller_port=free_port(), ssl_port=free_port(),
                                       ssl_keystore_file=str(certificates / "broker.pem"),
                                       ssl_truststore_file=str(certificates / "ca.crt"),
                                       run_dir=str(tmp_path_factory.mktemp("kafka-tls")), heap="512m"))
    broker.start()
    yield broker
    broker.stop()


def tls_settings(broker: LocalKafka, certificates: Path, **overrides) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=f"127.0.0.1:{broker.settings.ssl_port}", security_protocol="SSL",
                         ssl_cafile=str(certificates / "ca.crt"), ssl_certfile=str(certificates / "client.crt"),
                         ssl_keyfile=str(certificates / "client.key"), **overrides)


def test_the_tls_listener_admits_a_client_with_a_certificate_and_refuses_one_without(tls_broker, certificates):
    settings = tls_settings(tls_broker, certificates)
    with_certificate = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=10000,
                                     **settings.client_config())
    try:
        assert isinstance(with_certificate.topics(), set)
    finally:
        with_certificate.close()
    config = {k: v for k, v in settings.client_config().items() if k not in ("ssl_certfile", "ssl_keyfile")}
    with pytest.raises(KafkaError):
        without = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=5000,
                                api_version_auto_timeout_ms=5000, **config)
        try:
            without.topics()
        finally:
            without.close()


def test_sender_job_and_receiver_work_end_to_end_over_tls(tmp_path, tls_broker, certificates):
    kafka = tls_settings(tls_broker, certificates, nbbo_topic="tls-nbbo", orders_topic="tls-orders",
                         rejections_topic="tls-rejections", dead_letter_topic="tls-dead-letters")
    quotes = [Nbbo("AA", 10.0, 10.01), Nbbo("BB", 10.0, 10.5)]
    orders = [Order(Side.BUY, 1, f"T{i:05d}", ("AA", "BB", "CC")[i % 3], 1.0, 10.0) for i in range(30)]
    (tmp_path / "nbbo.msg").write_bytes(frame_all(encode(m) for m in quotes))
    (tmp_path / "orders.msg").write_bytes(frame_all(encode(m) for m in orders))
    stack = Stack(kafka, tmp_path / "out", time.monotonic() + 400,
                  admin_bootstrap_servers=tls_broker.bootstrap_servers)
    try:
        stack.fresh_topics(partitions=1)
        receiver = stack.start_receiver()
        stack.start_job(tmp_path / "out" / "checkpoint")
        receiver.wait_metrics(60)
        stack.wait_job_ready()
        stack.wait_finished(stack.start_sender("nbbo", tmp_path / "nbbo.msg", rate=0, batch_size=10))
        stack.wait_processed()
        stack.wait_finished(stack.start_sender("orders", tmp_path / "orders.msg", rate=0, batch_size=10))
        stack.wait_processed()
        stack.wait_received()
    finally:
        stack.stop_all()

    received = read_results(tmp_path / "out" / "rejections.msg")
    expected = expected_rejections(quotes, orders)
    assert len(expected) == 20  # BB's spread rejects, CC was never quoted
    assert sorted(r.identity() for r in received) == sorted(r.identity() for r in expected)
