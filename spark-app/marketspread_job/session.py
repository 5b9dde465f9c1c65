"""The Spark session the job runs in: its state store, UTC, metrics, the Kafka connector jars."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from marketspread.errors import MarketSpreadError
from marketspread.paths import local_dir

from .settings import JobSettings

__all__ = ["spark_conf", "state_store_conf", "build_session", "connector_jars", "JobConfigError"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_BACKED_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
MALLOC_ARENA_MAX = "2"
FILESYSTEM_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def _local_path(location: str) -> bool:
    return "://" not in location or location.startswith("file:")


class JobConfigError(MarketSpreadError):
    pass


def connector_jars(settings: JobSettings) -> list[str]:
    """The spark-sql-kafka jars: given explicitly, else from `make setup` when running locally.

    On Kubernetes the image already has them in /opt/spark/jars, so none are passed.
    """
    if settings.jars:
        paths = [Path(p) for p in settings.jars.split(",") if p]
        if len(paths) == 1 and paths[0].is_dir():
            paths = sorted(paths[0].glob("*.jar"))
    elif settings.master.startswith("local"):
        paths = sorted((local_dir() / "jars" / "spark").glob("*.jar"))
    else:
        return []
    if not any("spark-sql-kafka" in p.name for p in paths):
        raise JobConfigError("the Kafka connector jar (spark-sql-kafka-0-10) was not found"
                             f"{' in ' + settings.jars if settings.jars else ''}: run `make setup` first")
    return [str(p.resolve()) for p in paths]


def state_store_conf(settings: JobSettings) -> dict[str, str]:
    """The state store the operator runs on; a query records it in its checkpoint when it first starts."""
    if settings.state_operator == "transform_with_state_in_pandas":
        # transformWithState needs RocksDB; changelog checkpointing makes each commit small.
        return {"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
    # A few shards of at most a few thousand symbols each: kilobytes of state, which Spark's default store
    # keeps in memory and commits as one small delta file; RocksDB's load, changelog and commit of every
    # micro-batch made batches 60-85 ms longer on busy cores (docs/benchmarks.md).
    return {"spark.sql.streaming.stateStore.providerClass": HDFS_BACKED_PROVIDER}


def spark_conf(settings: JobSettings) -> dict[str, str]:
    conf = {
        **state_store_conf(settings),
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        # Nothing in this job needs a batch without data: no timers, no watermarks.
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.ui.enabled": "true" if settings.ui_port else "false",
        "spark.ui.showConsoleProgress": "false",
        # A micro-batch here is ~100 Kafka records of framed messages: Spark would generate Java
        # source for it every batch (whole-stage code in the driver's planning, projections in the
        # tasks), which costs more than interpreting the few rows. Measured: near-empty batches
        # 0.20-0.23 s instead of 0.25, a fifth less CPU in the driver and the tasks
        # (docs/benchmarks.md). factoryMode is marked internal by Spark (its own tests set it); it
        # only picks the interpreted projections Spark falls back to anyway. (The state server's
        # thread does not see it and still generates its own.)
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    if settings.ui_port:
        conf.update({
            "spark.ui.port": str(settings.ui_port),
            "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
            "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
            "spark.metrics.appStatusSource.enabled": "true",
        })
    if _local_path(settings.checkpoint_dir):
        # Spark's default (FileContext-based) manager makes Hadoop fork `readlink` for every file
        # it touches on a local disk, ~30 times a second here; on a POSIX disk or volume the
        # FileSystem-based one is as safe (rename is atomic) and halves a small batch's commits.
        conf["spark.sql.streaming.checkpointFileManagerClass"] = FILESYSTEM_CHECKPOINTS
    if settings.security_protocol != "PLAINTEXT":
        # The client's private key travels as a source/sink option (see KafkaSettings.spark_kafka_options):
        # keep it out of query plans, logs and the UI, as Spark does for URLs by default.
        conf["spark.sql.redaction.options.regex"] = "(?i)url|ssl\\.|password|secret"
        conf["spark.redaction.regex"] = "(?i)secret|password|token|access[.]?key|ssl\\."
    if settings.master.startswith("local"):
        # Only a JVM not yet started takes options: pyspark launches it from this conf. A heap that
        # starts at its full size and is touched at once keeps RSS flat: left to itself the collector
        # grows the heap toward -Xmx over minutes, which looks like a leak from outside.
        conf["spark.driver.memory"] = settings.local_heap
        conf["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, [f"-Xms{settings.local_heap}", "-XX:+AlwaysPreTouch", settings.jvm_options]))
    if jars := connector_jars(settings):
        conf["spark.jars"] = ",".join(jars)
    for pair in filter(None, (p.strip() for p in settings.spark_conf.split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise JobConfigError(f"spark_conf entry {pair!r} is not key=value")
        conf[key.strip()] = value.strip()
    return conf


def build_session(settings: JobSettings):
    from pyspark.sql import SparkSession

    # Python workers must import this package: run them in the driver's own environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The JVM (launched from here when local) runs ~300 threads; glibc gives each its own malloc arena,
    # up to 8 per core, and RocksDB and Netty's native allocations spread over all of them: RSS that
    # grows for an hour. Two arenas hold the same memory compactly (bench-drain, 3 pairs: no slower).
    os.environ.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENA_MAX)
    builder = SparkSession.builder.appName(settings.app_name)
    if settings.master:
        builder = builder.master(settings.master)
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark
