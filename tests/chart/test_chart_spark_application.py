"""The SparkApplication: a streaming job that restarts from its checkpoint, with whole CPUs."""

import pytest

import chart_support as cs

pytestmark = pytest.mark.helm

def app(docs) -> dict:
    return cs.one(docs, "SparkApplication", "market-spread-job")["spec"]


def test_it_is_a_python_application_run_from_the_spark_job_image(default_docs):
    spec = app(default_docs)
    assert (spec["type"], spec["mode"], spec["pythonVersion"]) == ("Python", "cluster", "3")
    assert spec["image"] == "market-spread/spark-job:0.1.0"
    assert spec["mainApplicationFile"] == "local:///opt/marketspread/job.py"
    assert spec["sparkVersion"] == "4.3.0"


def test_the_spark_version_is_the_pyspark_version_the_tests_prove(default_docs):
    pinned = dict(line.split("==") for line in (cs.REPO / "constraints.txt").read_text().splitlines() if "==" in line)
    assert app(default_docs)["sparkVersion"] == pinned["pyspark"]


def test_a_streaming_job_is_resubmitted_whenever_it_ends(default_docs):
    policy = app(default_docs)["restartPolicy"]
    assert policy["type"] == "Always"
    assert policy["onFailureRetryInterval"] > 0 and policy["onSubmissionFailureRetryInterval"] > 0


def test_spark_serves_prometheus_metrics_in_utc(default_docs):
    conf = app(default_docs)["sparkConf"]
    assert conf["spark.sql.streaming.metricsEnabled"] == "true"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.class"] == "org.apache.spark.metrics.sink.PrometheusServlet"
    assert conf["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    assert conf["spark.ui.port"] == "4040"
    assert conf["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.parametrize("operator, provider", [
    (None, "HDFSBackedStateStoreProvider"),
    ("transform_with_state_in_pandas", "RocksDBStateStoreProvider"),
])
def test_the_state_store_is_the_jobs_choice_from_its_state_operator_never_the_charts(operator, provider, monkeypatch):
    from marketspread_job.session import spark_conf

    docs = cs.render(sets=(f"job.settings.state_operator={operator}",) if operator else ())
    spec = app(docs)
    assert not any(key.startswith("spark.sql.streaming.stateStore.") for key in spec["sparkConf"])
    for name, value in cs.env_of(spec["driver"]).items():
        monkeypatch.setenv(name, value)
    from marketspread_job.settings import JobSettings

    settings = JobSettings()
    assert settings.state_operator == (operator or "apply_in_pandas_with_state")
    assert spark_conf(settings)["spark.sql.streaming.stateStore.providerClass"].endswith("." + provider)


def test_every_spark_conf_value_is_a_string_as_the_crd_requires(pinned_docs):
    assert all(isinstance(value, str) for value in app(pinned_docs)["sparkConf"].values())


def test_extra_spark_conf_is_passed_through():
    docs = cs.render(sets=("job.sparkConf.spark\\.sql\\.streaming\\.stateStore\\.checkpointFormatVersion=2",))
    assert app(docs)["sparkConf"]["spark.sql.streaming.stateStore.checkpointFormatVersion"] == "2"


def test_driver_and_executors_ask_for_whole_cpus_with_request_equal_to_limit(pinned_docs):
    spec = app(pinned_docs)
    assert (spec["driver"]["cores"], spec["driver"]["coreRequest"], spec["driver"]["coreLimit"]) == (2, "2", "2")
    executor = spec["executor"]
    assert (executor["instances"], executor["cores"], executor["coreRequest"], executor["coreLimit"]) == (2, 4, "4", "4")
    assert (executor["memory"], executor["memoryOverhead"]) == ("6g", "4g")
    assert "memoryLimit" not in executor and "memoryLimit" not in spec["driver"]


def test_the_pinned_job_selects_and_tolerates_the_pinned_pool(pinned_docs):
    for role in ("driver", "executor"):
        pod = app(pinned_docs)[role]
        assert pod["nodeSelector"] == {"marketspread.io/pool": "pinned"}
        assert pod["tolerations"] == [{"key": "marketspread.io/pool", "operator": "Equal", "value": "pinned",
                                       "effect": "NoSchedule"}]


def test_an_unpinned_job_goes_anywhere(default_docs):
    for role in ("driver", "executor"):
        assert "nodeSelector" not in app(default_docs)[role] and "tolerations" not in app(default_docs)[role]


def test_the_checkpoint_claim_is_mounted_on_the_driver_and_every_executor(default_docs):
    spec = app(default_docs)
    assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "market-spread-checkpoints"}} in spec["volumes"]
    for role in ("driver", "executor"):
        assert {"name": "checkpoint", "mountPath": "/checkpoints"} in spec[role]["volumeMounts"]
        assert cs.env_of(spec[role])["MARKETSPREAD_CHECKPOINT_DIR"] == "/checkpoints/market-spread"
    claim = cs.one(default_docs, "PersistentVolumeClaim", "market-spread-checkpoints")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_an_object_store_checkpoint_needs_no_claim():
    docs = cs.render(sets=("job.checkpoint.uri=s3a://bucket/market-spread",
                           "job.checkpoint.persistentVolumeClaim.enabled=false"))
    spec = app(docs)
    assert cs.env_of(spec["driver"])["MARKETSPREAD_CHECKPOINT_DIR"] == "s3a://bucket/market-spread"
    assert not cs.by_kind(docs, "PersistentVolumeClaim")
    assert all(volume["name"] != "checkpoint" for volume in spec["volumes"])


def test_an_existing_claim_is_used_and_none_is_created():
    docs = cs.render(sets=("job.checkpoint.persistentVolumeClaim.existingClaim=my-checkpoints",))
    assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "my-checkpoints"}} in app(docs)["volumes"]
    assert not cs.by_kind(docs, "PersistentVolumeClaim")


def test_the_job_reads_its_settings_and_leaves_the_master_to_spark_submit(default_docs, monkeypatch):
    from marketspread_job.settings import JobSettings

    env = cs.env_of(app(default_docs)["driver"])
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = JobSettings()
    assert settings.master == ""  # the class default, local[2], would run Spark inside the driver pod
    assert settings.bootstrap_servers == "market-spread-kafka-bootstrap.market-spread.svc:9092"
    assert (settings.metrics_port, settings.ui_port, settings.jars) == (9103, 4040, "")


def test_python_runs_the_images_venv_on_driver_and_executors(default_docs):
    spec = app(default_docs)
    assert spec["sparkConf"]["spark.pyspark.python"] == "/opt/marketspread/venv/bin/python"
    assert spec["sparkConf"]["spark.pyspark.driver.python"] == "/opt/marketspread/venv/bin/python"


def test_the_driver_exposes_the_jobs_metrics_port(default_docs):
    assert app(default_docs)["driver"]["ports"] == [{"name": "metrics", "containerPort": 9103, "protocol": "TCP"}]


def test_the_driver_runs_as_its_own_service_account_allowed_to_manage_executors(default_docs):
    assert app(default_docs)["driver"]["serviceAccount"] == "market-spread-spark"
    role = cs.one(default_docs, "Role", "market-spread-spark")
    assert {"pods", "services", "configmaps", "persistentvolumeclaims"} <= set(role["rules"][0]["resources"])
    binding = cs.one(default_docs, "RoleBinding", "market-spread-spark")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "market-spread-spark", "namespace": "market-spread"}]


def test_the_driver_and_executor_pods_carry_the_labels_the_pod_monitor_selects(default_docs):
    spec = app(default_docs)
    monitor = cs.one(default_docs, "PodMonitor", "market-spread-job")["spec"]["selector"]["matchLabels"]
    spark_own = {"spark-role"}  # set by Spark itself on the pods
    for key, value in monitor.items():
        if key not in spark_own:
            assert spec["driver"]["labels"][key] == value


def test_with_kafka_security_the_job_mounts_its_users_certificate():
    spec = app(cs.render(sets=("kafka.security.enabled=true",)))
    volume = next(v for v in spec["volumes"] if v["name"] == "kafka-tls")
    assert [s["secret"]["name"] for s in volume["projected"]["sources"]] == [
        "market-spread-job", "market-spread-cluster-ca-cert"]
    env = cs.env_of(spec["driver"])
    assert env["MARKETSPREAD_SECURITY_PROTOCOL"] == "SSL"
    assert env["MARKETSPREAD_BOOTSTRAP_SERVERS"].endswith(":9093")


def test_a_disabled_job_renders_no_spark_objects():
    docs = cs.render(sets=("job.enabled=false",))
    assert not {"SparkApplication", "PersistentVolumeClaim", "Role"} & {d["kind"] for d in docs}
