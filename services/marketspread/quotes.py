"""Per-symbol state and the Market Spread step, applied to a whole batch of events at once.

A `QuoteBook` holds, for each symbol seen, the latest quote (`rule.Quote`): sorted symbol
array plus one column per field, so that a batch of thousands of events is a handful of numpy
operations rather than a Python loop. `QuoteBook.apply` has the semantics of processing the
batch's events one by one in `seq` order: every order is judged by the latest NBBO of its
symbol that precedes it, in this batch or (failing that) in the book.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import MarketSpreadError
from .fixish.bulk import NBBO_EVENT, ORDER_EVENT
from .rule import INITIAL_QUOTE, should_reject_many

__all__ = ["QuoteBook", "StepResult", "BookFormatError"]

_SYMBOL = np.dtype("S4")
# An S4 value is four bytes (NUL-filled when shorter), and numpy orders S4 as it orders those bytes,
# so their big-endian uint32 sorts exactly alike: unique and searchsorted on the codes are integer
# work, several times faster than on S4 (see tests/unit/test_quotes.py for the round trip).
_CODE = np.dtype(">u4")


# The book as bytes (a Spark state value): a format tag, then one little-endian row per symbol.
# The tag makes a checkpoint written in another layout fail loudly instead of being misread.
_BOOK_TAG = b"QB1\x00"
_BOOK_ROW = np.dtype([("symbol", _SYMBOL), ("should_reject", "?"), ("bid", "<f8"), ("offer", "<f8")])


class BookFormatError(MarketSpreadError, ValueError):
    pass


def _codes(symbols: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(symbols, dtype=_SYMBOL).view(_CODE).astype(np.uint32)


def _symbols(codes: np.ndarray) -> np.ndarray:
    return codes.astype(_CODE).view(_SYMBOL)


@dataclass(frozen=True, slots=True)
class StepResult:
    rejected: np.ndarray  # ORDER_EVENT rows of the orders to withdraw, in seq order
    bid: np.ndarray  # the quote each was judged by
    offer: np.ndarray
    book: "QuoteBook"  # the state after the batch


@dataclass(frozen=True, slots=True)
class QuoteBook:
    symbols: np.ndarray  # S4, padded, strictly ascending
    should_reject: np.ndarray  # bool
    bid: np.ndarray  # float64
    offer: np.ndarray  # float64

    @classmethod
    def empty(cls) -> "QuoteBook":
        return cls(np.empty(0, _SYMBOL), np.empty(0, bool), np.empty(0, np.float64), np.empty(0, np.float64))

    @classmethod
    def from_columns(cls, symbols, should_reject, bid, offer) -> "QuoteBook":
        symbols = np.asarray(symbols, dtype=_SYMBOL)
        order = np.argsort(symbols, kind="stable")
        return cls(symbols[order], np.asarray(should_reject, bool)[order], np.asarray(bid, np.float64)[order],
                   np.asarray(offer, np.float64)[order])

    def __len__(self) -> int:
        return len(self.symbols)

    def to_bytes(self) -> bytes:
        rows = np.empty(len(self), _BOOK_ROW)
        rows["symbol"], rows["should_reject"], rows["bid"], rows["offer"] = (self.symbols, self.should_reject,
                                                                             self.bid, self.offer)
        return _BOOK_TAG + rows.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "QuoteBook":
        body = memoryview(data)[len(_BOOK_TAG):]
        if bytes(data[:len(_BOOK_TAG)]) != _BOOK_TAG or len(body) % _BOOK_ROW.itemsize:
            raise BookFormatError(f"not a quote book in format {_BOOK_TAG[:3].decode()} ({len(data)} bytes starting "
                                  f"{bytes(data[:8])!r}): was this state written by another version of the job?")
        rows = np.frombuffer(body, _BOOK_ROW)
        return cls(rows["symbol"].copy(), rows["should_reject"].copy(), rows["bid"].copy(), rows["offer"].copy())

    def lookup(self, symbols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(should_reject, bid, offer) for each symbol; a symbol not in the book has the initial quote."""
        return self._lookup(_codes(self.symbols), _codes(symbols))

    def _lookup(self, book: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`lookup` on codes; `book` is the codes of this book's symbols."""
        reject = np.full(len(codes), INITIAL_QUOTE.should_reject)
        bid = np.full(len(codes), INITIAL_QUOTE.bid)
        offer = np.full(len(codes), INITIAL_QUOTE.offer)
        if len(book):
            at = np.minimum(np.searchsorted(book, codes), len(book) - 1)
            known = book[at] == codes
            reject[known], bid[known], offer[known] = self.should_reject[at[known]], self.bid[at[known]], \
                self.offer[at[known]]
        return reject, bid, offer

    def apply(self, nbbo: np.ndarray, orders: np.ndarray) -> StepResult:
        assert nbbo.dtype == NBBO_EVENT and orders.dtype == ORDER_EVENT
        n_quotes, n = len(nbbo), len(nbbo) + len(orders)
        nbbo_reject = should_reject_many(nbbo["bid_px"], nbbo["offer_px"])

        # Dense symbol ids and dense ranks in seq order make one int64 sort key per event:
        # (symbol, position). The latest NBBO before an order is then one searchsorted away.
        codes = np.concatenate([_codes(nbbo["symbol"]), _codes(orders["symbol"])])
        batch_codes, ids = np.unique(codes, return_inverse=True)
        rank = np.empty(n, np.int64)
        rank[np.argsort(np.concatenate([nbbo["seq"], orders["seq"]]), kind="stable")] = np.arange(n)
        key = ids.astype(np.int64) * max(n, 1) + rank
        quote_key, order_key = key[:n_quotes], key[n_quotes:]
        by_key = np.argsort(quote_key)
        sorted_quote_key = quote_key[by_key]

        before = np.searchsorted(sorted_quote_key, order_key) - 1
        candidate = by_key[np.maximum(before, 0)] if n_quotes else np.zeros(len(orders), np.int64)
        in_batch = (before >= 0) & (ids[:n_quotes][candidate] == ids[n_quotes:]) if n_quotes else \
            np.zeros(len(orders), bool)

        book = _codes(self.symbols)
        reject, bid, offer = self._lookup(book, codes[n_quotes:])
        hit = candidate[in_batch]
        reject[in_batch], bid[in_batch], offer[in_batch] = nbbo_reject[hit], nbbo["bid_px"][hit], \
            nbbo["offer_px"][hit]

        # Emitted in seq order, whatever the row order of `orders`.
        emitted = np.flatnonzero(reject)
        emitted = emitted[np.argsort(orders["seq"][emitted], kind="stable")]
        return StepResult(orders[emitted], bid[emitted], offer[emitted], self._updated(
            book, batch_codes, nbbo, nbbo_reject, ids[:n_quotes][by_key], by_key))

    def _updated(self, book: np.ndarray, batch_codes: np.ndarray, nbbo: np.ndarray, nbbo_reject: np.ndarray,
                 sorted_quote_ids: np.ndarray, by_key: np.ndarray) -> "QuoteBook":
        # Every symbol seen gets state (Wallaroo creates it on demand, orders included);
        # a symbol quoted in this batch takes its last NBBO.
        codes = np.union1d(book, batch_codes)
        reject, bid, offer = self._lookup(book, codes)
        if len(nbbo):
            last = np.flatnonzero(np.append(sorted_quote_ids[1:] != sorted_quote_ids[:-1], True))
            latest = by_key[last]
            at = np.searchsorted(codes, batch_codes[sorted_quote_ids[last]])
            reject[at], bid[at], offer[at] = nbbo_reject[latest], nbbo["bid_px"][latest], nbbo["offer_px"][latest]
        return QuoteBook(_symbols(codes), reject, bid, offer)
