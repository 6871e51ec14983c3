"""The tests' own house: what tests share lives in ``tests/support/`` (or the fake
API's package, or the transcript corpus), never in a test module another test imports, and no
helper outgrows 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HELPER_DIRS = ("support", "fake_api", "transcripts")
MAX_LINES = 600


def _imported_test_modules(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("test_")]
    return found


@pytest.mark.heavy
def test_no_test_module_imports_another() -> None:
    imports = [hit for path in sorted(TESTS.rglob("*.py")) for hit in _imported_test_modules(path)]
    assert imports == []


def test_the_checker_sees_a_test_module_imported(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("from test_loop import filler\nimport test_pty_repl\n")
    assert _imported_test_modules(sample) == [
        "test_sample.py:1 test_loop",
        "test_sample.py:2 test_pty_repl",
    ]


def test_helpers_live_in_support() -> None:
    stray = [
        path.name
        for path in TESTS.glob("*.py")
        if not path.name.startswith("test_") and path.name != "conftest.py"
    ]
    assert stray == []


def test_no_helper_is_over_600_lines() -> None:
    helpers = [path for folder in HELPER_DIRS for path in (TESTS / folder).rglob("*.py")]
    assert helpers, "the helper folders are where this test looks"
    too_long = {
        str(path.relative_to(TESTS)): n
        for path in helpers
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}
