"""`marketspread`: one command, a subcommand per component.

Each subcommand lives beside the code it runs and registers itself here; modules are imported
only when needed, so `marketspread sender` never loads pyspark.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__
from .errors import MarketSpreadError
from .fixish.errors import FixishError
from .stopping import terminate_as_interrupt

# Modules with a `register(subparsers)` function, in the order `--help` lists them.
COMMAND_MODULES = (
    "marketspread.generate.cli",
    "marketspread.localkafka.cli",
    "marketspread.sender.cli",
    "marketspread.receiver.cli",
    "marketspread_job.cli",
    "marketspread.run.cli",
    "marketspread.chaos.cli",
    "marketspread.bench.cli",
    "marketspread.dashboards.cli",
    "marketspread.k8s.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marketspread", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        # kafka-python and py4j narrate every connection and callback at INFO.
        for chatty in ("kafka", "py4j"):
            logging.getLogger(chatty).setLevel(logging.WARNING)
    # Services replace this with their own graceful stop (stopping.install_stop_signals).
    terminate_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except MarketSpreadError as error:
        print(f"marketspread {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except FixishError as error:
        print(f"marketspread {args.command}: error: not fixish: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
