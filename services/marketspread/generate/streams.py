"""The NBBO and order streams in the distributions of Wallaroo's fix_generator, in numpy chunks.

    nbbo_rng, orders_rng = stream_rngs(seed)        # the generators `marketspread generate --seed` uses
    nbbo = NbboStream(symbol_set, nbbo_rng)
    nbbo.take(100_000)                              # wire records (encode_nbbos); .tobytes() is the buffer
    for chunk in OrderStream(symbol_set, orders_rng).chunks(100_000):   # endless without total=
        ...
    generate_nbbo(symbol_set, n, rng)               # = NbboStream(symbol_set, rng).take(n)
    generate_orders(symbol_set, n, rng, reject_ratio)

Records are framed (4-byte length + payload, as in the data files) unless `framed=False`.
Chunking never changes a stream: every field draws one double per message from its own
generator, order ids and timestamps depend on the message's position only, so `take(a)`
then `take(b)` yields exactly the messages of `take(a + b)`.

NBBO (Wallaroo's nbbo_generator): a uniformly random non-rejected instrument,
`prices.tight_quotes`, so its quotes never reject. Wallaroo sent no NBBO for rejected
instruments after the initial file; `rejected_share` > 0 sends that share of NBBOs to them,
with `prices.wide_quotes`, so that they keep rejecting at new prices.

Orders (Wallaroo's order_generator): with probability `reject_ratio` (Wallaroo's
total_rejections / total_messages, default 5 / 350,000) a uniformly random rejected
instrument; otherwise a non-rejected one, skewed: with probability 0.79 uniformly among the
first 20% of them (`SymbolSet.hot_count`), else uniformly among all of them, so the first
20% get 0.79 + 0.21 * 20% ~ 83% of those orders. (Wallaroo's `dice(1, 100) <
messages_skew_percent` is true for 79 of its 100 faces, not 80.) Side Buy or Sell, account
1-300, quantity 10, 20, ... 650 (`dice(1, 65) * 10`), price = the instrument's reference
price, order id from `order_ids`. Since non-rejected quotes never reject and rejected ones
always do, the orders a run must reject are exactly its orders on rejected instruments.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import MarketSpreadError
from ..fixish.bulk import encode_nbbos, encode_orders
from ..fixish.layout import Side
from .defaults import (
    ACCOUNTS,
    DEFAULT_RATE,
    DEFAULT_REJECT_RATIO,
    DEFAULT_START,
    MESSAGES_SKEW_PERCENT,
    ORDER_QTY_STEP,
    ORDER_QTY_STEPS,
)
from .order_ids import OrderIds
from .prices import tight_quotes, wide_quotes
from .symbolset import SymbolSet
from .timestamps import fix_times, message_times, parse_start

__all__ = [
    "HOT_PROBABILITY",
    "stream_rngs",
    "NbboStream",
    "OrderStream",
    "generate_nbbo",
    "generate_orders",
]

# Pony's dice(1, 100) < 80 holds for the faces 1..79.
HOT_PROBABILITY = (MESSAGES_SKEW_PERCENT - 1) / 100


def stream_rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(NBBO generator, order generator) for a seed: the ones `marketspread generate --seed` uses."""
    if seed < 0:
        raise MarketSpreadError(f"seed {seed}: a seed is a whole number >= 0")
    nbbo, orders = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(nbbo), np.random.default_rng(orders)


def _field_rngs(rng: np.random.Generator, names: tuple[str, ...]) -> dict[str, np.random.Generator]:
    entropy = [int(word) for word in rng.integers(0, 1 << 64, size=4, dtype=np.uint64)]
    children = np.random.SeedSequence(entropy).spawn(len(names))
    return {name: np.random.default_rng(child) for name, child in zip(names, children)}


def _scaled(u: np.ndarray, size) -> np.ndarray:
    """floor(u * size) for u in [0, 1); rounding could reach `size` itself, so it is capped."""
    size = np.asarray(size, dtype=np.int64)
    return np.minimum((u * size).astype(np.int64), size - 1)


def _check_share(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise MarketSpreadError(f"{name} {value} must be between 0 and 1")
    return float(value)


class _Stream:
    fields: tuple[str, ...] = ()

    def __init__(self, symbol_set: SymbolSet, rng: np.random.Generator, start: str | int, rate: int,
                 framed: bool):
        if rate <= 0:
            raise MarketSpreadError(f"rate {rate}: messages per second must be > 0")
        self.symbol_set = symbol_set
        self.start_ms = parse_start(start) if isinstance(start, str) else int(start)
        self.rate = int(rate)
        self.framed = framed
        self.position = 0  # messages generated so far
        self._rngs = _field_rngs(rng, self.fields)

    def _draw(self, count: int) -> dict[str, np.ndarray]:
        if count < 0:
            raise ValueError(f"cannot take {count} messages")
        return {name: rng.random(count) for name, rng in self._rngs.items()}

    def _times(self, count: int) -> np.ndarray:
        times = fix_times(message_times(self.start_ms, self.rate, self.position, count))
        self.position += count
        return times

    def take(self, count: int) -> np.ndarray:
        raise NotImplementedError

    def chunks(self, chunk_size: int, total: int | None = None) -> Iterator[np.ndarray]:
        """Chunks of `chunk_size` messages, endlessly, or until `total` messages have been yielded."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be > 0")
        remaining = total
        while remaining is None or remaining > 0:
            count = chunk_size if remaining is None else min(chunk_size, remaining)
            yield self.take(count)
            if remaining is not None:
                remaining -= count


class NbboStream(_Stream):
    fields = ("kind", "instrument", "bid", "narrow", "spread")

    def __init__(self, symbol_set: SymbolSet, rng: np.random.Generator, *, rejected_share: float = 0.0,
                 start: str | int = DEFAULT_START, rate: int = DEFAULT_RATE, framed: bool = True):
        super().__init__(symbol_set, rng, start, rate, framed)
        self.rejected_share = _check_share("rejected_share", rejected_share)

    def take(self, count: int) -> np.ndarray:
        u = self._draw(count)
        ss = self.symbol_set
        rejected, nonrejected = ss.rejected_index, ss.nonrejected_index
        wide = u["kind"] < self.rejected_share
        index = np.where(wide, rejected[_scaled(u["instrument"], len(rejected))],
                         nonrejected[_scaled(u["instrument"], len(nonrejected))])
        price = ss.prices[index]
        bid, offer = tight_quotes(price, u["bid"], u["spread"])
        if wide.any():
            bid[wide], offer[wide] = wide_quotes(price[wide], u["bid"][wide], u["narrow"][wide], u["spread"][wide])
        return encode_nbbos(ss.symbols[index], bid, offer, self._times(count), framed=self.framed)


class OrderStream(_Stream):
    fields = ("reject", "skew", "instrument", "quantity", "account", "side")

    def __init__(self, symbol_set: SymbolSet, rng: np.random.Generator, *,
                 reject_ratio: float = DEFAULT_REJECT_RATIO, start: str | int = DEFAULT_START,
                 rate: int = DEFAULT_RATE, framed: bool = True):
        self._order_ids = OrderIds(rng)
        super().__init__(symbol_set, rng, start, rate, framed)
        self.reject_ratio = _check_share("reject_ratio", reject_ratio)

    @property
    def expected_reject_share(self) -> float:
        """Share of orders on rejected instruments: the share of orders the job must reject."""
        return self.reject_ratio

    @property
    def expected_hot_share(self) -> float:
        """Share of orders on the first `hot_count` non-rejected instruments."""
        ss = self.symbol_set
        uniform_hit = ss.hot_count / len(ss.nonrejected_index)
        return (1 - self.reject_ratio) * (HOT_PROBABILITY + (1 - HOT_PROBABILITY) * uniform_hit)

    def take(self, count: int) -> np.ndarray:
        u = self._draw(count)
        ss = self.symbol_set
        rejected, nonrejected = ss.rejected_index, ss.nonrejected_index
        pool = np.where(u["skew"] < HOT_PROBABILITY, ss.hot_count, len(nonrejected))
        index = np.where(u["reject"] < self.reject_ratio, rejected[_scaled(u["instrument"], len(rejected))],
                         nonrejected[_scaled(u["instrument"], pool)])
        side = np.where(u["side"] < 0.5, Side.BUY, Side.SELL).astype(np.uint8)
        account = 1 + _scaled(u["account"], ACCOUNTS)
        quantity = ORDER_QTY_STEP * (1 + _scaled(u["quantity"], ORDER_QTY_STEPS))
        order_id = self._order_ids(np.arange(self.position, self.position + count))
        return encode_orders(side, account, order_id, ss.symbols[index], quantity, ss.prices[index],
                             self._times(count), framed=self.framed)


def generate_nbbo(symbol_set: SymbolSet, count: int, rng: np.random.Generator, **options) -> np.ndarray:
    """`count` NBBO wire records; `options` as for NbboStream (rejected_share, start, rate, framed)."""
    return NbboStream(symbol_set, rng, **options).take(count)


def generate_orders(symbol_set: SymbolSet, count: int, rng: np.random.Generator,
                    reject_ratio: float = DEFAULT_REJECT_RATIO, **options) -> np.ndarray:
    """`count` order wire records; `options` as for OrderStream (start, rate, framed)."""
    return OrderStream(symbol_set, rng, reject_ratio=reject_ratio, **options).take(count)
