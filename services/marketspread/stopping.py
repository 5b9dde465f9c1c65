"""Clean stops for long-running services: SIGTERM (Kubernetes, `marketspread run`) works like Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading

__all__ = ["install_stop_signals", "terminate_as_interrupt"]


def install_stop_signals(stop: threading.Event, what: str = "stopping") -> None:
    """SIGINT and SIGTERM set `stop`; a second signal raises KeyboardInterrupt to abort at once."""

    def handle(signum, _frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(f"{signal.Signals(signum).name}: {what} (signal again to abort)", file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


def terminate_as_interrupt() -> None:
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does: the `finally` blocks of a command that
    started processes (run, chaos, bench) stop them instead of leaving them orphaned."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handle)
