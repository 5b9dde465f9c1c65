"""The Market Spread rule, in IEEE-754 doubles exactly as Wallaroo's Pony reference computes it.

    mid    = (bid + offer) / 2.0
    spread = offer - bid
    reject = spread >= 0.05 or spread / mid >= 0.05        (both inclusive)

So a crossed market (spread < 0) does not reject, bid = offer = 0 gives 0/0 = NaN which does
not reject, and a cheap symbol can reject on the ratio alone. A symbol never quoted rejects
every order, with bid = offer = 0.0 (`INITIAL_QUOTE`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["SPREAD_LIMIT", "RATIO_LIMIT", "Quote", "INITIAL_QUOTE", "should_reject", "should_reject_many", "quote_for"]

SPREAD_LIMIT = 0.05
RATIO_LIMIT = 0.05


class Quote(NamedTuple):
    """A symbol's state: the verdict of its latest NBBO and that NBBO's prices."""

    should_reject: bool
    bid: float
    offer: float


INITIAL_QUOTE = Quote(True, 0.0, 0.0)


def _ieee_divide(numerator: float, denominator: float) -> float:
    # Python raises on x / 0.0 where IEEE-754 (and Pony) give NaN or a signed infinity.
    if denominator == 0.0:
        if numerator == 0.0 or math.isnan(numerator):
            return math.nan
        return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)
    return numerator / denominator


def should_reject(bid: float, offer: float) -> bool:
    mid = (bid + offer) / 2.0
    spread = offer - bid
    return spread >= SPREAD_LIMIT or _ieee_divide(spread, mid) >= RATIO_LIMIT


def should_reject_many(bid: np.ndarray, offer: np.ndarray) -> np.ndarray:
    """`should_reject` over arrays of float64, element by element, with the same IEEE semantics."""
    bid = np.asarray(bid, dtype=np.float64)
    offer = np.asarray(offer, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mid = (bid + offer) / 2.0
        spread = offer - bid
        return (spread >= SPREAD_LIMIT) | (spread / mid >= RATIO_LIMIT)


def quote_for(bid: float, offer: float) -> Quote:
    return Quote(should_reject(bid, offer), bid, offer)
