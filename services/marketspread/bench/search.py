"""`--find-max`: the highest rate a system sustains, and what "sustains" means.

A step at rate R is sustainable when the load generator actually offered R (within the
tolerance), the system processed what was offered (within the tolerance), its lag did not
keep growing over the second half of the step, and, once drained, nothing was lost.

The search multiplies the rate by `factor` until a step fails (or divides until one passes),
then bisects geometrically between the best sustainable and the lowest unsustainable rate
until they are within `precision` of each other or `max_steps` steps have run. It is pure: a
`measure(rate)` callable does the measuring, so tests drive it with a fake system.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RATE_TOLERANCE", "Verdict", "judge", "SearchStep", "SearchResult", "find_max", "round_rate"]

RATE_TOLERANCE = 0.05
GENERATOR = "load generator"


@dataclass(frozen=True)
class Verdict:
    sustainable: bool
    reason: str
    limit: str | None = None  # GENERATOR when the load generator could not offer the rate


def judge(rate: float, offered: float, sustained: float, lag_growing: bool, lost: int | None, drained: bool,
          tolerance: float = RATE_TOLERANCE) -> Verdict:
    """Verdict on one step; the first failed condition is the reason."""
    if offered < (1 - tolerance) * rate:
        return Verdict(False, f"the load generator offered {offered:,.0f} of {rate:,.0f} msgs/s", GENERATOR)
    if lag_growing:
        return Verdict(False, "lag kept growing over the second half of the step")
    if sustained < (1 - tolerance) * offered:
        return Verdict(False, f"processed {sustained:,.0f} of the {offered:,.0f} msgs/s offered")
    if not drained:
        return Verdict(False, "the backlog did not drain after the step")
    if lost:
        return Verdict(False, f"{lost:,} messages lost")
    return Verdict(True, "sustained")


def round_rate(rate: float, digits: int = 3) -> float:
    """`rate` to `digits` significant digits (141,421.4 -> 141,000): rates people can read and repeat."""
    if rate <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(rate)) - digits + 1)
    return float(round(rate / scale) * scale)


@dataclass(frozen=True)
class SearchStep:
    rate: float
    verdict: Verdict
    result: Any = None  # whatever measure() returned alongside the verdict


@dataclass
class SearchResult:
    max_sustainable_rate: float | None
    lowest_unsustainable_rate: float | None
    bounded_by: str
    steps: list[SearchStep] = field(default_factory=list)

    def best_step(self) -> SearchStep | None:
        matching = [s for s in self.steps if s.rate == self.max_sustainable_rate and s.verdict.sustainable]
        return matching[-1] if matching else None


def find_max(measure: Callable[[float], tuple[Verdict, Any]], start_rate: float, *, factor: float = 2.0,
             precision: float = 0.10, max_steps: int = 8, min_rate: float = 1_000,
             max_rate: float = 5_000_000) -> SearchResult:
    if not (factor > 1 and precision > 0 and max_steps >= 1 and 0 < min_rate <= max_rate):
        raise ValueError("need factor > 1, precision > 0, max_steps >= 1 and 0 < min_rate <= max_rate")
    lo: float | None = None
    hi: float | None = None
    steps: list[SearchStep] = []
    rate = round_rate(min(max(start_rate, min_rate), max_rate))
    bounded_by = "step budget"
    while len(steps) < max_steps:
        verdict, result = measure(rate)
        steps.append(SearchStep(rate, verdict, result))
        if verdict.sustainable:
            lo = rate if lo is None else max(lo, rate)
        else:
            hi = rate if hi is None else min(hi, rate)
        if lo is not None and hi is not None and lo >= hi:
            # A noisy machine: a lower rate failed after a higher one passed. Trust the failure.
            lo = max((s.rate for s in steps if s.verdict.sustainable and s.rate < hi), default=None)
        if hi is None:
            if rate >= max_rate:
                bounded_by = "max rate"
                break
            rate = round_rate(min(rate * factor, max_rate))
        elif lo is None:
            if rate <= min_rate:
                bounded_by = "nothing sustainable"
                break
            rate = round_rate(max(rate / factor, min_rate))
        else:
            if hi / lo <= 1 + precision:
                bounded_by = "precision"
                break
            rate = round_rate(math.sqrt(lo * hi))
            if rate in (lo, hi):
                bounded_by = "precision"
                break
    failing = [s for s in steps if s.rate == hi and not s.verdict.sustainable]
    if bounded_by in ("precision", "step budget") and failing and failing[-1].verdict.limit == GENERATOR:
        bounded_by = GENERATOR
    return SearchResult(lo, hi, bounded_by, steps)
