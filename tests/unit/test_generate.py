"""`marketspread generate`: seeded streams in the distributions of Wallaroo's fix_generator.

Statistical checks use fixed seeds and bounds of five standard deviations: they are
deterministic, and they would catch a distribution that is off by far less than the bound.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
import time
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketspread import cli
from marketspread.fixish import NBBO, ORDER, decode, decode_records, encode, frame, split_fixed, split_frames
from marketspread.generate import (
    NbboStream,
    OrderStream,
    generate_nbbo,
    generate_orders,
    initial_nbbo,
    load_symbol_set,
    stream_rngs,
    synthetic_symbol_set,
)
from marketspread.generate.cli import parse_ratio
from marketspread.generate.defaults import DATA_DIR_ENV, DEFAULT_REJECT_RATIO
from marketspread.generate.mixing import KeyedPermutation
from marketspread.generate.order_ids import ALPHABET, ID_SPACE, OrderIds
from marketspread.generate.prices import tight_quotes, wide_quotes
from marketspread.generate.streams import HOT_PROBABILITY
from marketspread.generate.synthetic import MAX_SYNTHETIC
from marketspread.generate.timestamps import fix_times
from marketspread.quotes import QuoteBook
from marketspread.rule import should_reject, should_reject_many

SET_SIZES = {"350": 350, "700": 700, "1400": 1400, "2100": 2100, "r3k": 2926}
WALLAROO_REJECTED = ["INSM", "PPHM", "NYCB", "NFX", "TMO", "TGT", "GOOG", "SIAL", "GPS", "MYGN", "MDRX", "TTPH",
                     "NI", "IVR", "SLH"]


def padded(tickers) -> list[bytes]:
    return [t.encode().rjust(4) for t in tickers]


def within_sigmas(observed: float, n: int, p: float, sigmas: float = 5.0) -> bool:
    """Is a count (or share * n) within `sigmas` binomial standard deviations of n * p?"""
    return abs(observed - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1e-9


def csv_tickers(path) -> list[str]:
    with path.open(newline="") as lines:
        return [row["_ticker"] for row in csv.DictReader(lines)]


def csv_prices(path) -> dict[str, float]:
    with path.open(newline="") as lines:
        return {row["_ticker"]: float(row["_price"]) for row in csv.DictReader(lines)}


@pytest.fixture(scope="module")
def set350(wallaroo_data):
    return load_symbol_set("350", wallaroo_data)


@pytest.fixture
def generate_only(monkeypatch):
    """`marketspread.cli.main` with only the generate command registered.

    These tests are about `generate`; the other commands' modules (sender, job, ...) need not be
    importable for them.
    """
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("marketspread.generate.cli",))
    return cli.main


# --- Wallaroo's data files: what the loader relies on --------------------------------------------


@pytest.mark.parametrize("name", SET_SIZES)
def test_each_wallaroo_set_rejects_exactly_the_15_instruments_of_rejected_instruments_csv_first(name, wallaroo_data):
    symbol_set = load_symbol_set(name, wallaroo_data)
    assert len(symbol_set) == SET_SIZES[name]
    assert csv_tickers(wallaroo_data / "rejected_instruments.csv") == WALLAROO_REJECTED
    assert symbol_set.rejecting_symbols.tolist() == padded(WALLAROO_REJECTED)
    assert symbol_set.rejected_index.tolist() == list(range(15))


@pytest.mark.parametrize("name", SET_SIZES)
def test_the_rejected_mask_is_what_the_rule_says_of_each_initial_nbbo(name, wallaroo_data):
    symbol_set = load_symbol_set(name, wallaroo_data)
    quotes = [decode(payload) for payload in split_frames(initial_nbbo(symbol_set))]
    assert [q.symbol.encode().rjust(4) for q in quotes] == symbol_set.symbols.tolist()
    assert [should_reject(q.bid_px, q.offer_px) for q in quotes] == symbol_set.rejected.tolist()


@pytest.mark.parametrize("name", SET_SIZES)
def test_non_rejected_initial_nbbos_of_wallaroos_files_have_a_zero_spread(name, wallaroo_data):
    batch = decode_records([initial_nbbo(load_symbol_set(name, wallaroo_data))], framed=True)
    quotes = batch.nbbo[15:]
    assert not batch.failures
    assert (quotes["offer_px"] == quotes["bid_px"]).all()


@pytest.mark.parametrize("name", SET_SIZES)
def test_the_initial_nbbo_of_a_wallaroo_set_is_its_file_byte_for_byte(name, wallaroo_data):
    expected = (wallaroo_data / f"{name}-symbols_initial-nbbo-fixish.msg").read_bytes()
    assert initial_nbbo(load_symbol_set(name, wallaroo_data)) == expected


def test_the_350_set_is_priced_by_all_instruments_csv_in_rejected_then_nonrejected_order(set350, wallaroo_data):
    prices = csv_prices(wallaroo_data / "all_instruments.csv")
    order = csv_tickers(wallaroo_data / "rejected_instruments.csv") + \
        csv_tickers(wallaroo_data / "nonrejected_instruments.csv")
    assert set350.symbols.tolist() == padded(order)
    assert set350.prices.tolist() == [prices[t] for t in order]
    # Wallaroo's initial bids are price + U[0, 1) for the instruments that do not reject.
    bids = decode_records([set350.initial], framed=True).nbbo["bid_px"][15:]
    assert ((bids - set350.prices[15:] >= 0) & (bids - set350.prices[15:] < 1)).all()


@pytest.mark.parametrize("name", ["700", "1400", "2100", "r3k"])
def test_larger_sets_are_priced_by_their_initial_bids(name, wallaroo_data):
    symbol_set = load_symbol_set(name, wallaroo_data)
    bids = decode_records([symbol_set.initial], framed=True).nbbo["bid_px"]
    assert symbol_set.prices.tolist() == bids.tolist()


def test_each_larger_set_begins_with_the_next_smaller_except_that_700_lacks_29_of_the_350(wallaroo_data):
    sets = {name: load_symbol_set(name, wallaroo_data).symbols.tolist() for name in SET_SIZES}
    assert sets["1400"][:700] == sets["700"]
    assert sets["2100"][:1400] == sets["1400"]
    assert sets["r3k"][:2100] == sets["2100"]
    assert len(set(sets["350"]) - set(sets["700"])) == 29
    assert set(sets["350"]) <= set(sets["2100"])


def test_missing_data_files_are_a_clear_error_naming_the_environment_variable(tmp_path, monkeypatch):
    from marketspread.errors import MarketSpreadError

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(MarketSpreadError, match=DATA_DIR_ENV) as raised:
        load_symbol_set("350")
    assert "synthetic:N" in str(raised.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MarketSpreadError, match="700-symbols_initial-nbbo-fixish.msg does not exist"):
        load_symbol_set("700", tmp_path / "empty")


def test_unknown_symbol_set_names_are_refused_with_the_choices():
    from marketspread.errors import MarketSpreadError

    with pytest.raises(MarketSpreadError, match="350, 700, 1400, 2100, r3k"):
        load_symbol_set("351")
    for name in ("synthetic:1", "synthetic:x", f"synthetic:{MAX_SYNTHETIC + 1}"):
        with pytest.raises(MarketSpreadError, match="synthetic:N"):
            load_symbol_set(name)


# --- Synthetic sets -----------------------------------------------------------------------------


def test_a_synthetic_set_needs_no_data_files_and_is_the_same_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    first, again = load_symbol_set("synthetic:350"), load_symbol_set("synthetic:350", tmp_path / "nowhere")
    assert first.symbols.tolist() == again.symbols.tolist()
    assert first.prices.tolist() == again.prices.tolist()
    assert initial_nbbo(first) == initial_nbbo(again)
    # Wallaroo's proportion: 15 rejecting instruments of 350, the first ones.
    assert first.rejected_index.tolist() == list(range(15))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5000))
def test_any_synthetic_set_has_unique_padded_symbols_and_prices_that_cannot_reject_on_the_ratio(count):
    symbol_set = synthetic_symbol_set(count)
    assert len(symbol_set) == count
    assert len(set(symbol_set.symbols.tolist())) == count
    assert all(s.lstrip(b" ").isalpha() and s.lstrip(b" ").isupper() for s in symbol_set.symbols.tolist())
    assert 1 <= symbol_set.rejected.sum() < count
    assert (symbol_set.prices >= 1.0).all() and (symbol_set.prices <= 500.0).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5000))
def test_the_generated_initial_nbbo_of_a_synthetic_set_rejects_exactly_its_rejected_instruments(count):
    symbol_set = synthetic_symbol_set(count)
    batch = decode_records([initial_nbbo(symbol_set)], framed=True)
    assert not batch.failures and len(batch.nbbo) == count
    assert batch.nbbo["symbol"].tolist() == symbol_set.symbols.tolist()
    assert should_reject_many(batch.nbbo["bid_px"], batch.nbbo["offer_px"]).tolist() == symbol_set.rejected.tolist()


def test_a_smaller_synthetic_set_is_a_prefix_of_a_larger_one():
    small, large = synthetic_symbol_set(100), synthetic_symbol_set(1000)
    assert large.symbols[:100].tolist() == small.symbols.tolist()
    assert large.prices[:100].tolist() == small.prices.tolist()


# --- Quote formulas -----------------------------------------------------------------------------

unit = st.floats(0.0, 1.0, exclude_max=True)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1e6), unit, unit)
def test_tight_quotes_never_reject_at_any_price(price, u_bid, u_spread):
    bid, offer = tight_quotes(np.array([price]), np.array([u_bid]), np.array([u_spread]))
    assert not should_reject(bid[0], offer[0])
    assert bid[0] == price + u_bid
    assert offer[0] >= bid[0]


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1e6), unit, unit, unit)
def test_wide_quotes_always_reject_at_any_price(price, u_bid, u_narrow, u_spread):
    bid, offer = wide_quotes(np.array([price]), np.array([u_bid]), np.array([u_narrow]), np.array([u_spread]))
    assert should_reject(bid[0], offer[0])
    # Wallaroo's 5 to 8 cents, give or take rounding (which only matters where the ratio rejects anyway).
    assert 0.05 - 1e-9 <= offer[0] - bid[0] <= 0.08 + 1e-6


def test_cheap_instruments_get_a_narrower_spread_where_wallaroos_formula_would_reject():
    # SD trades at 0.28: 3 cents over a bid of 0.30 is a 10% spread.
    bid, offer = tight_quotes(np.array([0.28, 0.28, 50.0]), np.array([0.02, 0.02, 0.02]), np.array([0.99, 0.0, 0.99]))
    assert offer.tolist() == [bid[0] + 0.01, bid[1], bid[2] + 0.03]


# --- Streams ------------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_streams_and_another_seed_different_ones(set350):
    def streams(seed):
        nbbo_rng, orders_rng = stream_rngs(seed)
        return generate_nbbo(set350, 5000, nbbo_rng).tobytes(), generate_orders(set350, 5000, orders_rng).tobytes()

    assert streams(7) == streams(7)
    other = streams(8)
    assert other[0] != streams(7)[0] and other[1] != streams(7)[1]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 700), min_size=1, max_size=6), st.integers(0, 2**32))
def test_chunking_never_changes_a_stream(set350, sizes, seed):
    def streams():
        nbbo_rng, orders_rng = stream_rngs(seed)
        return (NbboStream(set350, nbbo_rng, rejected_share=0.2, rate=1000),
                OrderStream(set350, orders_rng, reject_ratio=0.1, rate=1000))

    (nbbo, orders), (whole_nbbo, whole_orders) = streams(), streams()
    assert b"".join(nbbo.take(n).tobytes() for n in sizes) == whole_nbbo.take(sum(sizes)).tobytes()
    assert b"".join(orders.take(n).tobytes() for n in sizes) == whole_orders.take(sum(sizes)).tobytes()


def test_chunks_yield_the_total_asked_for_or_go_on_for_ever(set350):
    stream = OrderStream(set350, stream_rngs(1)[1])
    assert [len(c) for c in stream.chunks(400, total=1000)] == [400, 400, 200]
    endless = stream.chunks(250)
    assert [len(next(endless)) for _ in range(50)] == [250] * 50
    assert stream.position == 1000 + 50 * 250


@pytest.mark.parametrize("framed", [True, False])
def test_every_generated_message_decodes_with_the_shared_codec(set350, framed):
    nbbo_rng, orders_rng = stream_rngs(3)
    nbbo = generate_nbbo(set350, 20_000, nbbo_rng, rejected_share=0.1, framed=framed)
    orders = generate_orders(set350, 20_000, orders_rng, reject_ratio=0.1, framed=framed)
    values = [nbbo.tobytes(), orders.tobytes()] if framed else \
        split_fixed(nbbo.tobytes(), NBBO.size) + split_fixed(orders.tobytes(), ORDER.size)
    batch = decode_records(values, framed=framed)
    assert batch.failures == []
    assert (len(batch.nbbo), len(batch.orders)) == (20_000, 20_000)
    # Byte for byte what the one-message codec writes for the same message.
    for record in list(nbbo[:300]) + list(orders[:300]):
        raw = record.tobytes()
        payload = raw[4:] if framed else raw
        assert (frame(encode(decode(payload))) if framed else encode(decode(payload))) == raw


def test_nbbo_quote_every_non_rejected_instrument_and_none_rejects(set350):
    nbbo = generate_nbbo(set350, 100_000, stream_rngs(4)[0])
    assert set(nbbo["symbol"].tolist()) == set(set350.symbols[~set350.rejected].tolist())
    assert not should_reject_many(nbbo["bid_px"].astype(float), nbbo["offer_px"].astype(float)).any()


def test_nbbo_bids_are_the_reference_price_plus_less_than_one(set350):
    nbbo = generate_nbbo(set350, 50_000, stream_rngs(5)[0])
    price = dict(zip(set350.symbols.tolist(), set350.prices.tolist()))
    above = nbbo["bid_px"].astype(float) - np.array([price[s] for s in nbbo["symbol"].tolist()])
    assert (above >= 0).all() and (above < 1).all()
    assert within_sigmas((above < 0.5).sum(), len(above), 0.5)


def test_nbbo_spreads_are_0_to_3_cents_in_equal_shares_except_where_that_would_reject(set350):
    nbbo = generate_nbbo(set350, 200_000, stream_rngs(6)[0])
    cents = np.round((nbbo["offer_px"].astype(float) - nbbo["bid_px"].astype(float)) * 100).astype(int)
    # SD (0.28) and MHR (0.36) are the only instruments cheap enough for 2 or 3 cents to reject.
    cheap = np.isin(nbbo["symbol"], padded(["SD", "MHR"]))
    for k in (0, 1, 2, 3):
        assert within_sigmas((cents[~cheap] == k).sum(), (~cheap).sum(), 0.25)
    assert set(cents[cheap].tolist()) == {0, 1, 2, 3}
    assert (cents[cheap] >= 2).mean() < 0.5


def test_nbbo_for_rejected_instruments_keep_them_rejecting(set350):
    nbbo = generate_nbbo(set350, 100_000, stream_rngs(7)[0], rejected_share=0.3)
    on_rejected = np.isin(nbbo["symbol"], set350.rejecting_symbols)
    verdict = should_reject_many(nbbo["bid_px"].astype(float), nbbo["offer_px"].astype(float))
    assert within_sigmas(on_rejected.sum(), len(nbbo), 0.3)
    assert (verdict == on_rejected).all()


@pytest.mark.parametrize("ratio, count", [(DEFAULT_REJECT_RATIO, 2_100_000), (0.01, 200_000), (0.25, 100_000)])
def test_the_share_of_orders_on_rejected_instruments_is_the_reject_ratio(set350, ratio, count):
    orders = generate_orders(set350, count, stream_rngs(8)[1], reject_ratio=ratio)
    on_rejected = np.isin(orders["symbol"], set350.rejecting_symbols).sum()
    assert on_rejected > 0
    assert within_sigmas(on_rejected, count, ratio)


def test_orders_for_rejected_instruments_are_spread_evenly_over_them(set350):
    orders = generate_orders(set350, 150_000, stream_rngs(9)[1], reject_ratio=1.0)
    symbols, counts = np.unique(orders["symbol"], return_counts=True)
    assert sorted(symbols.tolist()) == sorted(set350.rejecting_symbols.tolist())
    assert all(within_sigmas(c, len(orders), 1 / 15) for c in counts)


def test_orders_are_skewed_to_the_first_20_percent_of_non_rejected_instruments_as_wallaroo_did(set350):
    stream = OrderStream(set350, stream_rngs(10)[1], reject_ratio=0.0)
    orders = stream.take(300_000)
    nonrejected = set350.symbols[set350.nonrejected_index]
    hot, cold = nonrejected[:67], nonrejected[67:]
    assert set350.hot_count == 67 == 335 * 20 // 100
    # Wallaroo: 79% to the first 67, the other 21% uniformly over all 335.
    assert HOT_PROBABILITY == 0.79
    assert stream.expected_hot_share == pytest.approx(0.79 + 0.21 * 67 / 335)
    assert within_sigmas(np.isin(orders["symbol"], hot).sum(), len(orders), stream.expected_hot_share)
    symbols, counts = np.unique(orders["symbol"], return_counts=True)
    per_symbol = dict(zip(symbols.tolist(), counts.tolist()))
    assert min(per_symbol[s] for s in hot.tolist()) > 4 * max(per_symbol[s] for s in cold.tolist())
    assert set(per_symbol) == set(nonrejected.tolist())


def test_quantities_accounts_and_sides_cover_wallaroos_ranges(set350):
    orders = generate_orders(set350, 200_000, stream_rngs(11)[1])
    assert sorted(set(orders["order_qty"].tolist())) == [10.0 * k for k in range(1, 66)]
    assert sorted(set(orders["account"].tolist())) == list(range(1, 301))
    assert set(orders["side"].tolist()) == {1, 2}
    assert within_sigmas((orders["side"] == 1).sum(), len(orders), 0.5)


def test_orders_carry_their_instruments_reference_price(set350):
    orders = generate_orders(set350, 20_000, stream_rngs(12)[1], reject_ratio=0.1)
    price = dict(zip(set350.symbols.tolist(), set350.prices.tolist()))
    assert orders["price"].tolist() == [price[s] for s in orders["symbol"].tolist()]


def test_order_ids_are_unique_six_alphanumerics_in_a_million_orders(set350):
    orders = generate_orders(set350, 1_000_000, stream_rngs(13)[1])
    ids = orders["order_id"]
    assert len(np.unique(ids)) == len(ids)
    raw = np.frombuffer(ids.tobytes(), dtype=np.uint8)
    assert np.isin(raw, np.frombuffer(ALPHABET, dtype=np.uint8)).all()
    assert len(set(raw.tolist())) == 62


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, ID_SPACE - 1), min_size=2, max_size=200, unique=True), st.integers(0, 2**32))
def test_order_ids_of_distinct_positions_are_distinct_whatever_the_seed(positions, seed):
    ids = OrderIds(np.random.default_rng(seed))(np.array(positions))
    assert len(set(ids.tolist())) == len(positions)
    assert all(len(i) == 6 for i in ids.tolist())


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 5000), st.integers(0, 2**32))
def test_a_keyed_permutation_maps_its_domain_onto_itself(size, seed):
    keys = np.random.default_rng(seed).integers(0, 1 << 64, size=(3, 2), dtype=np.uint64)
    image = KeyedPermutation(size, keys)(np.arange(size))
    assert sorted(image.tolist()) == list(range(size))


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_transact_times_are_fix_utc_text(when):
    when = when.replace(microsecond=when.microsecond // 1000 * 1000, tzinfo=timezone.utc)
    ms = round(when.timestamp() * 1000)
    assert fix_times(np.array([ms])).tolist() == [when.strftime("%Y%m%d-%H:%M:%S.%f")[:-3].encode()]


def test_transact_time_advances_with_the_rate_from_the_start(set350):
    stream = OrderStream(set350, stream_rngs(14)[1], start="2020-01-02T03:04:05Z", rate=1000)
    times = stream.take(2001)["transact_time"].tolist()
    assert (times[0], times[1], times[1000], times[2000]) == (
        b"20200102-03:04:05.000", b"20200102-03:04:05.001", b"20200102-03:04:06.000", b"20200102-03:04:07.000")


def test_a_run_must_reject_exactly_its_orders_on_rejected_instruments_with_their_latest_quote(set350):
    nbbo_rng, orders_rng = stream_rngs(15)
    nbbo = generate_nbbo(set350, 30_000, nbbo_rng, rejected_share=0.01)
    orders = generate_orders(set350, 30_000, orders_rng, reject_ratio=0.02)
    batch = decode_records([initial_nbbo(set350), nbbo.tobytes(), orders.tobytes()], framed=True)
    assert not batch.failures
    step = QuoteBook.empty().apply(batch.nbbo, batch.orders)
    on_rejected = np.isin(batch.orders["symbol"], set350.rejecting_symbols)
    assert step.rejected["order_id"].tolist() == batch.orders["order_id"][on_rejected].tolist()
    # Each carries the last quote of its symbol: the stream's, else the initial one.
    latest = {}
    for symbol, bid, offer in zip(batch.nbbo["symbol"].tolist(), batch.nbbo["bid_px"].tolist(),
                                  batch.nbbo["offer_px"].tolist()):
        latest[symbol] = (bid, offer)
    assert list(zip(step.bid.tolist(), step.offer.tolist())) == [latest[s] for s in step.rejected["symbol"].tolist()]


def test_a_million_orders_and_a_million_nbbo_take_seconds_not_minutes(set350):
    nbbo_rng, orders_rng = stream_rngs(16)
    began = time.perf_counter()
    generate_nbbo(set350, 1_000_000, nbbo_rng)
    generate_orders(set350, 1_000_000, orders_rng)
    assert time.perf_counter() - began < 10  # about 0.5 s on one idle core


# --- The command ------------------------------------------------------------------------------


def test_the_command_writes_the_three_framed_files_and_a_line_for_each(generate_only, wallaroo_data, tmp_path,
                                                                       capsys):
    out = tmp_path / "out"
    code = generate_only(["generate", "--symbols", "350", "--nbbo", "3000", "--orders", "2000", "--seed", "5",
                          "--reject-ratio", "5/1000", "--data-dir", str(wallaroo_data), "--out", str(out)])
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["initial-nbbo.msg", "nbbo.msg", "orders.msg"]
    wallaroo_initial = (wallaroo_data / "350-symbols_initial-nbbo-fixish.msg").read_bytes()
    assert (out / "initial-nbbo.msg").read_bytes() == wallaroo_initial
    batch = decode_records([(out / "nbbo.msg").read_bytes(), (out / "orders.msg").read_bytes()], framed=True)
    assert batch.failures == [] and (len(batch.nbbo), len(batch.orders)) == (3000, 2000)
    assert (out / "nbbo.msg").stat().st_size == 3000 * 46 and (out / "orders.msg").stat().st_size == 2000 * 57
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{out / 'initial-nbbo.msg'}: 350 NBBO") and "15 rejecting" in lines[0]
    assert lines[1].startswith(f"{out / 'nbbo.msg'}: 3,000 NBBO, 138,000 bytes; 15 rejecting symbols")
    on_rejected = np.isin(batch.orders["symbol"], padded(WALLAROO_REJECTED)).sum()
    assert lines[2].startswith(f"{out / 'orders.msg'}: 2,000 orders, 114,000 bytes; 15 rejecting symbols")
    assert "expected share of orders on them 0.005 = 1 in 200 (10.0 orders)" in lines[2]
    assert f"generated {on_rejected:,}:" in lines[2]


def test_the_command_writes_byte_identical_files_for_the_same_seed_whatever_the_chunk_size(generate_only,
                                                                                           wallaroo_data, tmp_path):
    args = ["generate", "--symbols", "r3k", "--nbbo", "5000", "--orders", "5000", "--seed", "9",
            "--data-dir", str(wallaroo_data)]
    assert generate_only(args + ["--out", str(tmp_path / "a")]) == 0
    assert generate_only(args + ["--out", str(tmp_path / "b"), "--chunk-size", "999"]) == 0
    assert generate_only(args[:-4] + ["--seed", "10", "--data-dir", str(wallaroo_data), "--out",
                                      str(tmp_path / "c")]) == 0
    for name in ("initial-nbbo.msg", "nbbo.msg", "orders.msg"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "orders.msg").read_bytes() != (tmp_path / "c" / "orders.msg").read_bytes()


def test_the_command_writes_the_same_streams_as_the_python_api(generate_only, wallaroo_data, tmp_path):
    assert generate_only(["generate", "--symbols", "700", "--nbbo", "1000", "--orders", "1000", "--seed", "4",
                          "--data-dir", str(wallaroo_data), "--out", str(tmp_path)]) == 0
    symbol_set = load_symbol_set("700", wallaroo_data)
    nbbo_rng, orders_rng = stream_rngs(4)
    assert (tmp_path / "nbbo.msg").read_bytes() == generate_nbbo(symbol_set, 1000, nbbo_rng).tobytes()
    assert (tmp_path / "orders.msg").read_bytes() == generate_orders(symbol_set, 1000, orders_rng).tobytes()


def test_the_command_generates_synthetic_sets_without_any_data_files(generate_only, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    assert generate_only(["generate", "--symbols", "synthetic:1000", "--nbbo", "500", "--orders", "500",
                          "--out", str(tmp_path / "out")]) == 0
    initial = (tmp_path / "out" / "initial-nbbo.msg").read_bytes()
    assert initial == initial_nbbo(synthetic_symbol_set(1000)) and len(initial) == 1000 * 46
    assert "(generated)" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_command_says_which_data_files_are_missing_and_names_the_variable(how, generate_only, tmp_path,
                                                                                monkeypatch, capsys):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(DATA_DIR_ENV, str(missing))
    args = ["generate", "--symbols", "1400", "--out", str(tmp_path / "out")]
    code = generate_only(args + (["--data-dir", str(missing)] if how == "flag" else []))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("marketspread generate: error: Wallaroo's data files are missing: there is no folder")
    assert str(missing) in err and DATA_DIR_ENV in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_reject_ratio_is_a_number_or_a_fraction_like_wallaroos_settings(generate_only, tmp_path, capsys):
    assert parse_ratio("5/350000") == DEFAULT_REJECT_RATIO
    assert parse_ratio("0.25") == 0.25
    for bad in ("2", "1/0", "five", "-0.1"):
        with pytest.raises(SystemExit):
            generate_only(["generate", "--reject-ratio", bad, "--out", str(tmp_path)])
        assert "--reject-ratio" in capsys.readouterr().err


def test_loading_the_command_does_not_load_numpy():
    probe = "import sys, marketspread.generate.cli; print('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"


def test_a_start_time_that_is_not_iso_8601_is_a_clear_error(generate_only, tmp_path, capsys):
    code = generate_only(["generate", "--symbols", "synthetic:20", "--start", "yesterday", "--out", str(tmp_path)])
    assert code == 2
    assert "start time 'yesterday' is not ISO 8601" in capsys.readouterr().err
