"""Market Spread on Quix Streams: `concat` of the two topics and a stateful `apply`.

Written as Quix's documentation suggests: byte (de)serializers, `app.dataframe(nbbo).concat(
app.dataframe(orders))`, one `apply(stateful=True, metadata=True)` doing the step with the
shared codec and rule, `filter` out the accepted orders, `to_topic(rejections)`. Quix keeps
state per message key in RocksDB with a changelog topic, at-least-once, its defaults. With
record format `message` the key is the symbol, so the state is one quote; with `framed` the
key is the shard, so the state is the shard's dict of quotes, read and written once a record.
Output records are shaped as the Spark job's, so the same receiver measures them.
"""

from __future__ import annotations

import logging
import tempfile
import threading

from ...fixish import FixishError, Nbbo, decode
from ...rule import INITIAL_QUOTE, Quote
from ..settings import PeerSettings
from .counters import PeerCounters
from .logic import framed_messages, output_value, quote_of, result_payload

__all__ = ["run", "message_step", "framed_step"]

log = logging.getLogger(__name__)


def message_step(counters: PeerCounters):
    """value, key, timestamp, headers, state -> an OrderResult payload or None (one message per record)."""

    def step(value, key, timestamp, headers, state):
        counters.records += 1
        try:
            message = decode(value)
        except FixishError:
            counters.malformed += 1
            return None
        counters.messages += 1
        if isinstance(message, Nbbo):
            quote = quote_of(message.bid_px, message.offer_px)
            state.set("quote", list(quote))
            return None
        stored = state.get("quote")
        quote = Quote(*stored) if stored is not None else INITIAL_QUOTE
        if not quote.should_reject:
            return None
        counters.results += 1
        return result_payload(message, quote, timestamp)

    return step


def framed_step(counters: PeerCounters):
    """The same for a framed record: the shard's quotes are one dict in state."""

    def step(value, key, timestamp, headers, state):
        counters.records += 1
        messages, malformed = framed_messages(value)
        counters.malformed += malformed
        counters.messages += len(messages)
        quotes = state.get("quotes") or {}
        results, changed = [], False
        for message in messages:
            if isinstance(message, Nbbo):
                quotes[message.symbol] = list(quote_of(message.bid_px, message.offer_px))
                changed = True
                continue
            stored = quotes.get(message.symbol)
            quote = Quote(*stored) if stored is not None else INITIAL_QUOTE
            if quote.should_reject:
                results.append(result_payload(message, quote, timestamp))
        if changed:
            state.set("quotes", quotes)
        counters.results += len(results)
        values = output_value(results, framed=True)
        return values[0] if values else None

    return step


def run(settings: PeerSettings, stop: threading.Event) -> None:
    from quixstreams import Application

    counters = PeerCounters()

    def processed(topic: str, partition: int, offset: int) -> None:
        counters.offsets[(topic, partition)] = offset + 1

    state_dir = settings.state_dir or tempfile.mkdtemp(prefix="quix-state-")
    app = Application(broker_address=settings.bootstrap_servers, consumer_group=settings.group_id,
                      auto_offset_reset="earliest", state_dir=state_dir, loglevel="WARNING",
                      commit_interval=settings.commit_interval, on_message_processed=processed)
    topic = dict(key_deserializer="bytes", value_deserializer="bytes", key_serializer="bytes",
                 value_serializer="bytes")
    nbbo, orders = app.topic(settings.nbbo_topic, **topic), app.topic(settings.orders_topic, **topic)
    rejections = app.topic(settings.rejections_topic, **topic)
    step = framed_step(counters) if settings.record_format == "framed" else message_step(counters)
    sdf = app.dataframe(nbbo).concat(app.dataframe(orders))
    sdf = sdf.apply(step, stateful=True, metadata=True).filter(lambda value: value is not None)
    sdf.to_topic(rejections)

    counters.serve(settings.metrics_port)
    counters.ready = 1
    # Quix stops on SIGTERM/SIGINT itself; a stop from elsewhere (tests) stops it too.
    watcher = threading.Thread(target=lambda: stop.wait() and app.stop(), daemon=True)
    watcher.start()
    try:
        app.run()
    finally:
        stop.set()
        counters.shutdown()
