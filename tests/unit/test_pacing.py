"""Giles-like open-loop pacing: intended send times fixed in advance, never skipped when behind."""

from __future__ import annotations

import threading

import pytest

from marketspread.sender.pacing import NS_PER_S, Pacer

START = 1_700_000_000 * NS_PER_S


class FakeClock:
    """Epoch nanoseconds that move only when the pacer waits or the test says so."""

    def __init__(self, now: int = START):
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeStop(threading.Event):
    """A stop event whose wait() advances the fake clock instead of sleeping, and records each wait."""

    def __init__(self, clock: FakeClock, set_after_waits: int | None = None):
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []
        self.set_after_waits = set_after_waits

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if self.set_after_waits is not None and len(self.waits) >= self.set_after_waits:
            self.set()
            return True
        self.clock.now += round(timeout * NS_PER_S)
        return False


def test_batch_k_is_due_at_start_plus_k_intervals():
    pacer = Pacer(rate=1000, batch_size=100, start_ns=START, clock=FakeClock())
    assert [pacer.intended_ns(k) for k in range(4)] == [START, START + 100_000_000, START + 200_000_000,
                                                        START + 300_000_000]


def test_intended_times_do_not_drift_when_the_interval_is_not_a_whole_number_of_nanoseconds():
    pacer = Pacer(rate=3, batch_size=1, start_ns=START, clock=FakeClock())
    # 1/3 s is not representable; a float accumulator would be off by now, exact arithmetic is not.
    assert pacer.intended_ns(3_000_000) == START + 1_000_000 * NS_PER_S
    assert pacer.intended_ns(1) == START + 333_333_333
    assert pacer.intended_ns(2) == START + 666_666_666


def test_a_fractional_rate_gives_exact_intervals():
    pacer = Pacer(rate=0.5, batch_size=1, start_ns=START, clock=FakeClock())
    assert pacer.intended_ns(3) == START + 6 * NS_PER_S


def test_the_start_defaults_to_now():
    clock = FakeClock(START + 123)
    assert Pacer(rate=10, batch_size=1, clock=clock).intended_ns(0) == START + 123


def test_waiting_sleeps_exactly_until_the_intended_time_when_ahead():
    clock = FakeClock()
    stop = FakeStop(clock)
    pacer = Pacer(rate=1000, batch_size=100, start_ns=START, clock=clock)
    assert pacer.wait_until(pacer.intended_ns(0), stop) == 0.0
    assert stop.waits == []
    assert pacer.wait_until(pacer.intended_ns(1), stop) == 0.0
    assert stop.waits == [pytest.approx(0.1)]
    assert clock.now == START + 100_000_000


def test_a_sender_that_is_behind_sends_every_late_batch_at_once_with_its_original_intended_time():
    clock = FakeClock()
    stop = FakeStop(clock)
    pacer = Pacer(rate=1000, batch_size=100, start_ns=START, clock=clock)
    clock.now = START + 350_000_000  # stalled for 0.35 s: batches 0..3 are late
    sent = []
    for k in range(6):
        intended = pacer.intended_ns(k)
        behind = pacer.wait_until(intended, stop)
        sent.append((k, intended, behind))
    assert sent[:4] == [(0, START, 0.35), (1, START + 100_000_000, 0.25),
                        (2, START + 200_000_000, pytest.approx(0.15)), (3, START + 300_000_000, pytest.approx(0.05))]
    # Caught up: batch 4 waits for its own time again, and nothing was skipped or re-based.
    assert sent[4] == (4, START + 400_000_000, 0.0)
    assert sent[5] == (5, START + 500_000_000, 0.0)
    assert stop.waits == [pytest.approx(0.05), pytest.approx(0.1)]


def test_unpaced_batches_are_due_now_and_never_wait():
    clock = FakeClock()
    stop = FakeStop(clock)
    pacer = Pacer(rate=0, batch_size=100, start_ns=START, clock=clock)
    assert not pacer.paced
    assert pacer.intended_ns(0) == START
    clock.now += 5
    assert pacer.intended_ns(7) == START + 5
    assert pacer.wait_until(pacer.intended_ns(8), stop) == 0.0
    assert stop.waits == []


def test_a_future_start_waits_for_it():
    clock = FakeClock()
    stop = FakeStop(clock)
    pacer = Pacer(rate=100, batch_size=10, start_ns=START + 2 * NS_PER_S, clock=clock)
    assert pacer.wait_until(pacer.intended_ns(0), stop) == 0.0
    assert clock.now == START + 2 * NS_PER_S


def test_a_stop_during_the_wait_returns_none_at_once():
    clock = FakeClock()
    stop = FakeStop(clock, set_after_waits=1)
    pacer = Pacer(rate=1, batch_size=10, start_ns=START, clock=clock)
    assert pacer.wait_until(pacer.intended_ns(1), stop) is None
    assert clock.now == START


def test_a_stop_already_set_returns_none_even_when_late():
    clock = FakeClock(START + NS_PER_S)
    stop = FakeStop(clock)
    stop.set()
    assert Pacer(rate=10, batch_size=1, start_ns=START, clock=clock).wait_until(START, stop) is None


def test_negative_rates_and_empty_batches_are_refused():
    with pytest.raises(ValueError):
        Pacer(rate=-1, batch_size=1)
    with pytest.raises(ValueError):
        Pacer(rate=1, batch_size=0)


def test_real_waiting_with_a_real_event_reaches_the_intended_time():
    pacer = Pacer(rate=100, batch_size=1)
    stop = threading.Event()
    intended = pacer.intended_ns(2)
    behind = pacer.wait_until(intended, stop)
    assert behind is not None and behind >= 0
    assert pacer.clock() >= intended
