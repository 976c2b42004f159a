"""The raters' tests' shared fixtures."""

from __future__ import annotations

import pytest

from raters import listening
from tests.listening_setup import Clock


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The listening clock, the test's to move."""
    fake = Clock()
    monkeypatch.setattr(listening, "now", fake)
    return fake
