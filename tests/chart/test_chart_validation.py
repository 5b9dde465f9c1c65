"""Contradictory values fail at render time with a message that names the keys to change."""

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm


def fails_with(*sets: str, values: tuple[str, ...] = ()) -> str:
    return cs.render_failure(values, sets)


def test_bootstrap_servers_given_while_the_chart_runs_its_own_kafka_fail():
    error = fails_with("default.settings.bootstrap_servers=kafka:9092")
    assert "default.settings.bootstrap_servers is set while kafka.enabled is true" in error


def test_an_external_kafka_without_bootstrap_servers_fails():
    assert "set default.settings.bootstrap_servers" in fails_with("kafka.enabled=false")


def test_an_external_kafka_with_bootstrap_servers_renders_no_kafka_and_points_every_client_at_it():
    docs = cs.render(sets=("kafka.enabled=false", "default.settings.bootstrap_servers=broker-0.example:9092"))
    assert not cs.by_kind(docs, "Kafka") and not cs.by_kind(docs, "KafkaTopic")
    for deployment in cs.by_kind(docs, "Deployment"):
        env = cs.env_of(deployment["spec"]["template"]["spec"]["containers"][0])
        assert env["MARKETSPREAD_BOOTSTRAP_SERVERS"] == "broker-0.example:9092"
    app = cs.one(docs, "SparkApplication")
    assert cs.env_of(app["spec"]["driver"])["MARKETSPREAD_BOOTSTRAP_SERVERS"] == "broker-0.example:9092"


def test_a_component_disagreeing_on_a_topic_fails():
    error = fails_with("components.sender-orders.settings.orders_topic=orders-v2")
    assert "components.sender-orders.settings.orders_topic is orders-v2 but default.settings.orders_topic is orders" in error


def test_the_job_disagreeing_on_the_record_format_fails():
    error = fails_with("job.settings.record_format=framed")
    assert "job.settings.record_format is framed but default.settings.record_format is message" in error


def test_a_component_repeating_a_shared_setting_with_the_same_value_is_fine():
    cs.render(sets=("components.receiver.settings.shards=1",))


def test_a_component_repeating_a_shared_setting_with_another_value_fails():
    assert "components.receiver.settings.shards is 8 but default.settings.shards is 1" in \
        fails_with("components.receiver.settings.shards=8")


def test_a_spark_master_fails_because_spark_submit_sets_it():
    assert "job.settings.master is \"local[4]\"" in fails_with("job.settings.master=local[4]")


def test_a_checkpoint_dir_in_the_job_settings_fails_because_the_chart_derives_it():
    assert "job.settings.checkpoint_dir is set" in fails_with("job.settings.checkpoint_dir=/tmp/x")


def test_two_checkpoint_locations_fail():
    error = fails_with("job.checkpoint.uri=s3a://bucket/ms")
    assert "job.checkpoint.uri and job.checkpoint.persistentVolumeClaim.enabled are both set" in error


def test_no_checkpoint_at_all_fails():
    assert "the job has no checkpoint" in fails_with("job.checkpoint.persistentVolumeClaim.enabled=false")


def test_a_checkpoint_claim_only_one_pod_may_mount_fails():
    error = fails_with("job.checkpoint.persistentVolumeClaim.accessModes={ReadWriteOncePod}")
    assert "ReadWriteOncePod" in error and "driver and every executor write the checkpoint" in error


def test_monitoring_without_a_metrics_port_fails():
    error = fails_with("components.receiver.settings.metrics_port=0")
    assert "components.receiver.settings.metrics_port is 0 or missing while monitoring.enabled is true" in error


def test_spark_metrics_without_the_spark_ui_fails():
    assert "monitoring.sparkMetrics is true but job.settings.ui_port is 0" in fails_with("job.settings.ui_port=0")


def test_without_monitoring_metrics_ports_may_be_off():
    cs.render(sets=("monitoring.enabled=false", "components.receiver.settings.metrics_port=0"))


@pytest.mark.parametrize("key", ["spark.executor.instances", "spark.kubernetes.driver.limit.cores",
                                 "spark.sql.shuffle.partitions"])
def test_spark_conf_may_not_set_what_the_chart_owns(key):
    assert f"job.sparkConf sets {key}, which the chart owns" in fails_with(f"job.sparkConf.{key.replace('.', chr(92) + '.')}=4")


def test_a_pinned_component_without_guaranteed_resources_fails():
    error = fails_with("components.receiver.pinned=true")
    assert ("components.receiver runs on the pinned pool, so it needs Guaranteed QoS: resources.requests "
            "(cpu 250m, memory 256Mi) must equal resources.limits (cpu 1, memory 512Mi)") in error


def test_a_pinned_broker_pool_with_fractional_cpus_fails():
    error = fails_with("kafka.nodePools.broker.resources.requests.cpu=3500m",
                       "kafka.nodePools.broker.resources.limits.cpu=3500m", values=cs.ci_values("pinned"))
    assert "kafka.nodePools.broker runs on the pinned pool: cpu 3500m is not a whole number of CPUs" in error


def test_a_pinned_broker_pool_with_an_odd_cpu_count_fails_on_hyperthreaded_nodes():
    error = fails_with("kafka.nodePools.broker.resources.requests.cpu=3",
                       "kafka.nodePools.broker.resources.limits.cpu=3", values=cs.ci_values("pinned"))
    assert "cpu 3 is not a multiple of pinnedPool.cpuMultiple (2)" in error


def test_a_pinned_job_with_an_odd_core_count_fails():
    error = fails_with("job.executor.cores=3", values=cs.ci_values("pinned"))
    assert "job.executor.cores is 3 but the job is pinned: it must be a multiple of pinnedPool.cpuMultiple (2)" in error


def test_topics_with_more_replicas_than_brokers_fail():
    error = fails_with("kafka.topics.replicas=3")
    assert "kafka.topics.replicas is 3 but kafka.nodePools has only 1 broker(s)" in error


def test_topics_whose_min_insync_replicas_exceeds_their_replicas_fail():
    error = fails_with("kafka.topics.replicas=1", values=cs.ci_values("pinned"))
    assert "the topics' min.insync.replicas is 2" in error and "kafka.topics.replicas is 1" in error


def test_a_kafka_without_a_controller_fails():
    error = fails_with("kafka.nodePools.dual.roles={broker}")
    assert "KRaft needs at least one of each" in error


def test_kafka_security_with_an_external_kafka_fails():
    error = fails_with("kafka.enabled=false", "default.settings.bootstrap_servers=k:9092", "kafka.security.enabled=true")
    assert "kafka.security.enabled needs the chart's own Kafka" in error


def test_a_receiver_without_its_consumer_group_fails_since_alerts_and_acls_name_it():
    error = fails_with("components.receiver.settings.group_id=")
    assert "components.receiver.settings.group_id is missing" in error
