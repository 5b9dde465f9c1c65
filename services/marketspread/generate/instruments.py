"""Loading symbol sets: Wallaroo's five (350, 700, 1400, 2100, r3k) from its data files, or synthetic:N.

    load_symbol_set("350")            # data dir: --data-dir, else $MARKETSPREAD_WALLAROO_DATA,
    load_symbol_set("r3k", data_dir)  # else ../shared/data/wallaroo-market-spread beside the repo
    load_symbol_set("synthetic:500")  # no files needed

What Wallaroo's files hold (checked on every load, and by tests/unit/test_generate.py):

- `<set>-symbols_initial-nbbo-fixish.msg` is 350, 700, 1,400, 2,100 or 2,926 framed NBBO, one per
  symbol, all stamped with one second (e.g. 20160902-15:47:52.000).
- In every set the NBBOs that reject under `marketspread.rule` are exactly the first 15, and
  they are the 15 instruments of rejected_instruments.csv (INSM ... SLH). Every other initial
  NBBO has offer == bid: a spread of 0, not the "<= ~0.04" Wallaroo's current code would give
  (the files predate its fix 37aa7e655 of a division that truncated every spread to 0).
- Only the 350 set is priced by the CSVs: its symbols are those of all_instruments.csv, in the
  order rejected_instruments.csv then nonrejected_instruments.csv (which is all_instruments.csv
  without the 15), and each non-rejected initial bid is its CSV price plus [0, 1), Wallaroo's
  formula. The larger sets' bids are not (they are -0.74 to +1.49 away from the CSV prices),
  so their reference price is the initial bid.
- The sets are not all nested: 1400 begins with the whole 700 set, 2100 with 1400, r3k with
  2100, but 700 holds only 321 of the 350 set's symbols (1400: 347; 2100 and r3k: all 350).

The instruments that reject are therefore found the same way for every set: the symbols
whose initial NBBO rejects. For the 350 set that is cross-checked against
rejected_instruments.csv.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from ..errors import MarketSpreadError
from ..fixish.bulk import decode_records
from ..paths import wallaroo_data_dir
from ..rule import should_reject_many
from .defaults import DATA_DIR_ENV, SYNTHETIC_PREFIX, WALLAROO_SYMBOL_SETS
from .symbolset import SymbolSet
from .synthetic import parse_synthetic, synthetic_symbol_set

__all__ = [
    "DataFilesMissing",
    "resolve_data_dir",
    "initial_nbbo_file",
    "read_instruments",
    "load_symbol_set",
    "load_wallaroo_set",
]

_CSV_SET = "350"


class DataFilesMissing(MarketSpreadError):
    """Wallaroo's data files are not where they were looked for."""


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """`data_dir`, else $MARKETSPREAD_WALLAROO_DATA, else the shared folder beside the repository."""
    if data_dir is not None:
        path, origin = Path(data_dir), "given with --data-dir"
    elif os.environ.get(DATA_DIR_ENV):
        path, origin = Path(os.environ[DATA_DIR_ENV]), f"from {DATA_DIR_ENV}"
    else:
        path, origin = wallaroo_data_dir(), f"the default, as {DATA_DIR_ENV} is not set"
    if not path.is_dir():
        raise DataFilesMissing(_missing(f"there is no folder {path} ({origin})"))
    return path


def _missing(what: str) -> str:
    return (f"Wallaroo's data files are missing: {what}. Set {DATA_DIR_ENV} (or pass --data-dir) to the folder "
            f"that holds 350-symbols_initial-nbbo-fixish.msg and the instrument CSVs, or use "
            f"--symbols {SYNTHETIC_PREFIX}N, which needs no files")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataFilesMissing(_missing(f"{path} does not exist")) from None


def initial_nbbo_file(data_dir: Path, name: str) -> Path:
    return data_dir / f"{name}-symbols_initial-nbbo-fixish.msg"


def read_instruments(path: Path) -> dict[str, float]:
    """An instrument CSV (`_cusip,_name,_price,_ticker`) -> {ticker: price}, in file order."""
    try:
        with path.open(newline="", encoding="utf-8") as lines:
            return {row["_ticker"]: float(row["_price"]) for row in csv.DictReader(lines)}
    except FileNotFoundError:
        raise DataFilesMissing(_missing(f"{path} does not exist")) from None
    except (KeyError, ValueError) as error:
        raise MarketSpreadError(f"{path} is not an instrument CSV (_cusip,_name,_price,_ticker): {error}") from None


def load_wallaroo_set(name: str, data_dir: str | os.PathLike | None = None) -> SymbolSet:
    folder = resolve_data_dir(data_dir)
    path = initial_nbbo_file(folder, name)
    initial = _read(path)
    batch = decode_records([initial], framed=True)
    if batch.failures or len(batch.orders) or not len(batch.nbbo):
        raise MarketSpreadError(f"{path} is not a file of framed fixish NBBO messages")
    symbols = batch.nbbo["symbol"]
    if len(np.unique(symbols)) != len(symbols):
        raise MarketSpreadError(f"{path} quotes some symbol twice; an initial-NBBO file has one NBBO per symbol")
    bid, offer = batch.nbbo["bid_px"], batch.nbbo["offer_px"]
    rejected = should_reject_many(bid, offer)
    if name != _CSV_SET:
        return SymbolSet(name, symbols, bid, rejected, source=f"initial bids of {path.name}", initial=initial)

    instruments = read_instruments(folder / "all_instruments.csv")
    rejected_tickers = set(read_instruments(folder / "rejected_instruments.csv"))
    tickers = [s.decode("ascii").lstrip(" ") for s in symbols]
    if set(tickers) != set(instruments):
        raise MarketSpreadError(f"{path} and all_instruments.csv do not list the same symbols")
    if {t for t, r in zip(tickers, rejected) if r} != rejected_tickers:
        raise MarketSpreadError(f"the NBBOs of {path} that reject are not those of rejected_instruments.csv")
    prices = np.array([instruments[t] for t in tickers])
    return SymbolSet(name, symbols, prices, rejected, source="all_instruments.csv", initial=initial)


def load_symbol_set(name: str, data_dir: str | os.PathLike | None = None) -> SymbolSet:
    """One of WALLAROO_SYMBOL_SETS (reads the data files) or `synthetic:N` (reads nothing)."""
    count = parse_synthetic(name)
    if count is not None:
        return synthetic_symbol_set(count)
    if name not in WALLAROO_SYMBOL_SETS:
        raise MarketSpreadError(f"unknown symbol set {name!r}: use one of {', '.join(WALLAROO_SYMBOL_SETS)} "
                                f"or {SYNTHETIC_PREFIX}N")
    return load_wallaroo_set(name, data_dir)
