"""What can stop the receiver, each with a message the user can act on."""

from __future__ import annotations

from ..errors import MarketSpreadError

__all__ = ["ReceiverError"]


class ReceiverError(MarketSpreadError):
    """The receiver could not start, reach Kafka or write its files; the message says why."""
