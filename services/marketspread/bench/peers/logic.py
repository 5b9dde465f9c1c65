"""Market Spread one message at a time, as a Python developer writes it first.

The shared codec decodes each message into an `Nbbo` or `Order`; the shared rule
(`rule.should_reject`) judges each NBBO; a quote is a `rule.Quote`; an order whose symbol's
quote rejects becomes an OrderResult, encoded by the shared codec, stamped with the input
record's timestamp (its intended send time) in ns. Framed records are walked frame by frame
with the same one-message codec.
"""

from __future__ import annotations

from ...fixish import (FixishError, Nbbo, Order, OrderResult, decode, decode_records, encode_order_result, frame,
                       iter_frames)
from ...fixish.layout import Side
from ...rule import INITIAL_QUOTE, Quote, should_reject

__all__ = ["quote_of", "result_payload", "DictMarketSpread", "framed_messages", "framed_messages_bulk", "output_value",
           "NS_PER_MS"]

NS_PER_MS = 1_000_000


def quote_of(bid: float, offer: float) -> Quote:
    return Quote(should_reject(bid, offer), bid, offer)


def result_payload(order: Order, quote: Quote, timestamp_ms: int) -> bytes:
    return encode_order_result(OrderResult.of(order, quote.bid, quote.offer, timestamp_ms * NS_PER_MS))


def _symbol(padded: bytes) -> str:
    return padded.decode("ascii").lstrip(" ")


def framed_messages(value: bytes) -> tuple[list, int]:
    """A framed record -> (its messages as Nbbo/Order in send order, how many parts were not fixish).

    Frame by frame with the one-message codec, as a first version would: the numpy bulk decoder
    is the optimisation the Spark job brings (bench.peers.logic.framed_messages_bulk keeps that
    variant, whose figures docs/benchmarks.md also reports).
    """
    messages, malformed = [], 0
    try:
        for _, payload in iter_frames(value):
            try:
                messages.append(decode(payload))
            except FixishError:
                malformed += 1
    except FixishError:
        malformed += 1  # the rest of the record cannot be framed
    return messages, malformed


def framed_messages_bulk(value: bytes) -> tuple[list, int]:
    """Like `framed_messages`, but decoding the record with the numpy bulk decoder first."""
    batch = decode_records([value], framed=True)
    events = [(seq, Nbbo(_symbol(symbol), bid, offer)) for seq, symbol, bid, offer in batch.nbbo.tolist()]
    events += [(seq, Order(Side(side), account, order_id.decode("ascii"), _symbol(symbol), qty, price))
               for seq, side, account, order_id, symbol, qty, price in batch.orders.tolist()]
    if len(batch.nbbo) and len(batch.orders):
        events.sort(key=lambda event: event[0])
    return [message for _, message in events], len(batch.failures)


class DictMarketSpread:
    """Per-symbol quotes in a dict; `on_message` returns an OrderResult payload or None."""

    def __init__(self, bulk: bool = False) -> None:
        self.quotes: dict[str, Quote] = {}
        self.framed_messages = framed_messages_bulk if bulk else framed_messages

    def on_message(self, message, timestamp_ms: int) -> bytes | None:
        if isinstance(message, Nbbo):
            self.quotes[message.symbol] = quote_of(message.bid_px, message.offer_px)
            return None
        quote = self.quotes.get(message.symbol, INITIAL_QUOTE)
        return result_payload(message, quote, timestamp_ms) if quote.should_reject else None

    def on_record(self, value: bytes, timestamp_ms: int, framed: bool) -> tuple[list[bytes], int, int]:
        """One Kafka record -> (result payloads, messages handled, malformed parts)."""
        if framed:
            messages, malformed = self.framed_messages(value)
        else:
            try:
                messages, malformed = [decode(value)], 0
            except FixishError:
                return [], 0, 1
        results = [r for m in messages if (r := self.on_message(m, timestamp_ms)) is not None]
        return results, len(messages), malformed


def output_value(results: list[bytes], framed: bool) -> list[bytes]:
    """Record values for a record's results: one each, or (framed) one framed run."""
    if not results:
        return []
    return [b"".join(frame(r) for r in results)] if framed else results
