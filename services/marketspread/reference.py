"""An independent reference model: Wallaroo's state machine, one message at a time, in a dict.

Deliberately written the simple way (no numpy, no batching) so that it can check the
vectorised `QuoteBook` used by the job. It shares only the rule itself (`rule.should_reject`)
and the message types with the code it checks.
"""

from __future__ import annotations

from collections.abc import Iterable

from .fixish.messages import Message, Nbbo, Order, OrderResult
from .rule import INITIAL_QUOTE, Quote, quote_for

__all__ = ["ReferenceModel", "expected_rejections"]


class ReferenceModel:
    def __init__(self) -> None:
        self.quotes: dict[str, Quote] = {}

    def on_nbbo(self, nbbo: Nbbo) -> None:
        self.quotes[nbbo.symbol] = quote_for(nbbo.bid_px, nbbo.offer_px)

    def on_order(self, order: Order, timestamp: int = 0) -> OrderResult | None:
        quote = self.quotes.setdefault(order.symbol, INITIAL_QUOTE)
        if quote.should_reject:
            return OrderResult.of(order, quote.bid, quote.offer, timestamp)
        return None

    def feed(self, messages: Iterable[Message]) -> list[OrderResult]:
        results = []
        for message in messages:
            if isinstance(message, Nbbo):
                self.on_nbbo(message)
            elif (result := self.on_order(message)) is not None:
                results.append(result)
        return results


def expected_rejections(*streams: Iterable[Message]) -> list[OrderResult]:
    """Streams applied one after another, each to completion (Wallaroo's test harness order)."""
    model = ReferenceModel()
    results: list[OrderResult] = []
    for stream in streams:
        results.extend(model.feed(stream))
    return results
