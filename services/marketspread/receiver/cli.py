"""`marketspread receiver`: rejections and dead letters from Kafka to files, with counts, latency and metrics."""

from __future__ import annotations

import logging
import sys
import threading

from ..settings import add_arguments, from_args
from ..stopping import install_stop_signals
from .settings import ReceiverSettings

__all__ = ["register"]

# A live line on a terminal; a log line every 10 s otherwise (logs of `marketspread run`, pods).
_PROGRESS_SECONDS = 5.0
_LOG_PROGRESS_SECONDS = 10.0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "receiver", help="receive OrderResults and dead letters; write them, count them, time them",
        description=__doc__)
    add_arguments(parser, ReceiverSettings)
    parser.set_defaults(func=_run)


def _line(stats) -> str:
    latency = stats.latency_ms
    timing = (f"latency p50 {latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms"
              if latency.get("count") else "no latency yet")
    return (f"received {stats.received:,} OrderResults ({stats.unique:,} unique, {stats.duplicates:,} duplicates), "
            f"{stats.dead_letters_total:,} dead letters, {stats.malformed:,} malformed; {timing}")


def _run(args) -> int:
    from .app import Receiver

    if not getattr(args, "verbose", False):
        # kafka-python logs every connection and metadata refresh at INFO; keep the output readable.
        logging.getLogger("kafka").setLevel(logging.WARNING)
    settings = from_args(ReceiverSettings, args)
    receiver = Receiver(settings)
    stop = threading.Event()
    install_stop_signals(stop, "finishing the current poll, committing, writing stats")
    done = threading.Event()
    tty = sys.stdout.isatty()

    def show_progress() -> None:
        while not done.wait(_PROGRESS_SECONDS if tty else _LOG_PROGRESS_SECONDS):
            line = _line(receiver.stats())
            print(f"\r{line}\033[K" if tty else line, end="" if tty else "\n", flush=True)

    reporter = threading.Thread(target=show_progress, name="receiver-progress", daemon=True)
    reporter.start()
    try:
        stats = receiver.run(stop)
    finally:
        done.set()
        reporter.join()
        if tty:
            print()
    print(_line(stats))
    if settings.out_dir:
        print(f"written to {settings.out_dir} (rejections.msg, stats.json)")
    return 0
