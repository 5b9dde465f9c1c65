"""Seeded NBBO and order streams in the distributions of Wallaroo's testing/tools/fix_generator.

The Python API (for the sender and for tests):

    from marketspread.generate import (load_symbol_set, initial_nbbo, stream_rngs,
                                       NbboStream, OrderStream, generate_nbbo, generate_orders)

    symbol_set = load_symbol_set("350")     # or "700", "1400", "2100", "r3k", "synthetic:N"
    symbol_set.symbols, symbol_set.prices, symbol_set.rejected   # S4 padded, float64, bool
    initial_nbbo(symbol_set)                # bytes: framed NBBO, one per symbol; send these first
    nbbo_rng, orders_rng = stream_rngs(seed)
    generate_nbbo(symbol_set, n, nbbo_rng)  # numpy wire records from fixish.encode_nbbos
    generate_orders(symbol_set, n, orders_rng, reject_ratio=5 / 350_000)
    stream = OrderStream(symbol_set, orders_rng)   # endless, in chunks; same messages however chunked
    for chunk in stream.chunks(10_000): producer.send(chunk.tobytes())

`marketspread generate` (cli.py) writes the same streams to files. Modules, one job each:

| module | job |
|---|---|
| defaults.py | Wallaroo's benchmark settings (reject ratio, skew, rate), the data-dir variable |
| symbolset.py | `SymbolSet` |
| instruments.py | `load_symbol_set`: Wallaroo's sets from its data files; facts about those files |
| synthetic.py | `synthetic:N` sets, for machines without the files |
| initial.py | `initial_nbbo` for any set |
| prices.py | Wallaroo's bid/offer formulas for quotes that never / always reject |
| streams.py | `NbboStream`, `OrderStream`, the distributions |
| order_ids.py | unique 6-character order ids |
| timestamps.py | FIX UTC transact_time text |
| wire.py | columns -> wire records (stand-in for fixish.bulk's encoders) |
| mixing.py | counter-based integer randomness |
| cli.py | `marketspread generate` |

Names are imported lazily, so `import marketspread.generate.cli` (done by every
`marketspread` command) loads no numpy.
"""

from __future__ import annotations

import importlib

__all__ = [
    "SymbolSet",
    "load_symbol_set",
    "resolve_data_dir",
    "DataFilesMissing",
    "synthetic_symbol_set",
    "initial_nbbo",
    "stream_rngs",
    "NbboStream",
    "OrderStream",
    "generate_nbbo",
    "generate_orders",
]

_HOME = {
    "SymbolSet": "symbolset",
    "load_symbol_set": "instruments",
    "resolve_data_dir": "instruments",
    "DataFilesMissing": "instruments",
    "synthetic_symbol_set": "synthetic",
    "initial_nbbo": "initial",
    "stream_rngs": "streams",
    "NbboStream": "streams",
    "OrderStream": "streams",
    "generate_nbbo": "streams",
    "generate_orders": "streams",
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
