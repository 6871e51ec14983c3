"""The ``fake_api`` fixture: a running fake Messages API per test (``conftest.py`` loads this
module as a pytest plugin, so every test can ask for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_api import FakeAnthropicServer


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicServer]:
    """A running :class:`FakeAnthropicServer` on 127.0.0.1 (stopped after the test)."""
    with FakeAnthropicServer() as server:
        yield server
