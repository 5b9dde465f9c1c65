"""Where a local installation keeps what `make setup` resolved and what runs write.

`MARKETSPREAD_LOCAL_DIR` (set by the Makefile) wins; otherwise `.local` at the repository root,
found from this file, so the commands also work when called from another directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repo_root", "local_dir", "wallaroo_data_dir"]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def local_dir() -> Path:
    return Path(os.environ.get("MARKETSPREAD_LOCAL_DIR") or repo_root() / ".local")


def wallaroo_data_dir() -> Path:
    """Wallaroo's data files (initial NBBO, instruments): `$MARKETSPREAD_WALLAROO_DATA` or ../shared beside the repo."""
    configured = os.environ.get("MARKETSPREAD_WALLAROO_DATA")
    return Path(configured) if configured else repo_root().parent / "shared" / "data" / "wallaroo-market-spread"
