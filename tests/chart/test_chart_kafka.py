"""Kafka by Strimzi: KRaft node pools, the four topics, metrics, and the optional TLS with users and ACLs."""

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


def test_the_cluster_runs_kraft_node_pools_of_the_release(default_docs):
    kafka = cs.one(default_docs, "Kafka", "market-spread")
    assert kafka["apiVersion"] == "kafka.strimzi.io/v1"
    assert kafka["spec"]["kafka"]["version"] == "4.3.1"
    assert "zookeeper" not in kafka["spec"]
    pool = cs.one(default_docs, "KafkaNodePool", "dual")
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == "market-spread"
    assert pool["spec"]["roles"] == ["controller", "broker"]


def test_the_pinned_values_split_controllers_from_pinned_brokers(pinned_docs):
    pools = {p["metadata"]["name"]: p["spec"] for p in cs.by_kind(pinned_docs, "KafkaNodePool")}
    assert set(pools) == {"controller", "broker"}
    assert pools["broker"]["roles"] == ["broker"] and pools["broker"]["replicas"] == 3
    affinity = pools["broker"]["template"]["pod"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "marketspread.io/pool", "operator": "In", "values": ["pinned"]}]}]
    assert pools["broker"]["template"]["pod"]["tolerations"][0]["effect"] == "NoSchedule"
    assert "affinity" not in pools["controller"]["template"]["pod"]


def test_internal_topic_durability_follows_the_number_of_brokers(default_docs, pinned_docs):
    one_broker = cs.one(default_docs, "Kafka")["spec"]["kafka"]["config"]
    three = cs.one(pinned_docs, "Kafka")["spec"]["kafka"]["config"]
    assert (one_broker["offsets.topic.replication.factor"], one_broker["min.insync.replicas"]) == (1, 1)
    assert (three["offsets.topic.replication.factor"], three["transaction.state.log.min.isr"],
            three["min.insync.replicas"]) == (3, 2, 2)


def test_broker_config_from_values_overrides_the_derived_settings():
    config = cs.one(cs.render(sets=("kafka.config.min\\.insync\\.replicas=1", "kafka.config.num\\.io\\.threads=16")),
                    "Kafka")["spec"]["kafka"]["config"]
    assert (config["min.insync.replicas"], config["num.io.threads"]) == (1, 16)


def test_there_is_one_topic_per_settings_topic_with_the_configured_partitions(pinned_docs):
    topics = {t["spec"]["topicName"]: t for t in cs.by_kind(pinned_docs, "KafkaTopic")}
    assert set(topics) == {"nbbo", "orders", "rejections", "dead-letters"}
    for topic in topics.values():
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == "market-spread"
        assert (topic["spec"]["partitions"], topic["spec"]["replicas"]) == (8, 3)
        assert topic["spec"]["config"]["min.insync.replicas"] == 2


def test_renamed_topics_are_the_topics_created():
    docs = cs.render(sets=("default.settings.nbbo_topic=quotes.v2",))
    topic = next(t for t in cs.by_kind(docs, "KafkaTopic") if t["spec"]["topicName"] == "quotes.v2")
    assert topic["metadata"]["name"] == "market-spread-quotes-v2"


def test_brokers_export_metrics_and_the_exporter_reports_group_lag(default_docs):
    spec = cs.one(default_docs, "Kafka")["spec"]
    assert spec["kafka"]["metricsConfig"] == {"type": "strimziMetricsReporter"}
    assert spec["kafkaExporter"]["groupRegex"] == ".*"


def test_without_security_there_is_one_plain_listener_and_no_users(default_docs):
    kafka = cs.one(default_docs, "Kafka")["spec"]["kafka"]
    assert kafka["listeners"] == [{"name": "plain", "port": 9092, "type": "internal", "tls": False}]
    assert "authorization" not in kafka and not cs.by_kind(default_docs, "KafkaUser")


@pytest.fixture(scope="module")
def secured():
    return cs.render(cs.ci_values("pinned"), ("kafka.security.enabled=true",))


def test_security_replaces_the_plain_listener_with_an_authenticated_tls_one(secured):
    kafka = cs.one(secured, "Kafka")["spec"]["kafka"]
    assert kafka["listeners"] == [{"name": "tls", "port": 9093, "type": "internal", "tls": True,
                                   "authentication": {"type": "tls"}}]
    assert kafka["authorization"] == {"type": "simple"}


def acls(docs, user):
    spec = cs.one(docs, "KafkaUser", f"market-spread-{user}")["spec"]
    assert spec["authentication"] == {"type": "tls"}
    return {(a["resource"]["type"], a["resource"]["name"], a["resource"]["patternType"]): sorted(a["operations"])
            for a in spec["authorization"]["acls"]}


def test_each_role_may_do_exactly_what_the_data_flow_needs(secured):
    assert acls(secured, "sender") == {
        ("topic", "nbbo", "literal"): ["Describe", "Write"], ("topic", "orders", "literal"): ["Describe", "Write"]}
    assert acls(secured, "job") == {
        ("topic", "nbbo", "literal"): ["Describe", "Read"], ("topic", "orders", "literal"): ["Describe", "Read"],
        ("topic", "rejections", "literal"): ["Describe", "Write"],
        ("topic", "dead-letters", "literal"): ["Describe", "Write"],
        ("group", "spark-kafka-source-", "prefix"): ["Read"]}
    assert acls(secured, "receiver") == {
        ("topic", "rejections", "literal"): ["Describe", "Read"],
        ("topic", "dead-letters", "literal"): ["Describe", "Read"],
        ("group", "marketspread-receiver", "literal"): ["Read"]}


def test_with_security_clients_get_the_tls_bootstrap_their_certificate_and_the_ca(secured):
    for name, user in (("sender-nbbo", "sender"), ("sender-orders", "sender"), ("receiver", "receiver")):
        pod = cs.one(secured, "Deployment", f"market-spread-{name}")["spec"]["template"]["spec"]
        env = cs.env_of(pod["containers"][0])
        assert env["MARKETSPREAD_BOOTSTRAP_SERVERS"] == "market-spread-kafka-bootstrap.market-spread.svc:9093"
        assert (env["MARKETSPREAD_SSL_CAFILE"], env["MARKETSPREAD_SSL_CERTFILE"], env["MARKETSPREAD_SSL_KEYFILE"]) == (
            "/etc/marketspread/kafka/ca.crt", "/etc/marketspread/kafka/user.crt", "/etc/marketspread/kafka/user.key")
        volume = next(v for v in pod["volumes"] if v["name"] == "kafka-tls")
        assert [s["secret"]["name"] for s in volume["projected"]["sources"]] == [
            f"market-spread-{user}", "market-spread-cluster-ca-cert"]


def test_the_plain_listener_can_be_kept_beside_tls():
    kafka = cs.one(cs.render(sets=("kafka.security.enabled=true", "kafka.security.plainListener=true")), "Kafka")
    assert [listener["name"] for listener in kafka["spec"]["kafka"]["listeners"]] == ["plain", "tls"]
