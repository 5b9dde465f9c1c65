"""`marketspread sender`: send a framed fixish file (or generated data) to Kafka at a paced rate."""

from __future__ import annotations

import logging
import sys
import threading

from ..settings import add_arguments, from_args
from ..stopping import install_stop_signals
from .settings import SenderSettings

__all__ = ["register"]

# A live line on a terminal; a log line every 10 s otherwise (logs of `marketspread run`, pods).
_PROGRESS_SECONDS = 2.0
_LOG_PROGRESS_SECONDS = 10.0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sender", help="send NBBO or orders to Kafka, Giles-style: a batch every batch_size/rate seconds",
        description=__doc__)
    add_arguments(parser, SenderSettings)
    parser.set_defaults(func=_run)


def _run(args) -> int:
    from .app import Sender
    from .errors import DeliveryError

    if not getattr(args, "verbose", False):
        # kafka-python logs every connection and metadata refresh at INFO; keep the output readable.
        logging.getLogger("kafka").setLevel(logging.WARNING)
    settings = from_args(SenderSettings, args)
    sender = Sender(settings)
    stop = threading.Event()
    install_stop_signals(stop, "stopping after the current batch")
    done = threading.Event()
    tty = sys.stdout.isatty()

    def show_progress() -> None:
        while not done.wait(_PROGRESS_SECONDS if tty else _LOG_PROGRESS_SECONDS):
            line = sender.progress().line()
            print(f"\r{line}\033[K" if tty else line, end="" if tty else "\n", flush=True)

    reporter = threading.Thread(target=show_progress, name="sender-progress", daemon=True)
    reporter.start()
    try:
        report = sender.run(stop)
    finally:
        done.set()
        reporter.join()
        if tty:
            print()
    print(report.summary())
    if not report.ok:
        raise DeliveryError(f"{report.send_errors} records ({report.failed_messages} messages) were not delivered "
                            f"to {report.topic}; see the errors logged above")
    return 0
