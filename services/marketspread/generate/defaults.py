"""The settings of Wallaroo's benchmark streams, as this generator's defaults.

Pure Python on purpose: `marketspread --help` imports the CLI module, which shows these
values, and must not pay for numpy.

Sources (github.com/WallarooLabs/wallaroo, commit 2b985a3e7567):
testing/tools/fix_generator/properties/market_spread_single_run.ini, the benchmark run:
350,000 orders per second for 1 s, `total_rejections = 5`, `messages_skew_percent = 80`,
`instruments_skew_percent = 20`; and lib/wallaroo_labs/fix_generator_utils/utils.pony for
the per-message distributions.
"""

from __future__ import annotations

__all__ = [
    "DATA_DIR_ENV",
    "WALLAROO_SYMBOL_SETS",
    "SYNTHETIC_PREFIX",
    "DEFAULT_SYMBOL_SET",
    "DEFAULT_REJECT_RATIO",
    "DEFAULT_RATE",
    "DEFAULT_START",
    "MESSAGES_SKEW_PERCENT",
    "INSTRUMENTS_SKEW_PERCENT",
    "SPREAD_TICKS",
    "ORDER_QTY_STEPS",
    "ORDER_QTY_STEP",
    "ACCOUNTS",
]

# The Makefile exports it; without it marketspread.paths looks beside the repository.
DATA_DIR_ENV = "MARKETSPREAD_WALLAROO_DATA"

# Wallaroo's initial-NBBO files: `<name>-symbols_initial-nbbo-fixish.msg`.
WALLAROO_SYMBOL_SETS = ("350", "700", "1400", "2100", "r3k")
SYNTHETIC_PREFIX = "synthetic:"
DEFAULT_SYMBOL_SET = "350"

# total_rejections / (output_msgs_per_sec * messages_duration_secs) = 5 / 350,000 = 1 in 70,000.
DEFAULT_REJECT_RATIO = 5 / 350_000
# output_msgs_per_sec: how fast transact_time advances through a stream.
DEFAULT_RATE = 350_000
# Wallaroo stamped with the generator's wall clock; a fixed start keeps seeded files identical.
# This one is one second after the stamp of 350-symbols_initial-nbbo-fixish.msg.
DEFAULT_START = "2016-09-02T15:47:53Z"

MESSAGES_SKEW_PERCENT = 80
INSTRUMENTS_SKEW_PERCENT = 20
SPREAD_TICKS = 4  # rand_int(((0.05 - 0.01) * 100).u64()) = rand_int(4): offer = bid + {0,1,2,3} cents
ORDER_QTY_STEPS = 65  # dice(1, 65) * 10
ORDER_QTY_STEP = 10.0
ACCOUNTS = 300  # dice(1, 300)
