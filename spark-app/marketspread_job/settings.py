"""The Spark job's settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from marketspread.settings import KafkaSettings

__all__ = ["JobSettings", "StateOperator"]

StateOperator = Literal["apply_in_pandas_with_state", "transform_with_state_in_pandas"]


class JobSettings(KafkaSettings):
    master: str = Field("local[2]", description="Spark master; empty: leave it to spark-submit (Kubernetes)")
    app_name: str = Field("market-spread", description="Spark application name")
    checkpoint_dir: str = Field(".local/run/checkpoint", description="checkpoint location (a path or an object-store URI)")
    shuffle_partitions: int = Field(
        1, ge=1, description="spark.sql.shuffle.partitions, fixed into a new checkpoint: the state stage's tasks. "
                             "On a 2-core machine one task costs a third of two per micro-batch; on a cluster use "
                             "the executors' total cores")
    trigger_interval: str = Field("0 seconds", description="micro-batch trigger interval")
    max_offsets_per_trigger: int = Field(0, ge=0, description="cap on records per micro-batch (back-pressure); 0: none")
    starting_offsets: str = Field("earliest", description="where a new checkpoint starts reading")
    metrics_port: int = Field(9103, ge=0, description="port of /metrics; 0: none")
    ui_port: int = Field(0, ge=0, description="Spark UI port (also serves Spark's own Prometheus metrics); 0: UI off")
    jars: str = Field("", description="comma-separated connector jars or a directory of them; empty: "
                                      "$MARKETSPREAD_LOCAL_DIR/jars/spark when run locally")
    log_level: str = Field("WARN", description="Spark log level")
    jvm_options: str = Field(
        "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:ReservedCodeCacheSize=240m",
        description="options of the JVM the job launches (local master only; on Kubernetes the SparkApplication "
                    "sets them): C1-only JIT and the parallel collector halve the JVM's CPU here, since the "
                    "job's JVM work is copying bytes, which C2 does not speed up. C1-only also shrinks the "
                    "default code cache to 48 MB, which the job's compiled code fills within a minute; the "
                    "sweeper and the recompilation that follow stall micro-batches for seconds, so the "
                    "tiered default (240 MB) is restored")
    local_heap: str = Field(
        "1g", pattern=r"^[0-9]+[kKmMgG]$",
        description="heap of the job's JVM when the master is local: its -Xmx and -Xms alike, touched at start, so "
                    "the heap is resident from the first batch instead of creeping up as the collector grows it "
                    "(on Kubernetes: the chart's job.driver.memory and job.executor.memory)")
    state_operator: StateOperator = Field(
        "apply_in_pandas_with_state",
        description="how Spark keeps each shard's quote book, fixed for the life of a checkpoint: "
                    "'apply_in_pandas_with_state' (the state travels with the rows; Spark's default in-memory, "
                    "HDFS-backed store) or 'transform_with_state_in_pandas' (a ValueState through the JVM's state "
                    "server, on RocksDB; slower micro-batches, for checkpoints of earlier versions)")
    spark_conf: str = Field("", description="extra Spark settings, comma-separated key=value pairs, applied last")
