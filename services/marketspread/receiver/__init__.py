"""The receiver: OrderResults and dead letters from Kafka to files, counted, timed, served as metrics.

    from marketspread.receiver import Receiver, ReceiverSettings
    receiver = Receiver(ReceiverSettings(out_dir="out", metrics_port=0))
    threading.Thread(target=receiver.run, args=(stop_event,)).start()
    receiver.stats()          # ReceiverStats: received, unique, duplicates, latency_ms, ...

| module | job |
|---|---|
| settings.py | `ReceiverSettings` (the Helm chart's `receiver.settings`) |
| decoding.py | rejection records (either record format) -> OrderResults, or malformed |
| tally.py | counts, duplicates by order id, dead letters, offsets; `ReceiverStats` |
| latency.py | exact latencies and their histogram buckets |
| files.py | the output directory, commit points, resuming |
| metrics.py | marketspread_receiver_* read from the tally |
| app.py | `Receiver` |
| cli.py | `marketspread receiver` |

Names are imported lazily: `marketspread --help` must not load numpy or kafka.
"""

from __future__ import annotations

import importlib

__all__ = ["Receiver", "ReceiverSettings", "ReceiverStats", "ReceiverError"]

_HOME = {
    "Receiver": "app",
    "ReceiverSettings": "settings",
    "ReceiverStats": "tally",
    "ReceiverError": "errors",
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
