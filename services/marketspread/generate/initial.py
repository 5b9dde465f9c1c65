"""The initial NBBO of a symbol set: one framed NBBO per symbol, sent before the streams start.

Without it every symbol would start in Wallaroo's initial state, which rejects every order
(with bid = offer = 0). For a Wallaroo set it is that set's file, byte for byte. For a
synthetic set it is computed the way Wallaroo's initial_nbbo_generator did, from the set
alone (no seed): the rejected instruments get `prices.wide_quotes`, the others a zero spread
at `price + u`, as in Wallaroo's own files. All are stamped one second before DEFAULT_START.
"""

from __future__ import annotations

import numpy as np

from ..fixish.bulk import encode_nbbos
from .defaults import DEFAULT_START
from .mixing import unit_floats
from .prices import tight_quotes, wide_quotes
from .symbolset import SymbolSet
from .timestamps import fix_times, parse_start

__all__ = ["initial_nbbo", "INITIAL_STREAMS"]

# Streams of `mixing.unit_floats` for the uniforms of the formulas; any distinct numbers do.
INITIAL_STREAMS = (0x494E_4954_31, 0x494E_4954_32, 0x494E_4954_33)  # "INIT1", "INIT2", "INIT3"


def initial_nbbo(symbol_set: SymbolSet) -> bytes:
    """The framed initial-NBBO messages of `symbol_set`, in its symbol order."""
    if symbol_set.initial is not None:
        return symbol_set.initial
    index = np.arange(len(symbol_set))
    u_bid, u_narrow, u_spread = (unit_floats(stream, index) for stream in INITIAL_STREAMS)
    bid, offer = tight_quotes(symbol_set.prices, u_bid, np.zeros(len(index)))
    rejected = symbol_set.rejected
    bid[rejected], offer[rejected] = wide_quotes(symbol_set.prices[rejected], u_bid[rejected], u_narrow[rejected],
                                                 u_spread[rejected])
    stamp = fix_times(np.full(len(index), parse_start(DEFAULT_START) - 1000))
    return encode_nbbos(symbol_set.symbols, bid, offer, stamp, framed=True).tobytes()
