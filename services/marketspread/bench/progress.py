"""The progress bar: one line redrawn in place on a terminal, a plain line every 10 s otherwise."""

from __future__ import annotations

import shutil
import sys
import time

__all__ = ["bar", "ProgressLine", "human"]

_PLAIN_EVERY = 10.0


def bar(fraction: float, width: int = 24) -> str:
    """`[#########...............]` for a fraction in [0, 1] (clamped)."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def human(value: float | None) -> str:
    """1234567 -> '1.23M', 45678 -> '45.7k', 12 -> '12'."""
    if value is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"


class ProgressLine:
    def __init__(self, enabled: bool = True, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_plain = 0.0
        self._drawn = False

    def show(self, label: str, fraction: float | None, text: str) -> None:
        if not self.enabled:
            return
        line = f"{label} {bar(fraction) if fraction is not None else ''} {text}".replace("  ", " ")
        if self.tty:
            width = shutil.get_terminal_size((120, 20)).columns - 1
            self.stream.write("\r" + line[:width] + "\033[K")
            self.stream.flush()
            self._drawn = True
        elif time.monotonic() - self._last_plain >= _PLAIN_EVERY:
            self._last_plain = time.monotonic()
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        """A line that stays (a step's verdict), without disturbing the bar."""
        if not self.enabled:
            return
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
