"""Wallaroo's NBBO price formulas (fix_generator_utils/utils.pony, RandomFixNbboGenerator), vectorised.

Each takes an instrument's reference price and uniform doubles in [0, 1) and returns (bid, offer).

- `tight_quotes`, for instruments that must never reject:
  `bid = price + u`, `offer = bid + k / 100`, `k = rand_int(4)` in {0, 1, 2, 3}.
- `wide_quotes`, for instruments that must keep rejecting:
  `bid = price + u1 - ((0.05 + u2) * 0.1 + 0.01)`, `offer = bid + u3 * 0.03 + 0.05`.

Two corrections, so that the promise in the names holds for every message (checked with
`marketspread.rule`, the same rule the job applies):

- Wallaroo's tight formula rejects on the ratio alone for its cheapest instruments: a spread of
  3 cents is 5% of a mid of 0.60, and all_instruments.csv prices SD at 0.28 and MHR at 0.36.
  Such a quote gets the widest spread of at most k cents that does not reject (0 cents never does).
  Wallaroo's own data files never met this: they were generated before its commit 37aa7e655
  (2020-05-07), when an integer division made every non-rejected spread 0.
- `offer - bid` can round to just under 0.05 in floating point; such an offer is moved up by
  ulps until the quote rejects.
"""

from __future__ import annotations

import numpy as np

from ..rule import should_reject_many
from .defaults import SPREAD_TICKS

__all__ = ["tight_quotes", "wide_quotes"]

def tight_quotes(price: np.ndarray, u_bid: np.ndarray, u_spread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bid = np.asarray(price, dtype=np.float64) + u_bid
    ticks = np.minimum(np.floor(np.asarray(u_spread) * SPREAD_TICKS), SPREAD_TICKS - 1)
    offer = bid + ticks / 100
    wide = np.flatnonzero(should_reject_many(bid, offer))
    # Ends by k = 0 at the latest: a zero spread never rejects.
    while len(wide):
        ticks[wide] -= 1
        offer[wide] = bid[wide] + ticks[wide] / 100
        wide = wide[should_reject_many(bid[wide], offer[wide])]
    return bid, offer


def wide_quotes(price: np.ndarray, u_bid: np.ndarray, u_narrow: np.ndarray,
                u_spread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bid = np.asarray(price, dtype=np.float64) + u_bid - ((0.05 + np.asarray(u_narrow)) * 0.1 + 0.01)
    offer = bid + np.asarray(u_spread) * 0.03 + 0.05
    narrow = np.flatnonzero(~should_reject_many(bid, offer))
    while len(narrow):
        offer[narrow] = np.nextafter(offer[narrow], np.inf)
        narrow = narrow[~should_reject_many(bid[narrow], offer[narrow])]
    return bid, offer
