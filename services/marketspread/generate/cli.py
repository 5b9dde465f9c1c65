"""`marketspread generate`: seeded NBBO and order stream files in Wallaroo's distributions.

    marketspread generate --symbols 350 --nbbo 1000000 --orders 1000000 --seed 1 --out DIR

writes DIR/initial-nbbo.msg (the set's initial NBBO: send it first), DIR/nbbo.msg and
DIR/orders.msg, all framed fixish like Wallaroo's data files, and prints one line per file.
The same arguments give byte-identical files.
"""

from __future__ import annotations

import argparse

from .defaults import (
    DATA_DIR_ENV,
    DEFAULT_RATE,
    DEFAULT_REJECT_RATIO,
    DEFAULT_START,
    DEFAULT_SYMBOL_SET,
    SYNTHETIC_PREFIX,
    WALLAROO_SYMBOL_SETS,
)

__all__ = ["register", "parse_ratio", "INITIAL_FILE", "NBBO_FILE", "ORDERS_FILE"]

INITIAL_FILE = "initial-nbbo.msg"
NBBO_FILE = "nbbo.msg"
ORDERS_FILE = "orders.msg"
_CHUNK = 1 << 20


def parse_ratio(text: str) -> float:
    """`"0.001"` or a fraction such as `"5/350000"` (Wallaroo's total_rejections/total_messages)."""
    try:
        numerator, _, denominator = text.partition("/")
        value = float(numerator) / float(denominator) if denominator else float(numerator)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number nor a fraction such as 5/350000") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "generate", help="write seeded NBBO and order streams in Wallaroo's distributions",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--symbols", default=DEFAULT_SYMBOL_SET, metavar="SET",
                        help=f"symbol set: {', '.join(WALLAROO_SYMBOL_SETS)} (Wallaroo's data files) or "
                             f"{SYNTHETIC_PREFIX}N (made up, needs no files) (default {DEFAULT_SYMBOL_SET})")
    parser.add_argument("--nbbo", type=_count, default=350_000, metavar="N", help="NBBO messages (default 350000)")
    parser.add_argument("--orders", type=_count, default=350_000, metavar="N",
                        help="order messages (default 350000)")
    parser.add_argument("--seed", type=_count, default=0, help="random seed (default 0)")
    parser.add_argument("--reject-ratio", type=parse_ratio, default=DEFAULT_REJECT_RATIO, metavar="R",
                        help="share of orders sent to rejecting symbols, a number or a fraction "
                             "(default 5/350000, Wallaroo's benchmark: 1 in 70,000)")
    parser.add_argument("--nbbo-rejected-share", type=parse_ratio, default=0.0, metavar="R",
                        help="share of NBBO quoting rejecting symbols, at prices that keep them rejecting "
                             "(default 0: Wallaroo quoted them only in the initial NBBO)")
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help=f"folder of Wallaroo's data files (default ${DATA_DIR_ENV}, else "
                             "../shared/data/wallaroo-market-spread beside the repository)")
    parser.add_argument("--start", default=DEFAULT_START, metavar="TIME",
                        help=f"transact_time of the first message, ISO 8601 (default {DEFAULT_START})")
    parser.add_argument("--rate", type=_positive, default=DEFAULT_RATE,
                        help=f"messages per second of transact_time (default {DEFAULT_RATE})")
    parser.add_argument("--chunk-size", type=_positive, default=_CHUNK, metavar="N",
                        help=f"messages generated at a time; bounds memory, never changes the files (default {_CHUNK})")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write the three files to")
    parser.set_defaults(func=_run)


def _write(path, chunks, rejecting) -> tuple[int, int, int]:
    """Write the chunks to `path` (complete or not at all); (messages, bytes, messages on `rejecting`)."""
    import os

    import numpy as np

    messages = size = on_rejecting = 0
    partial = path.with_name(path.name + ".part")
    with partial.open("wb") as out:
        for chunk in chunks:
            data = chunk.tobytes()
            out.write(data)
            messages, size = messages + len(chunk), size + len(data)
            on_rejecting += int(np.isin(chunk["symbol"], rejecting).sum())
    os.replace(partial, path)
    return messages, size, on_rejecting


def _run(args) -> int:
    from pathlib import Path

    from .initial import initial_nbbo
    from .instruments import load_symbol_set
    from .streams import NbboStream, OrderStream, stream_rngs

    symbol_set = load_symbol_set(args.symbols, args.data_dir)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    nbbo_rng, orders_rng = stream_rngs(args.seed)
    nbbo = NbboStream(symbol_set, nbbo_rng, rejected_share=args.nbbo_rejected_share, start=args.start,
                      rate=args.rate)
    orders = OrderStream(symbol_set, orders_rng, reject_ratio=args.reject_ratio, start=args.start, rate=args.rate)
    rejecting = symbol_set.rejecting_symbols

    initial = initial_nbbo(symbol_set)
    origin = "Wallaroo's file" if symbol_set.initial is not None else "generated"
    count, size, on_rejecting = _write(out / INITIAL_FILE, [_records(initial)], rejecting)
    print(f"{out / INITIAL_FILE}: {count:,} NBBO ({origin}), {size:,} bytes; symbol set {symbol_set.describe()}; "
          f"{on_rejecting} of them put their symbol in the reject state")

    count, size, on_rejecting = _write(out / NBBO_FILE, nbbo.chunks(args.chunk_size, args.nbbo), rejecting)
    print(f"{out / NBBO_FILE}: {count:,} NBBO, {size:,} bytes; {len(rejecting)} rejecting symbols; "
          f"{on_rejecting:,} NBBO on them (share {args.nbbo_rejected_share:.3g}), none of the others rejects")

    count, size, on_rejecting = _write(out / ORDERS_FILE, orders.chunks(args.chunk_size, args.orders), rejecting)
    share = orders.expected_reject_share
    one_in = f" = 1 in {1 / share:,.0f}" if share else ""
    print(f"{out / ORDERS_FILE}: {count:,} orders, {size:,} bytes; {len(rejecting)} rejecting symbols; "
          f"expected share of orders on them {share:.3g}{one_in} ({share * count:,.1f} orders), "
          f"generated {on_rejecting:,}: the orders to reject")
    return 0


def _records(initial: bytes):
    """The initial NBBO file as wire records, so that `_write` can count it like the streams."""
    import numpy as np

    from ..fixish.layout import NBBO

    return np.frombuffer(initial, dtype=NBBO.framed_dtype)
