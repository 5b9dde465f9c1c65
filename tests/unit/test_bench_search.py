"""--find-max against fake systems: brackets the capacity, respects its budget, says what bounded it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.bench.search import GENERATOR, Verdict, find_max, judge, round_rate


class FakeSystem:
    """Sustains any rate up to `capacity`; the load generator offers at most `generator`."""

    def __init__(self, capacity: float, generator: float = math.inf, flaky_at: float | None = None):
        self.capacity, self.generator, self.flaky_at = capacity, generator, flaky_at
        self.rates: list[float] = []

    def __call__(self, rate: float):
        self.rates.append(rate)
        offered = min(rate, self.generator)
        sustained = min(offered, self.capacity)
        growing = offered > self.capacity * 1.01 or rate == self.flaky_at
        verdict = judge(rate, offered, sustained, growing, lost=0, drained=not growing)
        return verdict, {"rate": rate}


@given(capacity=st.floats(min_value=2_000, max_value=3_000_000), start=st.floats(min_value=1_000, max_value=2_000_000))
@settings(max_examples=200, deadline=None)
def test_the_search_brackets_the_capacity_within_its_precision(capacity, start):
    system = FakeSystem(capacity)
    result = find_max(system, start, precision=0.10, max_steps=30, min_rate=1_000, max_rate=5_000_000)
    assert result.bounded_by == "precision"
    lo, hi = result.max_sustainable_rate, result.lowest_unsustainable_rate
    # round_rate keeps 3 significant digits, so the bracket is within precision plus rounding.
    assert lo <= capacity * 1.01 < hi
    assert hi / lo <= 1.10 * 1.01
    assert result.best_step().verdict.sustainable and result.best_step().rate == lo
    assert len(system.rates) == len(set(system.rates))  # never measures the same rate twice


def test_geometric_steps_up_then_bisection():
    system = FakeSystem(capacity=300_000)
    result = find_max(system, 100_000, factor=2.0, precision=0.10, max_steps=10)
    assert system.rates[:3] == [100_000, 200_000, 400_000]
    assert system.rates[3] == round_rate(math.sqrt(200_000 * 400_000))  # 283,000
    assert 270_000 <= result.max_sustainable_rate <= 300_000 < result.lowest_unsustainable_rate


def test_starting_above_capacity_steps_down():
    system = FakeSystem(capacity=30_000)
    result = find_max(system, 500_000, max_steps=20)
    assert system.rates[:5] == [500_000, 250_000, 125_000, 62_500, 31_200]
    assert result.max_sustainable_rate <= 30_000 < result.lowest_unsustainable_rate


def test_the_step_budget_is_respected_and_reported():
    system = FakeSystem(capacity=1_000_000)
    result = find_max(system, 1_000, max_steps=4)
    assert len(system.rates) == 4 and result.bounded_by == "step budget"
    assert result.max_sustainable_rate == 8_000 and result.lowest_unsustainable_rate is None


def test_nothing_sustainable_and_the_max_rate_are_reported():
    nothing = find_max(FakeSystem(capacity=500), 4_000, min_rate=1_000, max_steps=10)
    assert nothing.max_sustainable_rate is None and nothing.bounded_by == "nothing sustainable"
    everything = find_max(FakeSystem(capacity=1e12), 100_000, max_rate=1_000_000, max_steps=10)
    assert everything.max_sustainable_rate == 1_000_000 and everything.bounded_by == "max rate"


def test_a_load_generator_ceiling_is_named_as_the_bound():
    system = FakeSystem(capacity=1e9, generator=45_000)
    result = find_max(system, 10_000, precision=0.10, max_steps=20)
    assert result.bounded_by == GENERATOR
    assert result.max_sustainable_rate <= 45_000 < result.lowest_unsustainable_rate
    failing = [s for s in result.steps if not s.verdict.sustainable]
    assert all(s.verdict.limit == GENERATOR for s in failing)


def test_a_flaky_failure_below_a_success_is_trusted():
    system = FakeSystem(capacity=400_000, flaky_at=200_000)
    result = find_max(system, 100_000, max_steps=12)
    assert result.max_sustainable_rate < 200_000 <= result.lowest_unsustainable_rate


def test_judge_names_the_first_failed_condition():
    assert judge(100, 100, 100, False, 0, True) == Verdict(True, "sustained")
    assert judge(100, 90, 90, False, 0, True).limit == GENERATOR
    assert "lag" in judge(100, 100, 100, True, 0, True).reason
    assert "processed" in judge(100, 100, 90, False, 0, True).reason
    assert "drain" in judge(100, 100, 100, False, 0, False).reason
    assert "lost" in judge(100, 100, 100, False, 3, True).reason
    assert judge(100, 96, 92, False, None, True).sustainable  # within 5 %, loss unknown is not loss


def test_round_rate_keeps_three_significant_digits():
    assert round_rate(141_421.36) == 141_000
    assert round_rate(999.6) == 1_000 and round_rate(0) == 0.0 and round_rate(2_828_427) == 2_830_000


def test_bad_search_settings_are_refused():
    with pytest.raises(ValueError):
        find_max(FakeSystem(1), 1, factor=1.0)
    with pytest.raises(ValueError):
        find_max(FakeSystem(1), 1, min_rate=10, max_rate=5)
