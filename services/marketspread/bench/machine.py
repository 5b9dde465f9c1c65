"""The machine a benchmark ran on, and the versions of what ran: recorded with every result."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil

__all__ = ["machine", "versions", "LoadWatch"]


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict:
    from ..run.summary import dist, versions as stack_versions

    result = stack_versions()
    result.update({name: dist(name) for name in ("quixstreams", "confluent-kafka", "matplotlib", "psutil")})
    return result


class LoadWatch:
    """The 1-minute load average, sampled through a run: min, mean and max of what was seen."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def sample(self) -> None:
        self.values.append(os.getloadavg()[0])

    def summary(self) -> dict:
        if not self.values:
            self.sample()
        v = self.values
        return {"min": round(min(v), 2), "mean": round(sum(v) / len(v), 2), "max": round(max(v), 2)}
