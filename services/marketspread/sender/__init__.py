"""The sender: framed fixish files or generated data to Kafka, paced like Wallaroo's Giles sender.

    from marketspread.sender import Sender, SenderSettings
    report = Sender(SenderSettings(file="orders.msg", stream="orders", rate=50_000)).run(stop_event)

| module | job |
|---|---|
| settings.py | `SenderSettings` (the Helm chart's `sender.settings`) |
| source.py | load and validate a file before anything is sent; loop; generated chunks |
| generated.py | the generator's seeded streams as a source |
| pacing.py | intended send times, open loop, never skipped |
| records.py | a batch -> Kafka records, `message` or `framed` |
| delivery.py | acknowledgements, failures, in-flight back-pressure |
| metrics.py | marketspread_sender_* |
| report.py | `SendReport`, `Progress` |
| app.py | `Sender` |
| cli.py | `marketspread sender` |

Names are imported lazily: `marketspread --help` must not load numpy or kafka.
"""

from __future__ import annotations

import importlib

__all__ = ["Sender", "SenderSettings", "SendReport", "Progress", "SenderError", "InputFileError", "DeliveryError"]

_HOME = {
    "Sender": "app",
    "SenderSettings": "settings",
    "SendReport": "report",
    "Progress": "report",
    "SenderError": "errors",
    "InputFileError": "errors",
    "DeliveryError": "errors",
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
