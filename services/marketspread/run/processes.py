"""Child processes of a run: each a real service (`marketspread sender|receiver|job`) with its own log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..errors import MarketSpreadError
from ..metrics import Samples, scrape

__all__ = ["ServiceProcess", "ServiceFailed"]


class ServiceFailed(MarketSpreadError):
    pass


class ServiceProcess:
    """`marketspread <command> <args>` in the background, logging to `<log_dir>/<name>.log`."""

    def __init__(self, name: str, command: list[str], log_dir: Path, metrics_port: int = 0):
        self.name = name
        self.command = command
        self.log_file = log_dir / f"{name}.log"
        self.metrics_port = metrics_port
        self.process: subprocess.Popen | None = None
        self.log_start = 0  # where this process's output begins in the log (a restart appends to it)

    def start(self) -> "ServiceProcess":
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self.log_start = log.tell()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "marketspread", *self.command], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                # Its own process group: Ctrl-C in the terminal reaches the run, which stops children in order.
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check(self) -> None:
        """Raise if the process has died with an error."""
        if self.process is not None and self.process.poll() not in (None, 0):
            raise ServiceFailed(f"{self.name} exited with code {self.process.returncode}; last lines of "
                                f"{self.log_file}:\n{self.log_tail()}")

    def metrics(self) -> Samples | None:
        """Its current metrics, or None while it does not answer yet."""
        if not self.metrics_port:
            return None
        try:
            return scrape(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2)
        except OSError:
            return None

    def wait_metrics(self, timeout: float, ready=lambda samples: True) -> Samples:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check()
            samples = self.metrics()
            if samples is not None and ready(samples):
                return samples
            time.sleep(0.25)
        raise ServiceFailed(f"{self.name} was not ready within {timeout:.0f} s; see {self.log_file}")

    def wait(self, timeout: float) -> int:
        """Wait for a process that ends by itself (a sender); raise if it fails or overruns."""
        assert self.process is not None
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ServiceFailed(f"{self.name} did not finish within {timeout:.0f} s; see {self.log_file}") from None
        self.check()
        return code

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (services finish their work and exit 0), SIGKILL after `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def tree(self) -> list:
        """The process and all its descendants (psutil.Process), while it runs.

        The job's tree is the Python driver, the JVM it launched and PySpark's Python workers,
        whose daemon puts itself in a process group of its own.
        """
        import psutil

        if not self.running():
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """SIGKILL of the whole process tree at once, as a crash of its container would (fault injection)."""
        import psutil

        if self.process is None or self.process.poll() is not None:
            return
        tree = self.tree()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for process in tree[1:]:  # descendants in process groups of their own
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        self.process.wait(10)
        psutil.wait_procs(tree[1:], timeout=10)

    def log_text(self, end: int | None = None) -> str:
        """This process's part of the log: from where it began to `end` (a restart's `log_start`), else to EOF."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(self.log_start)
                return log.read(-1 if end is None else max(0, end - self.log_start)).decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"
