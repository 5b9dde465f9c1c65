"""Rendered manifests shared by the chart tests (helm runs once per distinct set of values)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chart_support as cs  # noqa: E402


@pytest.fixture(scope="session")
def default_docs() -> list[dict]:
    """The chart with its own values.yaml only."""
    return cs.render()


@pytest.fixture(scope="session")
def pinned_docs() -> list[dict]:
    return cs.render(cs.ci_values("pinned"))


@pytest.fixture(scope="session")
def local_docs() -> list[dict]:
    return cs.render(cs.ci_values("default"))
