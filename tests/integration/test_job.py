"""The Spark job end to end: a real Kafka broker, the real query (local[2], both state operators, UTC).

Specified here, each time by comparing what the job writes to Kafka with what is expected,
exactly: Wallaroo's own correctness scenario; the 350-symbol initial NBBO file followed by the
historical orders; the `message` and `framed` record formats giving the same rejections; every
kind of bad record landing on the dead-letter topic with its headers while the valid messages
around it are processed; a restart from the same checkpoint keeping the quotes and losing
nothing (under either state operator); the job's metrics counting what went through, with
committed offsets equal to the input topics' end offsets; and a checkpoint refusing any state
operator but the one that wrote it. One Spark session serves the whole module (it takes 10-15 s
to start); each test has its own topics and checkpoint. Waiting is `processAllAvailable()` or a
poll with a deadline, never a sleep.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import get_args

import numpy as np
import pytest
from kafka import KafkaProducer
from prometheus_client import CollectorRegistry
from pyspark.errors import StreamingQueryException

from marketspread.fixish import (
    FixishError, Nbbo, Order, OrderResult, Side, decode, decode_order_result, encode, frame, frame_all, split_frames,
)
from marketspread.localkafka import end_offsets
from marketspread.partitioning import shard_key, shard_of
from marketspread.reference import ReferenceModel
from marketspread.rule import should_reject
from marketspread_job.app import failure_message
from marketspread_job.metrics import JobMetrics, ProgressPoller
from marketspread_job.query import start_query, state_key
from marketspread_job.session import HDFS_BACKED_PROVIDER, ROCKSDB_PROVIDER, build_session
from marketspread_job.settings import JobSettings, StateOperator

from kafka_records import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(300)]


DEADLINE_SECONDS = 60
PARTITIONS = 2  # of every topic
# ms: every record's timestamp counts up from here. It must be recent: the broker's time-based
# retention judges records by their timestamps and deletes "old" ones within minutes.
T0 = int(time.time()) * 1000


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session = build_session(JobSettings(master="local[2]", shuffle_partitions=2, metrics_port=0, ui_port=0,
                                        checkpoint_dir=str(tmp_path_factory.mktemp("unused-checkpoint"))))
    yield session
    session.stop()


@pytest.fixture
def job_settings(kafka_topics, tmp_path):
    """Factory: fresh topics and checkpoint -> JobSettings for one query."""

    def make(record_format: str = "message", shards: int = 4, checkpoint: str = "checkpoint",
             state_operator: str = "apply_in_pandas_with_state") -> JobSettings:
        topics = kafka_topics(partitions=PARTITIONS, record_format=record_format, shards=shards)
        # Everything that decides how input is cut into micro-batches is pinned, whatever the environment says.
        return JobSettings(**topics.model_dump(), checkpoint_dir=str(tmp_path / checkpoint), metrics_port=0,
                           starting_offsets="earliest", max_offsets_per_trigger=0, trigger_interval="0 seconds",
                           state_operator=state_operator)

    return make


# --- Kafka in and out --------------------------------------------------------------------------

def produce(bootstrap: str, records: list[tuple]) -> list:
    """Send (topic, key, value, timestamp_ms[, partition]) records in order; their RecordMetadata."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    try:
        futures = [producer.send(r[0], key=r[1], value=r[2], timestamp_ms=r[3],
                                 partition=r[4] if len(r) > 4 else None) for r in records]
        producer.flush()
        return [f.get(timeout=DEADLINE_SECONDS) for f in futures]
    finally:
        producer.close()



def order_results(records) -> list[tuple[bytes, OrderResult]]:
    """(key, OrderResult) of each rejection record: one unframed result, or a framed run."""
    found = []
    for record in records:
        payloads = [record.value] if len(record.value) == 55 else split_frames(record.value)
        found += [(record.key, decode_order_result(p)) for p in payloads]
    return found


def message_records(settings: JobSettings, messages, timestamp_ms) -> list[tuple]:
    """One record per message, keyed by its symbol (Kafka's partitioner picks the partition)."""
    return [(settings.nbbo_topic if isinstance(m, Nbbo) else settings.orders_topic, m.symbol.encode(), encode(m), t)
            for m, t in zip(messages, timestamp_ms)]


def framed_records(settings: JobSettings, messages, timestamp_ms) -> list[tuple]:
    """Consecutive messages of one topic, shard and timestamp framed into one record keyed by the shard."""
    shards = shard_of(np.array([m.symbol.encode().rjust(4) for m in messages], "S4"), settings.shards)
    runs: dict[tuple, list] = {}
    for m, t, shard in zip(messages, timestamp_ms, shards.tolist()):
        topic = settings.nbbo_topic if isinstance(m, Nbbo) else settings.orders_topic
        runs.setdefault((t, topic, shard), []).append(encode(m))
    return [(topic, shard_key(shard), frame_all(run), t, shard % PARTITIONS)
            for (t, topic, shard), run in runs.items()]


def expected_results(phases) -> list[OrderResult]:
    """The reference model over (message, timestamp_ms) phases, each applied to completion."""
    model, expected = ReferenceModel(), []
    for phase in phases:
        for message, timestamp in phase:
            if isinstance(message, Nbbo):
                model.on_nbbo(message)
            elif (result := model.on_order(message, timestamp * 1_000_000)) is not None:
                expected.append(result)
    return expected


def by_order_id(results) -> list[OrderResult]:
    return sorted(results, key=lambda r: r.order_id)


def run_phases(spark, settings: JobSettings, phases, build=message_records):
    """Start the query; produce each phase, then wait until the job has processed everything available."""
    query = start_query(spark, settings)
    for phase in phases:
        messages, timestamps = [m for m, _ in phase], [t for _, t in phase]
        produce(settings.bootstrap_servers, build(settings, messages, timestamps))
        query.processAllAvailable()
    return query


def wallaroo_file(wallaroo_data, name: str) -> list:
    return [decode(p) for p in split_frames((wallaroo_data / name).read_bytes())]


def timed(messages, start: int) -> list[tuple]:
    return [(m, start + i) for i, m in enumerate(messages)]


def test_the_session_keeps_state_in_sparks_in_memory_store_by_default_in_utc(spark):
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == HDFS_BACKED_PROVIDER
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sparkContext.master == "local[2]"


def test_the_session_interprets_its_few_rows_instead_of_generating_code_for_them(spark):
    """Per micro-batch, generating and compiling Java source costs more than the ~100 rows it would
    speed up (docs/benchmarks.md, tuning log): no whole-stage code generation in the plan, and the
    projections Spark builds at run time are its interpreted ones."""
    frame = spark.range(4).selectExpr("id * 2 AS doubled").where("doubled > 2")
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "WholeStageCodegen" not in plan and "*(" not in plan, plan
    assert [row.doubled for row in frame.collect()] == [4, 6]
    jvm = spark.sparkContext._jvm
    projection = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create(
        frame._jdf.queryExecution().executedPlan().schema())
    assert projection.getClass().getSimpleName() == "InterpretedUnsafeProjection"


def test_the_local_jvm_has_its_whole_heap_from_the_start_and_two_malloc_arenas(spark):
    """What keeps the job's RSS flat over hours (docs/benchmarks.md, "30 minutes at 250,000 msgs/s")."""
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-Xms1g" in arguments and "-Xmx1g" in arguments and "-XX:+AlwaysPreTouch" in arguments
    # Committed = maximum: the collector has nothing left to grow (less one survivor space).
    assert runtime.totalMemory() >= 0.8 * runtime.maxMemory()
    assert jvm.java.lang.System.getenv("MALLOC_ARENA_MAX") == "2"


def test_the_local_jvm_compiles_with_c1_alone_into_a_full_sized_code_cache(spark):
    """C1 alone would shrink the code cache to 48 MB, which the job fills within a minute; the
    sweeper then stalls micro-batches for seconds (docs/benchmarks.md, tuning log)."""
    jvm = spark.sparkContext._jvm
    diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert diagnostics.getVMOption("TieredStopAtLevel").getValue() == "1"
    assert int(diagnostics.getVMOption("ReservedCodeCacheSize").getValue()) >= 240 * 2**20


# Both ways of keeping the quote books (settings.state_operator); the default first.
STATE_OPERATORS = list(get_args(StateOperator))
PROVIDERS = {"apply_in_pandas_with_state": HDFS_BACKED_PROVIDER, "transform_with_state_in_pandas": ROCKSDB_PROVIDER}
OPERATOR_NAMES = {"apply_in_pandas_with_state": "applyInPandasWithState",
                  "transform_with_state_in_pandas": "transformWithStateInPandasExec"}


def assert_state_store(spark, progress: dict, state_operator: str) -> None:
    """The query ran its operator on the store that operator is meant for, not the session's default."""
    [operator] = progress["stateOperators"]
    assert operator["operatorName"] == OPERATOR_NAMES[state_operator]
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == PROVIDERS[state_operator]
    # Each store reports metrics of its own: RocksDB's latencies, the in-memory store's map cache.
    metrics = set(operator["customMetrics"])
    on_rocksdb = {"rocksdbLoadLatencyMs", "rocksdbPutCount"} <= metrics
    in_memory = {"loadedMapCacheHitCount", "loadedMapCacheMissCount"} <= metrics
    assert (on_rocksdb, in_memory) == ((True, False) if state_operator == "transform_with_state_in_pandas" else
                                       (False, True))


# --- (a) Wallaroo's own correctness scenario ---------------------------------------------------

REJECT_SYMBOLS = ["AA", "BAC", "AAPL", "FCX", "SUNE", "FB", "RAD", "INTC", "GE", "WMB"]
NO_REJECT_SYMBOLS = ["S", "ATML", "YHOO", "F", "T", "MU", "PFE", "CSCO", "MEG", "HUN"]
GEN_TIME = "2017-06-01 12:00:00.1"  # gen.py wrote str(datetime.now())[:-5]: 21 characters


def wallaroo_correctness_streams(rng: random.Random):
    """examples/*/market_spread/_test/gen.py: its NBBO, its orders and the results it expected."""
    quotes = {False: {}, True: {}}
    market = []
    for reject, symbols in ((False, NO_REJECT_SYMBOLS), (True, REJECT_SYMBOLS)):
        for _ in range(1000):
            symbol = rng.choice(symbols)
            offer = 1000 + 1 if reject else 1000 + rng.random() * 0.05
            quotes[reject][symbol] = (1000.0, float(offer))
            market.append(Nbbo(symbol, 1000.0, float(offer), GEN_TIME))
    orders, expected = [], set()
    for reject in (False, True):
        for _ in range(1000):
            symbol = rng.choice(sorted(quotes[reject]))
            order = Order(rng.choice([Side.BUY, Side.SELL]), rng.randint(1, 10), f"{len(orders) + 1:06d}", symbol,
                          1000.0, 10.0, GEN_TIME)
            orders.append(order)
            if reject:
                expected.add(OrderResult.of(order, *quotes[True][symbol], timestamp=0).identity())
    return market, orders, expected


@pytest.mark.parametrize("state_operator", STATE_OPERATORS)
def test_wallaroos_correctness_scenario_gives_exactly_the_expected_rejections(spark, job_settings, state_operator):
    market, orders, expected = wallaroo_correctness_streams(random.Random(2017))
    phases = [timed(market, T0), timed(orders, T0 + 10_000)]
    assert {r.identity() for r in expected_results(phases)} == expected and len(expected) == 1000
    settings = job_settings(state_operator=state_operator)
    query = run_phases(spark, settings, phases)
    progress = query.lastProgress
    query.stop()
    assert_state_store(spark, progress, state_operator)

    received = order_results(read_topic(settings.bootstrap_servers, settings.rejections_topic))
    assert {r.identity() for _, r in received} == expected
    assert all(key == r.symbol.encode() for key, r in received)
    assert read_topic(settings.bootstrap_servers, settings.dead_letter_topic) == []


# --- (b) the 350-symbol initial NBBO file, then the historical orders --------------------------

def test_the_350_symbol_initial_nbbo_then_the_historical_orders_give_the_reference_rejections(
        spark, job_settings, wallaroo_data):
    initial = wallaroo_file(wallaroo_data, "350-symbols_initial-nbbo-fixish.msg")
    trades = wallaroo_file(wallaroo_data, "historical/1000trades-fixish.msg")
    phases = [timed(initial, T0), timed(trades, T0 + 1_000)]
    expected = expected_results(phases)
    # The 15 rejecting symbols and the symbols the file never quotes (rejected at 0.0/0.0).
    assert len(expected) == sum(1 for t in trades if t.symbol not in {n.symbol for n in initial[15:]})
    assert {(r.bid, r.offer) for r in expected if r.symbol not in {n.symbol for n in initial}} == {(0.0, 0.0)}
    settings = job_settings()
    run_phases(spark, settings, phases).stop()

    received = order_results(read_topic(settings.bootstrap_servers, settings.rejections_topic))
    assert by_order_id(r for _, r in received) == by_order_id(expected)
    assert all(key == r.symbol.encode() for key, r in received)
    assert read_topic(settings.bootstrap_servers, settings.dead_letter_topic) == []


# --- (c) both record formats -------------------------------------------------------------------

TRICKY_SYMBOLS = ["F", "NI", "TGT", "GOOG", "BF.B", "B.A", "A.B.", "Z"]
TRICKY_QUOTES = [(10.0, 10.01), (10.0, 10.5), (0.50, 0.53), (0.0, 0.0), (10.0, 9.0), (10.0, 10.05),
                 (100.0, 100.05), (-0.05, 0.0), (1000.0, 1000.0), (19.65, 19.7125)]


def tricky_stream(rng: random.Random) -> tuple[list, list]:
    """Interleaved NBBO and orders, ticks sharing timestamps, symbols flipping; then orders for all."""
    first, ids = [], iter(range(10**5))
    for tick in range(40):
        timestamp = T0 + 10 * tick
        nbbos = [Nbbo(rng.choice(TRICKY_SYMBOLS), *rng.choice(TRICKY_QUOTES)) for _ in range(rng.randint(0, 4))]
        orders = [Order(rng.choice([Side.BUY, Side.SELL]), rng.randint(1, 300), f"A{next(ids):05d}",
                        rng.choice(TRICKY_SYMBOLS), float(rng.randint(10, 650)), 10.0)
                  for _ in range(rng.randint(0, 4))]
        # Within one timestamp the job applies NBBO first: so does the expectation.
        first += [(m, timestamp) for m in nbbos + orders]
    then = [(Order(Side.SELL, 7, f"B{i:05d}", symbol, 1.0, 1.0), T0 + 1_000 + i)
            for i, symbol in enumerate(TRICKY_SYMBOLS + ["NEW", "N.W"])]
    return first, then


def test_message_and_framed_records_give_identical_rejections(spark, job_settings):
    first, then = tricky_stream(random.Random(4))
    ids = [m.order_id for m, _ in first + then if isinstance(m, Order)]
    assert len(ids) == len(set(ids))
    expected = expected_results([first, then])
    assert {should_reject(*q) for q in TRICKY_QUOTES} == {True, False}
    received = {}
    for record_format, build in (("message", message_records), ("framed", framed_records)):
        settings = job_settings(record_format=record_format, checkpoint=f"checkpoint-{record_format}")
        # The first phase is on the topics before the query starts: one micro-batch, sorted by the job.
        produce(settings.bootstrap_servers, build(settings, [m for m, _ in first], [t for _, t in first]))
        run_phases(spark, settings, [[], then], build=build).stop()
        records = read_topic(settings.bootstrap_servers, settings.rejections_topic)
        received[record_format] = order_results(records)
        if record_format == "framed":
            shards = shard_of(np.array([r.symbol.encode().rjust(4) for _, r in received["framed"]], "S4"),
                              settings.shards)
            assert [key for key, _ in received["framed"]] == [shard_key(s) for s in shards.tolist()]
        assert read_topic(settings.bootstrap_servers, settings.dead_letter_topic) == []
    assert by_order_id(r for _, r in received["message"]) == by_order_id(r for _, r in received["framed"]) \
        == by_order_id(expected)


# --- (d) bad records go to the dead-letter topic -----------------------------------------------

TIME = "20160902-15:47:52.000"
REJECTING_NI = encode(Nbbo("NI", 10.0, 10.5, TIME))
HEADERS = ["marketspread.reason", "marketspread.detail", "marketspread.source.topic",
           "marketspread.source.partition", "marketspread.source.offset", "marketspread.source.byte-offset"]


def ni_order(n: int) -> bytes:
    return encode(Order(Side.BUY, 1, f"{n:06d}", "NI", 100.0, 10.0, TIME))


def patched(payload: bytes, offset: int, raw: bytes) -> bytes:
    return payload[:offset] + raw + payload[offset + len(raw):]


# One bad message per way of being bad, with the topic it is sent to (every Reason but the
# framing ones, which need framed records).
BAD = [
    ("nbbo", patched(REJECTING_NI, 0, b"\x07"), "unknown-type"),
    ("nbbo", REJECTING_NI[:-1], "bad-length"),
    ("nbbo", patched(REJECTING_NI, 1, b"  N\xc9"), "bad-symbol"),      # non-ASCII
    ("nbbo", patched(REJECTING_NI, 1, b"    "), "bad-symbol"),         # blank
    ("nbbo", patched(REJECTING_NI, 1, b"NI  "), "bad-symbol"),         # right-padded
    ("nbbo", patched(REJECTING_NI, 26, b"\x7f\xf8" + bytes(6)), "bad-number"),  # NaN bid
    ("nbbo", patched(REJECTING_NI, 5, b"\xff"), "bad-time"),
    ("orders", patched(ni_order(0), 1, b"\x09"), "bad-side"),
    ("orders", patched(ni_order(0), 24, b"\x7f\xf0" + bytes(6)), "bad-number"),  # inf price
    ("orders", patched(ni_order(0), 6, b"\xe9"), "bad-order-id"),
    ("orders", ni_order(0) + b"\x00", "bad-length"),
    ("orders", b"", "empty"),
]


def codec_detail(payload: bytes | None, framed_record: bool = False) -> str:
    if not payload:
        return "empty record"
    try:
        if framed_record:
            split_frames(payload)
        else:
            decode(payload)
    except FixishError as error:
        return error.detail
    raise AssertionError(f"{payload!r} decodes")


def dead_letter_view(record) -> tuple:
    headers = dict(record.headers)
    assert [name for name, _ in record.headers] == HEADERS
    return (headers["marketspread.source.topic"].decode(), int(headers["marketspread.source.partition"]),
            int(headers["marketspread.source.offset"]), int(headers["marketspread.source.byte-offset"]),
            headers["marketspread.reason"].decode(), headers["marketspread.detail"].decode(), record.key,
            record.value)


def test_bad_message_records_are_dead_lettered_with_their_source_and_the_rest_is_processed(spark, job_settings):
    settings = job_settings()
    topic = {"nbbo": settings.nbbo_topic, "orders": settings.orders_topic}
    records = [(settings.nbbo_topic, b"NI", REJECTING_NI, T0)]
    bad, valid_orders = [], {}  # (record index, reason); order id -> timestamp
    for i, (kind, payload, reason) in enumerate(BAD + [("orders", None, "empty")]):  # None: a null value
        bad.append((len(records), reason))
        records.append((topic[kind], b"NI", payload, T0 + 10 * i + 1))
        valid_orders[f"{i:06d}"] = T0 + 10 * i + 2
        records.append((settings.orders_topic, b"NI", ni_order(i), T0 + 10 * i + 2))
    sent = produce(settings.bootstrap_servers, records)
    query = start_query(spark, settings)
    query.processAllAvailable()
    query.stop()

    expected = sorted((sent[i].topic, sent[i].partition, sent[i].offset, 0, reason, codec_detail(records[i][2]),
                       b"NI", records[i][2] or b"") for i, reason in bad)
    received = [dead_letter_view(r) for r in read_topic(settings.bootstrap_servers, settings.dead_letter_topic)]
    assert sorted(received) == expected
    assert len(received) == 13
    # Every valid order around the bad records was judged by the valid NBBO: rejected at 10.0/10.5.
    results = [r for _, r in order_results(read_topic(settings.bootstrap_servers, settings.rejections_topic))]
    assert by_order_id(results) == [OrderResult(Side.BUY, 1, order_id, "NI", 100.0, 10.0, 10.0, 10.5, ts * 1_000_000)
                                    for order_id, ts in sorted(valid_orders.items())]


def test_bad_frames_and_bad_framed_records_are_dead_lettered_with_their_byte_offsets(spark, job_settings):
    settings = job_settings(record_format="framed", shards=4)
    shard = int(shard_of(np.array([b"  NI"]), settings.shards)[0])
    key, partition = shard_key(shard), shard % PARTITIONS
    topic = {"nbbo": settings.nbbo_topic, "orders": settings.orders_topic}
    records = [(settings.nbbo_topic, key, frame(REJECTING_NI), T0, partition)]
    bad, valid_orders = [], {}  # (record index, byte offset, reason, detail, bytes); order id -> timestamp
    for i, (kind, payload, reason) in enumerate(BAD):
        # A bad frame between two good ones: NBBO around a bad NBBO, orders around a bad order.
        timestamp = T0 + 10 * i + 1
        if kind == "nbbo":
            before = after = REJECTING_NI
        else:
            before, after = ni_order(2 * i), ni_order(2 * i + 1)
            valid_orders.update({f"{2 * i:06d}": timestamp, f"{2 * i + 1:06d}": timestamp})
        detail = "empty message" if payload == b"" else codec_detail(payload)
        bad.append((len(records), 4 + len(before), reason, detail, payload))
        records.append((topic[kind], key, frame(before) + frame(payload) + frame(after), timestamp, partition))
    # Whole records: a valid order then a truncated frame; an empty value; a null value.
    tail = frame(ni_order(90))[:30]
    valid_orders["000089"] = T0 + 1_000
    for j, (value, to, offset, reason, data) in enumerate([
            (frame(ni_order(89)) + tail, "orders", 57, "truncated-frame", tail),
            (b"", "orders", 0, "empty", b""),
            (None, "nbbo", 0, "empty", b"")]):
        bad.append((len(records), offset, reason, codec_detail(value, framed_record=True), data))
        records.append((topic[to], key, value, T0 + 1_000 + j, partition))
    sent = produce(settings.bootstrap_servers, records)
    query = start_query(spark, settings)
    query.processAllAvailable()
    query.stop()

    expected = sorted((sent[i].topic, sent[i].partition, sent[i].offset, offset, reason, detail, key, data)
                      for i, offset, reason, detail, data in bad)
    received = [dead_letter_view(r) for r in read_topic(settings.bootstrap_servers, settings.dead_letter_topic)]
    assert sorted(received) == expected
    assert Counter(r[4] for r in received) == Counter(
        {"bad-symbol": 3, "bad-number": 2, "bad-length": 2, "empty": 3, "unknown-type": 1, "bad-time": 1,
         "bad-side": 1, "bad-order-id": 1, "truncated-frame": 1})
    # Every valid order in those records was processed: rejected at 10.0/10.5, one framed run per batch and key.
    rejection_records = read_topic(settings.bootstrap_servers, settings.rejections_topic)
    assert {r.key for r in rejection_records} == {key}
    results = [r for _, r in order_results(rejection_records)]
    assert by_order_id(results) == [OrderResult(Side.BUY, 1, order_id, "NI", 100.0, 10.0, 10.0, 10.5, ts * 1_000_000)
                                    for order_id, ts in sorted(valid_orders.items())]
    assert len(results) == 11


# --- (e) restart from the same checkpoint ------------------------------------------------------

@pytest.mark.parametrize("state_operator", STATE_OPERATORS)
def test_a_restart_from_the_same_checkpoint_keeps_the_quotes_and_loses_nothing(spark, job_settings, wallaroo_data,
                                                                                 state_operator):
    initial = wallaroo_file(wallaroo_data, "350-symbols_initial-nbbo-fixish.msg")
    trades = wallaroo_file(wallaroo_data, "historical/1000trades-fixish.msg")
    quoted = {n.symbol: n for n in initial}
    # While the job is down: MYGN stops rejecting; OLN, GLW and CRC start. TGT keeps its first quote.
    flips = [Nbbo("MYGN", quoted["MYGN"].bid_px, quoted["MYGN"].bid_px + 0.01)] + \
        [Nbbo(s, quoted[s].bid_px, quoted[s].bid_px + 1.0) for s in ("OLN", "GLW", "CRC")]
    phases = [timed(initial, T0), timed(trades[:500], T0 + 1_000), timed(flips, T0 + 2_000),
              timed(trades[500:], T0 + 3_000)]
    expected = expected_results(phases)
    late = [r for r in expected if r.order_id in {t.order_id for t in trades[500:]}]
    # What the second query must get right: quotes from before the restart and from during it.
    assert {"TGT", "OLN", "GLW", "CRC"} <= {r.symbol for r in late} and "MYGN" not in {r.symbol for r in late}
    assert [(r.bid, r.offer) for r in late if r.symbol == "TGT"] == [(quoted["TGT"].bid_px, quoted["TGT"].offer_px)]
    settings = job_settings(state_operator=state_operator)

    first = run_phases(spark, settings, phases[:2])
    first_batches = [p.batchId for p in first.recentProgress if p.numInputRows]
    first.stop()
    produce(settings.bootstrap_servers, message_records(settings, flips, [t for _, t in phases[2]]))
    second = run_phases(spark, settings, [[], phases[3]])
    second_progress = [p for p in second.recentProgress if p.numInputRows]
    second.stop()

    assert second.id == first.id and second.runId != first.runId
    assert min(p.batchId for p in second_progress) == max(first_batches) + 1
    assert sum(p.numInputRows for p in second_progress) == len(flips) + 500
    received = [r for _, r in order_results(read_topic(settings.bootstrap_servers, settings.rejections_topic))]
    # At-least-once: a result may come twice, identical; after dedupe by order id it is exact.
    first_seen: dict[str, OrderResult] = {}
    for r in received:
        assert first_seen.setdefault(r.order_id, r) == r
    assert by_order_id(first_seen.values()) == by_order_id(expected)


# --- (f) the job's metrics ---------------------------------------------------------------------

def sample(registry: CollectorRegistry, name: str, **labels) -> float | None:
    return registry.get_sample_value(name, labels)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_progress_poller_counts_rows_messages_rejections_dead_letters_and_committed_offsets(
        spark, job_settings):
    registry = CollectorRegistry()
    settings = job_settings()
    symbols = ["A", "BB", "CCC", "DDDD", "E.E"]
    quotes = [Nbbo(s, 10.0, 10.01 if i % 2 else 11.0, TIME) for i, s in enumerate(symbols)]
    orders = [Order(Side.SELL, 2, f"M{i:05d}", symbols[i % 5], 1.0, 10.0, TIME) for i in range(30)] + \
        [Order(Side.BUY, 2, "M99999", "NEW", 1.0, 10.0, TIME)]
    phases = [timed(quotes, T0), timed(orders, T0 + 100)]
    expected = expected_results(phases)
    bad = [(settings.nbbo_topic, b"A", b"\x02junk", T0 + 50), (settings.orders_topic, b"A", None, T0 + 51),
           (settings.orders_topic, b"BB", b"", T0 + 52)]
    produce(settings.bootstrap_servers, bad)
    query = run_phases(spark, settings, phases)
    poller = ProgressPoller(query, JobMetrics(registry))
    inputs = end_offsets(settings.bootstrap_servers, [settings.nbbo_topic, settings.orders_topic])
    assert sum(inputs.values()) == len(quotes) + len(orders) + len(bad)
    # State is kept per shard of symbols: as many state rows as shards the keys fall into.
    keys = spark.createDataFrame([(k,) for k in symbols + ["NEW"]], "key string")
    shards = keys.select(state_key(settings).alias("shard")).distinct().count()

    def committed() -> dict:
        return {(t, p): sample(registry, "marketspread_job_committed_offset", topic=t, partition=str(p))
                for t, p in inputs}

    def polled() -> bool:
        poller.poll()
        return committed() == inputs

    wait_for(polled, "the committed offsets to reach the topics' end offsets")
    batches = query.recentProgress
    assert sample(registry, "marketspread_job_state_rows") == shards
    assert sample(registry, "marketspread_job_input_rows_total") == len(quotes) + len(orders) + len(bad)
    assert sample(registry, "marketspread_job_input_messages_total") == len(quotes) + len(orders)
    assert sample(registry, "marketspread_job_rejections_total") == len(expected) == 3 * 6 + 1
    assert sample(registry, "marketspread_job_dead_letters_total") == len(bad)
    assert sample(registry, "marketspread_job_batches_total") == len(batches)
    assert sample(registry, "marketspread_job_batch_duration_seconds_count") == len(batches)
    assert sample(registry, "marketspread_job_query_active") == 1
    query.stop()
    poller.poll()
    assert sample(registry, "marketspread_job_query_active") == 0
    # Polling again finds nothing new: every batch was counted exactly once.
    assert sample(registry, "marketspread_job_batches_total") == len(batches)
    assert len(read_topic(settings.bootstrap_servers, settings.rejections_topic)) == len(expected)
    assert len(read_topic(settings.bootstrap_servers, settings.dead_letter_topic)) == len(bad)


# --- (g) a checkpoint keeps its state operator -------------------------------------------------

@pytest.mark.parametrize("written_by, read_by", [STATE_OPERATORS, STATE_OPERATORS[::-1]])
def test_a_checkpoint_refuses_the_other_state_operator_instead_of_misreading_its_state(
        spark, job_settings, written_by, read_by):
    """state_operator is fixed for the life of a checkpoint (an upgrade that changes it must start a
    new one): the query fails at its first batch, naming the mismatch, and writes nothing."""
    market = timed([Nbbo("NI", 10.0, 10.5)], T0)
    settings = job_settings(state_operator=written_by)
    run_phases(spark, settings, [market]).stop()
    switched = settings.model_copy(update={"state_operator": read_by})
    query = start_query(spark, switched)
    produce(settings.bootstrap_servers, message_records(settings, [Order(Side.BUY, 1, "000001", "NI", 1.0, 1.0)],
                                                        [T0 + 1]))
    with pytest.raises(StreamingQueryException, match="STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"):
        query.processAllAvailable()
    query.stop()
    assert read_topic(settings.bootstrap_servers, settings.rejections_topic) == []
    # The job's own error says which setting to change (app.JobFailed).
    assert "set state_operator to the one it was written with" in failure_message(str(query.exception()), switched)
