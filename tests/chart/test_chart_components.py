"""The sender and receiver workloads: one generic template, driven by `components`."""

import os

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


def deployment(docs, component):
    return cs.one(docs, "Deployment", f"market-spread-{component}")


def container(docs, component):
    return deployment(docs, component)["spec"]["template"]["spec"]["containers"][0]


def test_there_is_a_deployment_and_a_metrics_service_per_component(default_docs):
    names = {"sender-nbbo", "sender-orders", "receiver"}
    assert {d["metadata"]["name"] for d in cs.by_kind(default_docs, "Deployment")} == {f"market-spread-{n}" for n in names}
    assert {s["metadata"]["name"] for s in cs.by_kind(default_docs, "Service")} == {f"market-spread-{n}" for n in names}


def test_each_service_selects_its_own_pods_on_the_metrics_port(default_docs):
    for component, port in (("sender-nbbo", 9101), ("sender-orders", 9101), ("receiver", 9102)):
        service = cs.one(default_docs, "Service", f"market-spread-{component}")
        pod_labels = deployment(default_docs, component)["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"]["selector"]["app.kubernetes.io/component"] == component
        assert service["spec"]["ports"] == [{"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"}]
        assert container(default_docs, component)["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]


def test_the_two_senders_run_the_sender_subcommand_on_their_own_stream(default_docs):
    for stream in ("nbbo", "orders"):
        c = container(default_docs, f"sender-{stream}")
        assert c["args"] == ["sender"]
        assert c["image"] == "market-spread/sender:0.1.0"
        assert cs.env_of(c)["MARKETSPREAD_STREAM"] == stream


def test_the_receiver_runs_the_receiver_image_and_subcommand(default_docs):
    c = container(default_docs, "receiver")
    assert c["args"] == ["receiver"] and c["image"] == "market-spread/receiver:0.1.0"


def test_each_settings_key_becomes_the_environment_variable_the_settings_class_reads(default_docs, monkeypatch):
    """The pods' environment, read by the real settings classes, gives back the values."""
    from marketspread.receiver.settings import ReceiverSettings
    from marketspread.sender.settings import SenderSettings

    for component, settings_cls in (("sender-nbbo", SenderSettings), ("sender-orders", SenderSettings),
                                    ("receiver", ReceiverSettings)):
        env = cs.env_of(container(default_docs, component))
        assert all(name.startswith("MARKETSPREAD_") for name in env)
        for name in list(os.environ):
            if name.startswith("MARKETSPREAD_"):
                monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = settings_cls()
        assert settings.bootstrap_servers == "market-spread-kafka-bootstrap.market-spread.svc:9092"
        assert settings.orders_topic == "orders" and settings.dead_letter_topic == "dead-letters"
        assert set(env) == {f"MARKETSPREAD_{key.upper()}" for key in settings.model_fields_set}


def test_numbers_reach_the_environment_as_python_parses_them(monkeypatch, tmp_path):
    """Helm holds YAML numbers as floats: big integers must not come out as 1.048576e+06."""
    from marketspread.sender.settings import SenderSettings

    values = tmp_path / "numbers.yaml"
    values.write_text("components:\n  sender-nbbo:\n    settings:\n      stream: nbbo\n      metrics_port: 9101\n"
                      "      producer_batch_bytes: 4194304\n      reject_ratio: 0.0001\n      loop: true\n"
                      "      rate: 250000\n")
    docs = cs.render(values=(str(values),))
    env = cs.env_of(container(docs, "sender-nbbo"))
    assert env["MARKETSPREAD_PRODUCER_BATCH_BYTES"] == "4194304"
    assert env["MARKETSPREAD_RATE"] == "250000"
    assert env["MARKETSPREAD_LOOP"] == "true"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = SenderSettings()
    assert (settings.producer_batch_bytes, settings.reject_ratio, settings.loop) == (4194304, 0.0001, True)


def test_yaml_integers_from_a_values_file_stay_integers(local_docs):
    # ci/default-values.yaml sets rate: 2000 in YAML, which Helm reads as a float.
    assert cs.env_of(container(local_docs, "sender-orders"))["MARKETSPREAD_RATE"] == "2000"


def test_a_component_is_added_by_values_alone():
    docs = cs.render(sets=("components.sender-extra.command=sender",
                           "components.sender-extra.image.repository=market-spread/sender",
                           "components.sender-extra.settings.stream=orders",
                           "components.sender-extra.settings.metrics_port=9101",
                           "components.sender-extra.settings.seed=7"))
    c = container(docs, "sender-extra")
    assert cs.env_of(c)["MARKETSPREAD_SEED"] == "7" and c["args"] == ["sender"]
    assert deployment(docs, "sender-extra")["spec"]["replicas"] == 1
    monitor = cs.one(docs, "ServiceMonitor")
    assert "sender-extra" in monitor["spec"]["selector"]["matchExpressions"][0]["values"]


def test_a_component_scaled_to_zero_keeps_its_deployment():
    docs = cs.render(sets=("components.sender-nbbo.replicas=0",))
    assert deployment(docs, "sender-nbbo")["spec"]["replicas"] == 0


def test_a_disabled_component_renders_nothing():
    docs = cs.render(sets=("components.sender-nbbo.enabled=false",))
    assert "market-spread-sender-nbbo" not in {d["metadata"]["name"] for d in docs}


def test_component_values_fall_back_to_default_key_by_key():
    docs = cs.render(sets=("default.imageTag=1.2.3", "components.receiver.image.tag=9.9.9",
                           "default.nodeSelector.disk=ssd"))
    assert container(docs, "sender-nbbo")["image"] == "market-spread/sender:1.2.3"
    assert container(docs, "receiver")["image"] == "market-spread/receiver:9.9.9"
    assert deployment(docs, "receiver")["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}


def test_senders_are_replaced_not_rolled_so_the_rate_never_doubles(default_docs):
    for d in cs.by_kind(default_docs, "Deployment"):
        assert d["spec"]["strategy"] == {"type": "Recreate"}


def test_pods_are_probed_on_their_metrics_endpoint(default_docs):
    c = container(default_docs, "sender-orders")
    assert c["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_a_pinned_component_selects_and_tolerates_the_pinned_pool():
    docs = cs.render(sets=("components.receiver.pinned=true",
                           "components.receiver.resources.requests.cpu=2", "components.receiver.resources.limits.cpu=2",
                           "components.receiver.resources.requests.memory=1Gi",
                           "components.receiver.resources.limits.memory=1Gi"))
    spec = deployment(docs, "receiver")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"marketspread.io/pool": "pinned"}
    assert spec["tolerations"] == [{"key": "marketspread.io/pool", "operator": "Equal", "value": "pinned",
                                    "effect": "NoSchedule"}]
