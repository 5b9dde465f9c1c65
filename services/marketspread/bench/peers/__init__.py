"""The peers of the Spark job, each run as its own process (`marketspread bench-peer --system NAME`).

| module | peer |
|---|---|
| passthrough.py | consume both input topics, forward the order records unchanged (no logic): the floor |
| plain.py | one kafka-python process, a dict of quotes, one message at a time |
| quix.py | Quix Streams: `concat` of the two topics and a stateful `apply` |
| probe.py | not a peer: the consumer that measures the passthrough's latency from record timestamps |
| logic.py | the per-message Market Spread step the plain and Quix peers share |
| counters.py | what every peer exposes on /metrics for the harness (processed offsets, message counts) |
"""

from __future__ import annotations

__all__ = ["run_peer"]


def run_peer(settings, stop) -> None:
    """Run the peer `settings.system` until `stop` is set."""
    if settings.system == "passthrough":
        from .passthrough import run
    elif settings.system in ("plain", "plain-bulk"):
        from .plain import run
    elif settings.system == "quix":
        from .quix import run
    else:  # pragma: no cover - the settings class allows only the three
        raise ValueError(f"unknown peer {settings.system!r}")
    run(settings, stop)
