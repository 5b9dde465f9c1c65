"""The spread rule (rule.py), in IEEE-754 doubles exactly as Wallaroo's Pony reference computes it.

    mid = (bid + offer) / 2.0;  spread = offer - bid
    reject = spread >= 0.05 or spread / mid >= 0.05          (both inclusive)

Specified here: the reference's consequences (a crossed market does not reject, bid = offer = 0
gives NaN which does not reject, the ratio alone can reject, both thresholds are inclusive at the
exact double, a never-quoted symbol rejects with 0.0/0.0), and the scalar and the vectorised
rule agree with IEEE arithmetic on every double, infinities, NaN, signed zeros and subnormals
included, without Python's ZeroDivisionError.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.fixish import Nbbo, Order, OrderResult, Side
from marketspread.fixish.bulk import NBBO_EVENT, ORDER_EVENT
from marketspread.quotes import QuoteBook
from marketspread.reference import ReferenceModel
from marketspread.rule import (
    INITIAL_QUOTE, RATIO_LIMIT, SPREAD_LIMIT, Quote, quote_for, should_reject, should_reject_many,
)


def ieee_should_reject(bid: float, offer: float) -> bool:
    """The rule evaluated in numpy float64 scalars: IEEE arithmetic, no Python exceptions."""
    with np.errstate(all="ignore"):
        b, o = np.float64(bid), np.float64(offer)
        mid = (b + o) / np.float64(2.0)
        spread = o - b
        return bool(spread >= np.float64(0.05)) or bool(spread / mid >= np.float64(0.05))


def ratio(bid: float, offer: float) -> float:
    return (offer - bid) / ((bid + offer) / 2.0)


def test_both_limits_are_the_double_nearest_five_cents():
    assert SPREAD_LIMIT == RATIO_LIMIT == 0.05
    assert SPREAD_LIMIT.hex() == "0x1.999999999999ap-5"


# --- the reference's consequences --------------------------------------------------------------

@pytest.mark.parametrize(("bid", "offer"), [(10.0, 9.0), (0.53, 0.50), (100.0, 99.95), (1.0, -1.0), (0.06, 0.0)])
def test_a_crossed_market_does_not_reject(bid, offer):
    assert offer - bid < 0
    assert should_reject(bid, offer) is False


def test_bid_and_offer_zero_give_nan_which_does_not_reject():
    with np.errstate(invalid="ignore"):
        assert math.isnan(np.float64(0.0) / np.float64(0.0))
    assert should_reject(0.0, 0.0) is False
    assert should_reject(-0.0, 0.0) is False
    assert should_reject(0.0, -0.0) is False
    assert quote_for(0.0, 0.0) == Quote(False, 0.0, 0.0)


def test_a_low_priced_symbol_rejects_on_the_ratio_alone():
    spread = 0.53 - 0.50
    assert spread < 0.05
    assert ratio(0.50, 0.53) == pytest.approx(0.0583, abs=1e-4)
    assert should_reject(0.50, 0.53) is True
    # The same spread on a dearer symbol does not reject.
    assert should_reject(10.50, 10.53) is False


def test_a_wide_spread_rejects_on_the_absolute_spread_alone():
    assert ratio(100.0, 100.10) < 0.05
    assert should_reject(100.0, 100.10) is True


def test_decimal_prices_five_cents_apart_reject_or_not_as_their_doubles_say():
    # 10.05 - 10.0 is 0.05000000000000071 but 100.05 - 100.0 is 0.04999999999999716.
    assert 10.05 - 10.0 > 0.05 and should_reject(10.0, 10.05) is True
    assert 100.05 - 100.0 < 0.05 and should_reject(100.0, 100.05) is False


def test_the_absolute_spread_threshold_is_inclusive_at_the_exact_double():
    # A spread of exactly 0.05 with mid > 1 (so that the ratio stays below 0.05) does not exist in
    # doubles; a negative mid makes the ratio negative, leaving the absolute spread to decide alone.
    bid, offer = -0.05, 0.0
    assert offer - bid == 0.05 and ratio(bid, offer) < 0
    assert should_reject(bid, offer) is True
    just_below = math.nextafter(-0.05, 0.0)
    assert offer - just_below == math.nextafter(0.05, 0.0)
    assert should_reject(just_below, offer) is False
    just_above = math.nextafter(-0.05, -1.0)
    assert offer - just_above == math.nextafter(0.05, 1.0)
    assert should_reject(just_above, offer) is True


def first_offer_at_or_above(bid: float, test) -> float:
    """The smallest double offer > bid for which test(bid, offer) holds (the property is monotone there)."""
    low, high = bid, bid * 2.0 + 1.0
    assert test(bid, high)
    while math.nextafter(low, math.inf) < high:
        middle = (low + high) / 2.0
        if middle <= low or middle >= high:
            middle = math.nextafter(low, math.inf)
        low, high = (low, middle) if test(bid, middle) else (middle, high)
    return high


@pytest.mark.parametrize("bid", [10.0, 19.65, 771.5, 1.0])
def test_the_absolute_spread_threshold_sits_between_two_adjacent_offers(bid):
    offer = first_offer_at_or_above(bid, lambda b, o: o - b >= 0.05)
    below = math.nextafter(offer, -math.inf)
    assert below - bid < 0.05 <= offer - bid
    assert ratio(bid, offer) < 0.05
    assert (should_reject(bid, below), should_reject(bid, offer)) == (False, True)


def test_the_ratio_threshold_is_inclusive_at_the_exact_double():
    exact = []
    for thousandths in range(1, 400):
        bid = thousandths / 1000.0
        offer = first_offer_at_or_above(bid, lambda b, o: ratio(b, o) >= 0.05)
        if ratio(bid, offer) == 0.05:
            exact.append((bid, offer))
    assert len(exact) > 10  # e.g. bid 0.067, offer 0.07043589743589744
    for bid, offer in exact:
        below, above = math.nextafter(offer, 0.0), math.nextafter(offer, math.inf)
        assert offer - bid < 0.05  # the spread alone would not reject
        assert ratio(bid, below) < 0.05 == ratio(bid, offer) <= ratio(bid, above)
        assert (should_reject(bid, below), should_reject(bid, offer), should_reject(bid, above)) == (False, True, True)
        assert should_reject_many(np.array([bid] * 3), np.array([below, offer, above])).tolist() == [False, True, True]


def test_a_never_quoted_symbol_rejects_with_bid_and_offer_zero():
    assert INITIAL_QUOTE == Quote(True, 0.0, 0.0)
    order = Order(Side.SELL, 5, "abc123", "ZZZZ", 10.0, 3.0)
    model = ReferenceModel()
    assert model.on_order(order, timestamp=7) == OrderResult(Side.SELL, 5, "abc123", "ZZZZ", 10.0, 3.0, 0.0, 0.0, 7)
    book = QuoteBook.empty()
    reject, bid, offer = book.lookup(np.array([b"ZZZZ"], "S4"))
    assert (reject.tolist(), bid.tolist(), offer.tolist()) == ([True], [0.0], [0.0])
    events = np.zeros(1, ORDER_EVENT)
    events["symbol"] = b"ZZZZ"
    step = book.apply(np.empty(0, NBBO_EVENT), events)
    assert (len(step.rejected), step.bid.tolist(), step.offer.tolist()) == (1, [0.0], [0.0])


def test_an_nbbo_that_does_not_reject_lifts_the_initial_reject_state():
    model = ReferenceModel()
    model.on_nbbo(Nbbo("NI", 10.0, 10.01))
    assert model.on_order(Order(Side.BUY, 1, "abc123", "NI", 1.0, 1.0)) is None


# --- scalar == vectorised == IEEE on every double ----------------------------------------------

SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, -1.7976931348623157e308, 0.05, -0.05, 0.025, 1.0, -1.0]
doubles = st.sampled_from(SPECIAL) | st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(deadline=None)
@given(doubles, doubles)
def test_the_scalar_rule_is_the_ieee_rule_on_any_pair_of_doubles(bid, offer):
    assert should_reject(bid, offer) is ieee_should_reject(bid, offer)


@settings(deadline=None)
@given(st.lists(st.tuples(doubles, doubles), max_size=50))
def test_the_vectorised_rule_equals_the_scalar_rule_element_by_element(pairs):
    bid = np.array([p[0] for p in pairs], dtype=np.float64)
    offer = np.array([p[1] for p in pairs], dtype=np.float64)
    # numpy's defaults warn on 0/0, x/0 and overflow: the rule must not let those warnings out.
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
        warnings.simplefilter("error")
        result = should_reject_many(bid, offer)
    assert result.dtype == bool
    assert result.tolist() == [should_reject(b, o) for b, o in pairs]


@pytest.mark.parametrize("bid", SPECIAL)
@pytest.mark.parametrize("offer", SPECIAL)
def test_every_pair_of_special_doubles_is_judged_without_a_python_exception(bid, offer):
    expected = ieee_should_reject(bid, offer)
    assert should_reject(bid, offer) is expected
    assert should_reject_many(np.array([bid]), np.array([offer])).tolist() == [expected]


@pytest.mark.parametrize(("bid", "offer", "expected"), [
    (1.0, -1.0, False),                  # spread -2, mid 0: -2 / 0 = -inf
    (-1.0, 1.0, True),                   # spread 2 rejects before the ratio's 2 / 0 = inf
    (-5e-324, 5e-324, True),             # spread 1e-323 < 0.05, mid 0: ratio +inf rejects
    (5e-324, -5e-324, False),            # crossed, mid 0: ratio -inf
    (math.inf, math.inf, False),         # inf - inf = NaN
    (-math.inf, math.inf, True),         # spread inf
    (1.7976931348623157e308, 1.7976931348623157e308, False),  # mid overflows to inf, spread 0
    (-1.7976931348623157e308, 1.7976931348623157e308, True),  # spread overflows to inf
    (math.nan, 1.0, False),
    (1.0, math.nan, False),
])
def test_division_by_zero_and_overflow_follow_ieee(bid, offer, expected):
    assert should_reject(bid, offer) is expected
    assert should_reject_many(np.array([bid]), np.array([offer])).tolist() == [expected]
