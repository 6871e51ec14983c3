"""The fake Messages API (``tests/fake_api/``) under its historical name, plus its fixture.

``conftest.py`` loads this module as a pytest plugin, so every test can ask for ``fake_api``;
``from fake_anthropic import ...`` keeps working for everything the package exports.
"""

from __future__ import annotations

from collections.abc import Iterator

import fake_api as _package
import pytest
from fake_api import *  # noqa: F403  (the package's whole public API, under this name too)
from fake_api import FakeAnthropicServer

__all__ = [*_package.__all__, "fake_api"]


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicServer]:
    """A running :class:`FakeAnthropicServer` on 127.0.0.1 (stopped after the test)."""
    with FakeAnthropicServer() as server:
        yield server
