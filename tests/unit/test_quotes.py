"""The vectorised batch step (QuoteBook.apply) is Wallaroo's one-message-at-a-time state machine.

Specified here: on any interleaving of NBBO and orders, cut into any batches with the state carried
from batch to batch, `QuoteBook.apply` emits exactly the OrderResults that the independent
`ReferenceModel` emits, in the same order, with the same quotes bit for bit, and leaves the same
per-symbol state. The generated streams use few symbols (so they collide), symbols that flip
between rejecting and accepting, orders before any NBBO, one symbol many times per batch, 1-4
character symbols and symbols with dots; the event arrays are handed over in any row order,
their `seq` alone says which event came first.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread.fixish import SEQ_RECORD_SHIFT, Nbbo, Order, Side
from marketspread.fixish.bulk import NBBO_EVENT, ORDER_EVENT
from marketspread.quotes import BookFormatError, QuoteBook
from marketspread.reference import ReferenceModel
from marketspread.rule import should_reject

from fixish_strategies import prices

# Quotes that accept (tight, crossed, 0/0 NaN, 100.05 - 100 < 0.05) and that reject (wide, ratio
# alone, exactly 0.05, 10.05 - 10 > 0.05): a symbol drawing from both flips back and forth.
ACCEPTING = [(10.0, 10.01), (10.0, 9.0), (0.0, 0.0), (100.0, 100.05), (1000.0, 1000.0)]
REJECTING = [(10.0, 10.5), (0.5, 0.53), (-0.05, 0.0), (10.0, 10.05), (1000.0, 1001.0)]
assert not any(should_reject(*q) for q in ACCEPTING) and all(should_reject(*q) for q in REJECTING)

symbol_pools = st.lists(
    st.sampled_from(["F", "NI", "TGT", "GOOG", "BF.B", "B.A", "A.", ".A", "...."])
    | st.text(alphabet="AB.Z9", min_size=1, max_size=4),
    min_size=1, max_size=4, unique=True,
)
quotes = st.sampled_from(ACCEPTING + REJECTING) | st.tuples(prices, prices)


@st.composite
def streams(draw):
    """(symbols, messages, batch sizes): an interleaved stream and how it is cut into batches."""
    pool = draw(symbol_pools)
    symbol = st.sampled_from(pool)
    messages = []
    for i in range(draw(st.integers(0, 60))):
        if draw(st.booleans()):
            bid, offer = draw(quotes)
            messages.append(Nbbo(draw(symbol), bid, offer))
        else:
            messages.append(Order(draw(st.sampled_from(list(Side))), draw(st.integers(0, 2**32 - 1)), f"{i:06d}",
                                  draw(symbol), draw(prices), draw(prices)))
    cuts = sorted(draw(st.lists(st.integers(0, len(messages)), max_size=6)))
    batches = [messages[a:b] for a, b in zip([0] + cuts, cuts + [len(messages)])]
    return pool, batches


def exact(values) -> tuple:
    """Floats by their bits, so that -0.0 and 0.0 (or two NaNs) are told apart."""
    return tuple(struct.pack(">d", v) if isinstance(v, float) else v for v in values)


def to_events(batch, rng: np.random.Generator, record_base: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch as event arrays, seq = (record, 0) in stream order, rows shuffled."""
    nbbo = [(m, i) for i, m in enumerate(batch) if isinstance(m, Nbbo)]
    orders = [(m, i) for i, m in enumerate(batch) if isinstance(m, Order)]
    nbbo_events = np.zeros(len(nbbo), NBBO_EVENT)
    for row, (m, i) in zip(nbbo_events, nbbo):
        row["seq"], row["symbol"], row["bid_px"], row["offer_px"] = \
            (record_base + i) << SEQ_RECORD_SHIFT, m.symbol.encode().rjust(4), m.bid_px, m.offer_px
    order_events = np.zeros(len(orders), ORDER_EVENT)
    for row, (m, i) in zip(order_events, orders):
        row["seq"], row["side"], row["account"], row["order_id"], row["symbol"] = \
            (record_base + i) << SEQ_RECORD_SHIFT, m.side, m.account, m.order_id.encode(), m.symbol.encode().rjust(4)
        row["order_qty"], row["price"] = m.order_qty, m.price
    return nbbo_events[rng.permutation(len(nbbo_events))], order_events[rng.permutation(len(order_events))]


def step_results(step) -> list[tuple]:
    return [exact((Side(int(r["side"])), int(r["account"]), bytes(r["order_id"]).decode(),
                   bytes(r["symbol"]).decode().lstrip(), float(r["order_qty"]), float(r["price"]), float(bid),
                   float(offer)))
            for r, bid, offer in zip(step.rejected, step.bid, step.offer)]


def book_state(book: QuoteBook) -> dict:
    return {bytes(s).decode().lstrip(): exact((bool(r), float(b), float(o)))
            for s, r, b, o in zip(book.symbols, book.should_reject, book.bid, book.offer)}


def model_state(model: ReferenceModel) -> dict:
    return {symbol: exact((q.should_reject, q.bid, q.offer)) for symbol, q in model.quotes.items()}


@settings(max_examples=400, deadline=None)
@given(streams(), st.integers(0, 2**32 - 1))
def test_apply_over_any_batches_emits_exactly_what_the_reference_model_emits(stream, seed):
    _, batches = stream
    rng = np.random.default_rng(seed)
    model, book = ReferenceModel(), QuoteBook.empty()
    record_base = 0
    for batch in batches:
        expected = [exact(r.identity()) for r in model.feed(batch)]
        step = book.apply(*to_events(batch, rng, record_base))
        assert step_results(step) == expected
        book = step.book
        assert book_state(book) == model_state(model)
        assert list(book.symbols) == sorted(book.symbols)
        record_base += len(batch) + int(rng.integers(0, 3))


def test_an_order_is_judged_by_the_latest_nbbo_before_it_in_the_same_batch():
    batch = [Order(Side.BUY, 1, "000001", "NI", 1.0, 1.0),        # never quoted: rejected at 0/0
             Nbbo("NI", 10.0, 10.5),                                # rejects
             Order(Side.BUY, 1, "000002", "NI", 1.0, 1.0),        # rejected at 10.0/10.5
             Nbbo("NI", 10.0, 10.01),                               # accepts
             Order(Side.SELL, 2, "000003", "NI", 1.0, 1.0),       # accepted
             Nbbo("NI", 0.5, 0.53),                                 # rejects on the ratio
             Order(Side.SELL, 3, "000004", "NI", 1.0, 1.0)]       # rejected at 0.5/0.53
    step = QuoteBook.empty().apply(*to_events(batch, np.random.default_rng(1), 0))
    assert step_results(step) == [
        exact((Side.BUY, 1, "000001", "NI", 1.0, 1.0, 0.0, 0.0)),
        exact((Side.BUY, 1, "000002", "NI", 1.0, 1.0, 10.0, 10.5)),
        exact((Side.SELL, 3, "000004", "NI", 1.0, 1.0, 0.5, 0.53)),
    ]
    assert book_state(step.book) == {"NI": exact((True, 0.5, 0.53))}


def test_the_state_of_an_earlier_batch_judges_the_orders_of_a_later_one():
    first = QuoteBook.empty().apply(*to_events([Nbbo("BF.B", 20.0, 21.0), Nbbo("F", 9.0, 9.01)],
                                               np.random.default_rng(2), 0))
    assert len(first.rejected) == 0
    second = first.book.apply(*to_events([Order(Side.BUY, 7, "abcdef", "BF.B", 5.0, 20.5),
                                          Order(Side.BUY, 7, "abcdeg", "F", 5.0, 9.0),
                                          Order(Side.BUY, 7, "abcdeh", "X", 5.0, 9.0)],
                                         np.random.default_rng(3), 10))
    assert step_results(second) == [exact((Side.BUY, 7, "abcdef", "BF.B", 5.0, 20.5, 20.0, 21.0)),
                                    exact((Side.BUY, 7, "abcdeh", "X", 5.0, 9.0, 0.0, 0.0))]
    # Wallaroo creates state on demand for any symbol, orders included.
    assert book_state(second.book) == {"BF.B": exact((True, 20.0, 21.0)), "F": exact((False, 9.0, 9.01)),
                                       "X": exact((True, 0.0, 0.0))}


def test_an_empty_batch_changes_nothing():
    book = QuoteBook.from_columns([b"  NI", b"   F"], [True, False], [1.0, 2.0], [1.5, 2.01])
    step = book.apply(np.empty(0, NBBO_EVENT), np.empty(0, ORDER_EVENT))
    assert len(step.rejected) == 0
    assert book_state(step.book) == book_state(book) == {"NI": exact((True, 1.0, 1.5)), "F": exact((False, 2.0, 2.01))}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=4), min_size=1, max_size=30, unique_by=lambda b: b.rstrip(b"\0")),
       st.lists(st.binary(min_size=0, max_size=4), max_size=30))
def test_the_book_orders_and_finds_symbols_of_any_bytes_as_numpy_orders_them(known, asked):
    """The book works on integer codes of its symbols; they must order and match exactly as S4 does,
    short (NUL-filled) and unprintable symbols included."""
    book = QuoteBook.from_columns(known, [False] * len(known), np.arange(len(known), dtype=float),
                                  np.arange(len(known), dtype=float))
    after = book.apply(np.empty(0, NBBO_EVENT), np.empty(0, ORDER_EVENT)).book
    as_s4 = np.array(known, dtype="S4")
    assert after.symbols.tolist() == sorted(set(as_s4.tolist()))
    reject, bid, _ = after.lookup(np.array(asked, dtype="S4"))
    where = {s: i for i, s in enumerate(as_s4.tolist())}
    assert bid.tolist() == [float(where[s]) if s in where else 0.0 for s in np.array(asked, dtype="S4").tolist()]
    # A symbol not in the book has the initial quote: rejecting, 0/0.
    assert reject.tolist() == [s not in where for s in np.array(asked, dtype="S4").tolist()]


# --- the book as bytes (the job's state value) -------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.booleans(),
                          st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True)),
                max_size=40, unique_by=lambda row: row[0].rstrip(b"\0")))
def test_the_book_survives_a_round_trip_through_its_bytes_bit_for_bit(rows):
    book = QuoteBook.from_columns([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                                  [r[3] for r in rows])
    back = QuoteBook.from_bytes(book.to_bytes())
    assert back.symbols.dtype == np.dtype("S4") and back.should_reject.dtype == bool
    assert back.symbols.tolist() == book.symbols.tolist()
    assert back.should_reject.tolist() == book.should_reject.tolist()
    # NaN and -0.0 quotes included: bit patterns, not values, are compared.
    assert back.bid.tobytes() == book.bid.tobytes() and back.offer.tobytes() == book.offer.tobytes()


def test_an_empty_book_is_its_format_tag_alone():
    assert QuoteBook.from_bytes(QuoteBook.empty().to_bytes()).symbols.tolist() == []
    assert len(QuoteBook.empty().to_bytes()) == 4


def test_the_book_takes_a_bytearray_or_memoryview_as_spark_may_hand_one_over():
    book = QuoteBook.from_columns([b"  NI"], [True], [10.0], [10.5])
    for data in (bytearray(book.to_bytes()), memoryview(book.to_bytes())):
        assert QuoteBook.from_bytes(data).bid.tolist() == [10.0]


@pytest.mark.parametrize("data", [b"", b"QB1", b"QB2\0" + bytes(21), b"QB1\0" + bytes(20),
                                  # the other operator's state: an array of symbols, not a book
                                  b"\x01\x00\x00\x00  NI"])
def test_bytes_that_are_not_a_book_in_this_format_raise_a_clear_error(data):
    with pytest.raises(BookFormatError, match="not a quote book in format QB1"):
        QuoteBook.from_bytes(data)
