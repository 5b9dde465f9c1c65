"""What can stop the sender, each with a message the user can act on."""

from __future__ import annotations

from ..errors import MarketSpreadError

__all__ = ["SenderError", "InputFileError", "DeliveryError"]


class SenderError(MarketSpreadError):
    """The sender could not start or finish; the message says why."""


class InputFileError(SenderError):
    """An input file is missing, empty, not framed fixish, or holds the wrong kind of message."""


class DeliveryError(SenderError):
    """Some records were not acknowledged by Kafka (the sender still sent everything else)."""

    exit_code = 1
