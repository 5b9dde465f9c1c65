"""The streaming query: Kafka (nbbo + orders) -> per-key state -> Kafka (rejections + dead letters).

One Kafka source subscribes to both input topics: the union of the two streams, with one
offset log, so one micro-batch always sees both topics up to the same moment.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .processor import GROUP_STATE_SCHEMA, OUTPUT_SCHEMA, MarketSpreadProcessor, market_spread_with_group_state
from .session import state_store_conf
from .settings import JobSettings
from .step import KIND_DEAD_LETTER, KIND_REJECTION, KIND_STATS, StepConfig

__all__ = ["QUERY_NAME", "OBSERVATION", "read_inputs", "state_key", "market_spread", "to_kafka_records", "start_query"]

QUERY_NAME = "market-spread"
# Name of the observed metrics in each StreamingQueryProgress (read by metrics.ProgressListener).
OBSERVATION = "marketspread"


def read_inputs(spark: SparkSession, settings: JobSettings) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", f"{settings.nbbo_topic},{settings.orders_topic}")
        .option("startingOffsets", settings.starting_offsets)
        # Losing input silently is the one thing this job must never do.
        .option("failOnDataLoss", "true")
    )
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    reader = reader.options(**settings.spark_kafka_options())
    return reader.load().select(
        F.col("key").cast("string").alias("key"), "value", "topic", "partition", "offset",
        F.unix_millis("timestamp").alias("timestamp"),
    )


def state_key(settings: JobSettings) -> Column:
    """The state a record belongs to: a shard of symbols, never a single symbol.

    Framed records are keyed by their shard already. Records keyed by symbol are hashed into
    `shards` groups here: every call into a Python stateful processor costs state round trips
    to the JVM, so hundreds of symbol keys per micro-batch would cost seconds, while a shard's
    quote book holds its symbols' state side by side at the price of one read and one write.
    """
    if settings.record_format == "framed":
        return F.col("key")
    return F.concat(F.lit("shard-"), F.pmod(F.hash(F.col("key")), F.lit(settings.shards)).cast("string"))


def market_spread(records: DataFrame, settings: JobSettings) -> DataFrame:
    config = StepConfig(framed=settings.record_format == "framed", nbbo_topic=settings.nbbo_topic)
    by_key = records.withColumn("state_key", state_key(settings)).groupBy("state_key")
    if settings.state_operator == "transform_with_state_in_pandas":
        return by_key.transformWithStateInPandas(
            statefulProcessor=MarketSpreadProcessor(config), outputStructType=OUTPUT_SCHEMA, outputMode="Update",
            timeMode="None",
        )
    return by_key.applyInPandasWithState(
        market_spread_with_group_state(config), outputStructType=OUTPUT_SCHEMA, stateStructType=GROUP_STATE_SCHEMA,
        outputMode="Update", timeoutConf="NoTimeout",
    )


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def to_kafka_records(results: DataFrame, settings: JobSettings) -> DataFrame:
    kind = F.col("kind")
    observed = results.observe(
        OBSERVATION,
        F.coalesce(F.sum(F.when(kind == KIND_REJECTION, F.col("count"))), F.lit(0)).alias("rejections"),
        F.coalesce(F.sum(F.when(kind == KIND_DEAD_LETTER, F.col("count"))), F.lit(0)).alias("dead_letters"),
        F.coalesce(F.sum(F.when(kind == KIND_STATS, F.col("count"))), F.lit(0)).alias("messages"),
    )
    dead_letter_headers = F.array(
        _header("marketspread.reason", F.col("reason")),
        _header("marketspread.detail", F.col("detail")),
        _header("marketspread.source.topic", F.col("source_topic")),
        _header("marketspread.source.partition", F.col("source_partition")),
        _header("marketspread.source.offset", F.col("source_offset")),
        _header("marketspread.source.byte-offset", F.col("byte_offset")),
    )
    return observed.filter(kind != KIND_STATS).select(
        F.when(kind == KIND_REJECTION, F.lit(settings.rejections_topic))
        .otherwise(F.lit(settings.dead_letter_topic)).alias("topic"),
        "key",
        "value",
        F.when(kind == KIND_DEAD_LETTER, dead_letter_headers).alias("headers"),
    )


def start_query(spark: SparkSession, settings: JobSettings):
    # The store follows the operator even in a session built for the other one (the tests run both in one).
    for key, value in state_store_conf(settings).items():
        spark.conf.set(key, value)
    output = to_kafka_records(market_spread(read_inputs(spark, settings), settings), settings)
    return (
        output.writeStream.format("kafka")
        .queryName(QUERY_NAME)
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("kafka.acks", "all")
        .option("kafka.linger.ms", "2")
        .options(**settings.spark_kafka_options())
        .option("checkpointLocation", settings.checkpoint_dir)
        .outputMode("update")
        .trigger(processingTime=settings.trigger_interval)
        .start()
    )
