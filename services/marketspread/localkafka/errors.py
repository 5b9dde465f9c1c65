from __future__ import annotations

from ..errors import MarketSpreadError

__all__ = ["BrokerError"]


class BrokerError(MarketSpreadError):
    """The local broker could not be started, reached or stopped; the message says why."""
