from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = ["support.fake_server", "support.agent_tools", "support.cli", "support.pty"]

# Where Python is told to write no bytecode (PYTHONDONTWRITEBYTECODE), pytest rewrites and
# compiles every test module anew in each worker: about 6 s of CPU each for this suite. The
# test processes cache them (in __pycache__, as Python would); see also pytest_sessionstart.
sys.dont_write_bytecode = False

# CI runs the property tests at five times the local strength; locally a lighter profile keeps
# the loop quick. (At 2,000 examples the properties took a minute of one worker more than at
# 1,000, the compaction strategies' alone half a minute.)
settings.register_profile("ci", max_examples=1000, deadline=None)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "heavy(seconds=5): a test of several seconds (processes, a terminal, mypy), run first, "
        "the longest first; seconds: about how long it takes alone",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    # Where Python is told to write no bytecode (PYTHONDONTWRITEBYTECODE), each of the hundreds
    # of processes the suite starts (the console script, in a terminal or not, the zygote, the
    # MCP test servers) would compile what it imports of this tree anew: about a third of a
    # second of CPU each. Compiled once here (in __pycache__, as Python would), before the
    # workers start; what is up to date is only looked at.
    if hasattr(session.config, "workerinput"):
        return
    root = Path(__file__).resolve().parents[1]
    for package in ("agentloop", "sessions", "tests"):
        compileall.compile_dir(root / package, quiet=2)


def _heaviness(item: pytest.Item) -> float:
    heavy = item.get_closest_marker("heavy")
    return 0.0 if heavy is None else float(heavy.kwargs.get("seconds", 5))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The heavy tests first, the longest first (the rest in their own order): pytest-xdist's
    # workers take the light ones from the end while the heavy ones run, so no long test is
    # left for the end of a run to hold the other worker idle. (The same order on every worker:
    # the sort is stable.)
    items.sort(key=lambda item: -_heaviness(item))


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """No test ever touches the user's real data directory or a real API key."""
    home = tmp_path_factory.mktemp("agentloop-home")
    monkeypatch.setenv("AGENTLOOP_HOME", str(home))
    # The user's own instruction files (AGENTS.md ...) are never read by a test.
    monkeypatch.setenv("AGENTLOOP_CONFIG_DIR", str(home / "config"))
    # The SDK finds credentials in many places (key, token, profile, config dir under HOME).
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    yield home
