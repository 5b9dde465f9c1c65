"""Which orders of a step must be rejected, per the reference model, and with which quote.

The senders generate their streams (seeded, `marketspread.generate`); the harness generates
the same messages again after the step, for exactly the counts that were sent. The reference
model (`marketspread.reference`) applies the initial NBBO, which fixes every symbol's quote.
The streams run concurrently, so which NBBO an order meets depends on timing; the expected
set is nevertheless exact when no stream NBBO changes its symbol's verdict (Wallaroo's
generator never does: non-rejected instruments get quotes that never reject, rejected ones
none). This is checked, NBBO by NBBO, with the shared rule; if some NBBO did flip a verdict
the expectation is reported as not determinable rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fixish import decode, pad_symbol, split_frames
from ..reference import ReferenceModel
from ..rule import should_reject_many

__all__ = ["Expected", "expected_rejections", "StreamPart", "CHUNK"]

CHUNK = 1_000_000


@dataclass(frozen=True)
class StreamPart:
    """One sender pair's share: the seed both its senders used and how many messages each sent."""

    seed: int
    nbbo: int
    orders: int


@dataclass(frozen=True)
class Expected:
    determinable: bool
    order_ids: np.ndarray  # S6, the orders to reject (empty when not determinable)
    bid: np.ndarray  # the quote each must carry
    offer: np.ndarray
    orders: int  # orders examined
    reason: str = ""

    def __len__(self) -> int:
        return len(self.order_ids)


def _initial_quotes(symbol_set) -> dict[bytes, tuple[bool, float, float]]:
    from ..generate import initial_nbbo

    model = ReferenceModel()
    model.feed(decode(payload) for payload in split_frames(initial_nbbo(symbol_set)))
    return {pad_symbol(symbol): (quote.should_reject, quote.bid, quote.offer) for symbol, quote in model.quotes.items()}


def expected_rejections(symbols: str, reject_ratio: float, parts: list[StreamPart]) -> Expected:
    from ..generate import NbboStream, OrderStream, load_symbol_set, stream_rngs

    symbol_set = load_symbol_set(symbols)
    quotes = _initial_quotes(symbol_set)
    known = np.array(sorted(quotes), dtype="S4")
    verdict = np.array([quotes[s][0] for s in known.tolist()], dtype=bool)
    bids = np.array([quotes[s][1] for s in known.tolist()])
    offers = np.array([quotes[s][2] for s in known.tolist()])

    def lookup(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(known, column), len(known) - 1)
        return at, known[at] == column

    ids, bid, offer = [], [], []
    examined = 0
    for part in parts:
        nbbo_rng, orders_rng = stream_rngs(part.seed)
        for chunk in NbboStream(symbol_set, nbbo_rng).chunks(CHUNK, total=part.nbbo) if part.nbbo else ():
            at, found = lookup(chunk["symbol"])
            flips = should_reject_many(chunk["bid_px"], chunk["offer_px"]) != np.where(found, verdict[at], True)
            if flips.any():
                return Expected(False, np.empty(0, "S6"), np.empty(0), np.empty(0), examined,
                                f"an NBBO for {chunk['symbol'][flips][0]!r} changes its verdict: the expected "
                                f"rejections depend on the interleaving")
        stream = OrderStream(symbol_set, orders_rng, reject_ratio=reject_ratio)
        for chunk in stream.chunks(CHUNK, total=part.orders) if part.orders else ():
            examined += len(chunk)
            at, found = lookup(chunk["symbol"])
            # A symbol never quoted rejects at 0.0 / 0.0 (the reference model's initial quote).
            rejects = np.where(found, verdict[at], True)
            ids.append(chunk["order_id"][rejects])
            bid.append(np.where(found, bids[at], 0.0)[rejects])
            offer.append(np.where(found, offers[at], 0.0)[rejects])
    if not ids:
        return Expected(True, np.empty(0, "S6"), np.empty(0), np.empty(0), examined)
    return Expected(True, np.concatenate(ids).astype("S6"), np.concatenate(bid), np.concatenate(offer), examined)
