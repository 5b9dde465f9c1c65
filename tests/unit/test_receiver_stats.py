"""The receiver's bookkeeping: duplicates by order id, exact latency percentiles, histogram buckets, stats."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from marketspread.fixish import ORDER_RESULT, OrderResult, Side, encode_order_result, frame_all
from marketspread.metrics import LATENCY_BUCKETS, parse
from marketspread.receiver import latency as latency_module
from marketspread.receiver.latency import LatencyRecorder, percentiles_ms
from marketspread.receiver.metrics import ReceiverMetrics
from marketspread.receiver.tally import Tally

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def results(*orders: tuple[str, int]) -> np.ndarray:
    """Framed OrderResult wire records for (order id, intended ns) pairs."""
    payloads = [encode_order_result(OrderResult(Side.BUY, 7, order_id, "NI", 100.0, 10.0, 9.0, 9.5, ts))
                for order_id, ts in orders]
    return np.frombuffer(frame_all(payloads), dtype=ORDER_RESULT.framed_dtype)


def test_percentiles_are_nearest_rank_values_in_ms():
    values = np.arange(1, 1001, dtype=np.int64) * MS  # 1 ms .. 1000 ms
    assert percentiles_ms(values) == {"count": 1000, "p50": 500.0, "p90": 900.0, "p99": 990.0, "p999": 999.0,
                                      "max": 1000.0}


def test_percentiles_of_a_few_values_round_the_rank_up():
    values = np.array([30, 10, 20], dtype=np.int64) * MS
    assert percentiles_ms(values) == {"count": 3, "p50": 20.0, "p90": 30.0, "p99": 30.0, "p999": 30.0, "max": 30.0}
    assert percentiles_ms(np.array([7 * MS])) == {"count": 1, "p50": 7.0, "p90": 7.0, "p99": 7.0, "p999": 7.0,
                                                  "max": 7.0}


def test_percentiles_of_nothing_are_none():
    assert percentiles_ms(np.empty(0, np.int64)) == {"count": 0, "p50": None, "p90": None, "p99": None,
                                                     "p999": None, "max": None}


def test_histogram_buckets_count_values_up_to_and_including_each_edge():
    recorder = LatencyRecorder()
    edge = round(LATENCY_BUCKETS[10] * 1e9)
    recorder.record(np.array([edge, edge + 1, 0, 10**12], dtype=np.int64))
    buckets = dict(recorder.cumulative_buckets())
    assert buckets[LATENCY_BUCKETS[0]] == 1  # the zero
    assert buckets[LATENCY_BUCKETS[9]] == 1
    assert buckets[LATENCY_BUCKETS[10]] == 2  # "le" includes the edge itself
    assert buckets[LATENCY_BUCKETS[11]] == 3
    assert buckets[LATENCY_BUCKETS[-1]] == 3  # 1000 s is beyond the last bucket
    assert buckets[float("inf")] == 4
    assert recorder.count == 4
    assert recorder.sum_ns == 2 * edge + 1 + 10**12


def test_values_are_kept_exactly_across_chunk_boundaries(monkeypatch):
    monkeypatch.setattr(latency_module, "_CHUNK", 4)
    recorder = LatencyRecorder()
    for batch in ([1, 2, 3], [4, 5, 6, 7, 8, 9], [], [10]):
        recorder.record(np.array(batch, dtype=np.int64))
    assert recorder.values().tolist() == list(range(1, 11))
    assert recorder.max_ns == 10


def test_a_repeated_order_id_is_a_duplicate_within_a_poll_and_across_polls():
    tally = Tally()
    first = tally.add_results(results(("AAAAAA", T0), ("BBBBBB", T0), ("AAAAAA", T0)), T0 + 5 * MS)
    assert first.tolist() == [True, True, False]
    first = tally.add_results(results(("BBBBBB", T0), ("CCCCCC", T0)), T0 + 7 * MS)
    assert first.tolist() == [False, True]
    assert (tally.received, tally.unique, tally.duplicates) == (5, 3, 2)


def test_latency_is_receive_time_minus_intended_time_for_each_orders_first_result_only():
    tally = Tally()
    tally.add_results(results(("AAAAAA", T0), ("BBBBBB", T0 + 2 * MS)), T0 + 10 * MS)
    tally.add_results(results(("AAAAAA", T0)), T0 + 500 * MS)  # a replay: counted, not timed
    assert tally.latency.values().tolist() == [10 * MS, 8 * MS]
    assert tally.last_receive_ns == T0 + 500 * MS


def test_per_result_receive_times_are_used_when_given():
    tally = Tally()
    tally.add_results(results(("AAAAAA", T0), ("BBBBBB", T0)), np.array([T0 + MS, T0 + 3 * MS]))
    assert tally.latency.values().tolist() == [MS, 3 * MS]


def test_the_snapshot_is_what_stats_json_holds():
    tally = Tally()
    tally.add_results(results(("AAAAAA", T0), ("AAAAAA", T0)), T0 + 4 * MS)
    tally.add_dead_letter("bad-side", "orders")
    tally.add_dead_letter("bad-side", "nbbo")
    tally.add_dead_letter("empty", "orders")
    tally.add_dead_letter(None, None)
    tally.add_malformed(2)
    tally.consumed("rejections", 1, 12)
    tally.consumed("rejections", 0, 3)
    tally.consumed("dead-letters", 0, 4)
    stats = tally.snapshot().to_json()
    assert stats["received"] == 2 and stats["unique"] == 1 and stats["duplicates"] == 1
    assert stats["latency_ms"] == {"count": 1, "p50": 4.0, "p90": 4.0, "p99": 4.0, "p999": 4.0, "max": 4.0}
    assert stats["dead_letters"] == {"bad-side": 2, "empty": 1, "unknown": 1}
    assert stats["dead_letters_by_source_topic"] == {"nbbo": 1, "orders": 2, "unknown": 1}
    assert stats["dead_letters_total"] == 4
    assert stats["malformed"] == 2
    assert stats["consumed_offsets"] == {"dead-letters": {"0": 4}, "rejections": {"0": 3, "1": 12}}
    assert stats["last_receive_time"] == pytest.approx((T0 + 4 * MS) / 1e9)


def test_the_metrics_read_the_same_numbers_from_the_tally():
    tally = Tally()
    registry = CollectorRegistry()
    ReceiverMetrics(tally, registry)
    tally.add_results(results(("AAAAAA", T0), ("AAAAAA", T0), ("BBBBBB", T0)), T0 + 3 * MS)
    tally.add_dead_letter("bad-length", "nbbo")
    tally.add_malformed()
    tally.consumed("rejections", 0, 3)
    from prometheus_client import generate_latest

    samples = parse(generate_latest(registry).decode())
    assert samples.value("marketspread_receiver_rejections_total") == 3
    assert samples.value("marketspread_receiver_duplicates_total") == 1
    assert samples.value("marketspread_receiver_malformed_total") == 1
    assert samples.value("marketspread_receiver_dead_letters_total", reason="bad-length", source_topic="nbbo") == 1
    assert samples.value("marketspread_receiver_consumed_offset", topic="rejections", partition="0") == 3
    assert samples.value("marketspread_receiver_latency_seconds_count") == 2
    assert samples.value("marketspread_receiver_latency_seconds_sum") == pytest.approx(0.006)
    assert samples.value("marketspread_receiver_latency_seconds_bucket", le="+Inf") == 2
    buckets = {float(dict(labels)["le"]): v for (name, labels), v in samples.items()
               if name == "marketspread_receiver_latency_seconds_bucket"}
    assert sorted(buckets) == sorted((*LATENCY_BUCKETS, float("inf")))
    # Both latencies (3 ms) fall in every bucket from the first edge at or above 3 ms.
    assert buckets == {le: (2 if le >= 0.003 else 0) for le in buckets}
    assert samples.value("marketspread_receiver_last_receive_timestamp_seconds") == pytest.approx((T0 + 3 * MS) / 1e9)
