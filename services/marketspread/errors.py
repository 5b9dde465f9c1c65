"""Errors a user can act on. The CLI prints their message and exits non-zero, without a traceback."""

from __future__ import annotations

__all__ = ["MarketSpreadError"]


class MarketSpreadError(Exception):
    """Base of every error whose message alone tells the user what went wrong and what to do."""

    exit_code = 2
