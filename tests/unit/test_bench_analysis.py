"""A step's samples and outputs -> its result; the reference expectation for generated streams."""

from __future__ import annotations

import numpy as np
import pytest

from marketspread.bench.analysis import (
    Outputs, Sample, StepData, first_arrivals, memory_trend, probe_outputs_in_window, receiver_outputs_in_window,
    summarize,
)
from marketspread.bench.expected import Expected, StreamPart, expected_rejections
from marketspread.bench.peers.probe import PROBE_DTYPE
from marketspread.fixish import ORDER_RESULT, OrderResult, Side, decode, encode_order_result, frame_all, split_frames
from marketspread.generate import generate_nbbo, generate_orders, initial_nbbo, load_symbol_set, stream_rngs
from marketspread.reference import ReferenceModel

T0 = 1_800_000_000.0
NS = 1_000_000_000


def wire(*results: tuple[str, float, float, int]) -> np.ndarray:
    payloads = [encode_order_result(OrderResult(Side.BUY, 1, oid, "NI", 10.0, 9.0, bid, offer, ts))
                for oid, bid, offer, ts in results]
    return np.frombuffer(frame_all(payloads), dtype=ORDER_RESULT.framed_dtype)


def samples(rate: float, capacity: float, seconds: float, start: float = T0, dt: float = 0.5) -> list[Sample]:
    """A system fed `rate` msgs/s for `seconds` that processes at most `capacity`, continuously."""
    out = []
    for t in np.arange(start - 2, start + seconds + 3, dt):
        elapsed = min(max(t - start, 0.0), seconds)
        sent = rate * elapsed
        processed = min(sent, capacity * max(t - start, 0.0))
        out.append(Sample(t=float(t), sent=sent, sent_records=sent, behind=0.0, end_records=int(sent),
                          processed_records=int(processed), processed_messages=processed, output=0.0,
                          cpu={"plain": 0.6 * max(t - start, 0.0)}, rss={"plain": 50 << 20},
                          pss={"plain": 40 << 20}, load=1.5))
    return out


def step(rate: float, capacity: float, seconds: float = 30.0, latencies_ms=(10, 20, 30), lost=0,
         received_at: float = 20.0) -> StepData:
    """`received_at`: seconds into the load when the results arrive (after the warm-up quarter by default)."""
    latency = np.array(latencies_ms, dtype=np.int64) * 1_000_000
    outputs = Outputs(latency, None, np.full(len(latency), int((T0 + received_at) * NS)),
                      expected=len(latency) + lost, received=len(latency), lost=lost)
    half = int(rate * seconds / 2)
    return StepData("step01", "plain", "message", "350", 0.01, rate, seconds, T0, T0 + seconds + 1,
                    samples(rate, capacity, seconds), True, 1.0, outputs, {"nbbo": half, "orders": half}, 100, 1,
                    {"plain": 60 << 20})


def test_a_system_that_keeps_up_is_sustained():
    result = summarize(step(10_000, 50_000))
    assert result["offered_msgs_per_s"] == pytest.approx(10_000, rel=0.01)
    assert result["sustained_msgs_per_s"] == pytest.approx(10_000, rel=0.02)
    assert not result["lag_growing"] and result["verdict"] == {"sustainable": True, "reason": "sustained",
                                                                 "limit": None}
    assert result["latency_ms"]["p50"] == 20.0 and result["latency_ms"]["count"] == 3
    assert result["resources"]["plain"]["cpu_percent"] == pytest.approx(60, abs=3)
    assert result["resources"]["plain"]["peak_rss_mb"] == 60.0
    assert len(result["series"]["t"]) == len(result["series"]["lag_messages"]) == len(result["series"]["memory_mb"])
    assert result["memory"] == {"after_warmup_mb": 40.0, "at_end_mb": 40.0, "max_mb": 40.0, "drift_mb_per_min": 0.0}


MINUTES = np.arange(0, 30 * 60, 0.5)  # a 30-minute step, sampled every half second


def test_memory_that_settles_after_warming_up_has_no_drift():
    # Grows by 400 MB in the first five minutes (the heap, the JIT's code), then stays within a few MB.
    memory = (1_200 + 400 * np.minimum(MINUTES / 300, 1.0) + 3 * np.sin(MINUTES / 7)) * 2**20
    trend = memory_trend(T0 + MINUTES, memory, since=T0 + 7.5 * 60, end=T0 + MINUTES[-1])
    assert trend["after_warmup_mb"] == pytest.approx(1_600, abs=4) and trend["max_mb"] == pytest.approx(1_603, abs=1)
    assert abs(trend["drift_mb_per_min"]) < 0.5


def test_memory_that_keeps_creeping_up_shows_its_drift_per_minute():
    memory = (1_200 + 6 * MINUTES / 60) * 2**20  # 6 MB a minute, all the way
    trend = memory_trend(T0 + MINUTES, memory, since=T0 + 7.5 * 60, end=T0 + MINUTES[-1])
    assert trend["drift_mb_per_min"] == pytest.approx(6.0, rel=0.01)
    assert trend["at_end_mb"] - trend["after_warmup_mb"] == pytest.approx(6 * 22.5, rel=0.01)


def test_without_memory_samples_the_trend_says_unknown_rather_than_zero():
    trend = memory_trend(T0 + MINUTES[:3], np.full(3, np.nan), since=T0, end=T0 + 10)
    assert trend == {"after_warmup_mb": None, "at_end_mb": None, "max_mb": None, "drift_mb_per_min": None}


def test_latency_is_measured_after_the_warm_up_quarter_and_also_reported_with_it():
    result = summarize(step(10_000, 50_000, received_at=2.0))
    assert result["latency_ms"]["count"] == 0 and result["latency_ms"]["p50"] is None
    assert result["latency_ms_including_warmup"]["count"] == 3
    assert result["latency_ms_including_warmup"]["p50"] == 20.0


def test_an_overloaded_system_has_growing_lag_and_is_not_sustained():
    result = summarize(step(100_000, 60_000))
    assert result["sustained_msgs_per_s"] == pytest.approx(60_000, rel=0.02)
    assert result["lag_growing"] and not result["verdict"]["sustainable"]
    assert result["lag"]["trend"]["relative_slope"] == pytest.approx(0.4, abs=0.05)


def test_a_loss_fails_the_step():
    result = summarize(step(10_000, 50_000, lost=2))
    assert result["lost"] == 2 and "lost" in result["verdict"]["reason"]


def test_receiver_outputs_keep_the_steps_window_first_arrivals_and_count_loss():
    start = T0
    ns = int(start * NS)
    results = wire(("AAAAAA", 1.0, 2.0, ns + 5 * NS), ("BBBBBB", 1.0, 2.0, ns + 6 * NS),
                   ("AAAAAA", 1.0, 2.0, ns + 5 * NS),  # a duplicate
                   ("CCCCCC", 3.0, 4.0, ns + 7 * NS),  # a wrong quote
                   ("OLDOLD", 1.0, 2.0, ns - 60 * NS),  # a previous step's
                   ("ZZZZZZ", 1.0, 2.0, ns + 8 * NS))  # not expected
    receive = np.array([ns + 5 * NS + 100, ns + 6 * NS + 200, ns + 9 * NS, ns + 7 * NS + 300, ns, ns + 9 * NS])
    expected = Expected(True, np.array([b"AAAAAA", b"BBBBBB", b"CCCCCC", b"DDDDDD"], dtype="S6"),
                        np.array([1.0, 1.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0, 2.0]), 1000)
    out = receiver_outputs_in_window(results, receive, start, 30.0, expected)
    assert out.received == 4 and out.duplicates == 1
    assert out.lost == 1 and out.unexpected == 1 and out.quote_mismatches == 1
    assert sorted(out.latency_ns.tolist()) == [100, 200, 300, NS]


def test_probe_outputs_weight_records_by_their_messages():
    ns = int(T0 * 1e3)
    rows = np.array([(int(T0 * NS) + 20_000_000, ns, 10), (int(T0 * NS) + 50_000_000, ns, 30),
                     (int(T0 * NS), ns - 120_000, 5)], dtype=PROBE_DTYPE)
    out = probe_outputs_in_window(rows, T0, 10.0, orders_sent=45)
    assert out.received == 40 and out.lost == 5 and out.weights.tolist() == [10, 30]
    assert out.latency_ns.tolist() == [20_000_000, 50_000_000]


def test_first_arrivals():
    assert first_arrivals(np.array([b"A", b"B", b"A", b"C", b"B"])).tolist() == [True, True, False, True, False]


@pytest.mark.parametrize("reject_ratio", [0.01, 0.2])
def test_the_expectation_is_the_reference_models_for_the_generated_streams(wallaroo_data, reject_ratio):
    parts = [StreamPart(seed=7, nbbo=3_000, orders=4_000), StreamPart(seed=8, nbbo=500, orders=1_000)]
    expected = expected_rejections("350", reject_ratio, parts)
    symbol_set = load_symbol_set("350", wallaroo_data)
    model_results = []
    for part in parts:
        nbbo_rng, orders_rng = stream_rngs(part.seed)
        model = ReferenceModel()
        model.feed(decode(p) for p in split_frames(initial_nbbo(symbol_set)))
        nbbo = [decode(p) for p in split_frames(generate_nbbo(symbol_set, part.nbbo, nbbo_rng).tobytes())]
        orders = [decode(p) for p in split_frames(generate_orders(symbol_set, part.orders, orders_rng,
                                                                  reject_ratio=reject_ratio).tobytes())]
        model.feed(nbbo)  # no NBBO changes a verdict, so applying them all first changes nothing
        model_results += model.feed(orders)
    assert expected.determinable and expected.orders == 5_000
    assert sorted(expected.order_ids.astype(str).tolist()) == sorted(r.order_id for r in model_results)
    by_id = {r.order_id: (r.bid, r.offer) for r in model_results}
    assert all(by_id[i] == (b, o) for i, b, o in zip(expected.order_ids.astype(str), expected.bid, expected.offer))


def test_an_nbbo_that_flips_a_verdict_makes_the_expectation_undeterminable(monkeypatch, wallaroo_data):
    from marketspread.bench import expected as module

    real = module.should_reject_many
    monkeypatch.setattr(module, "should_reject_many", lambda bid, offer: ~real(bid, offer))
    result = expected_rejections("350", 0.01, [StreamPart(1, 100, 100)])
    assert not result.determinable and "verdict" in result.reason

