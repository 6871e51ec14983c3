"""The project stays ruff-clean and formatted, passes mypy --strict (packages, tests, examples
and benchmarks, as configured in pyproject.toml), and its packages silence no type error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "agentloop", "sessions", "tests", "benchmarks", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    # Everything ruff formats, the README's code blocks included.
    result = _run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.heavy(seconds=60)  # without its cache (a fresh checkout): a minute
def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_packages_silence_no_type_error() -> None:
    silenced = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("agentloop", "sessions")
        for path in sorted(ROOT.joinpath(package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "type: ignore" in line
    ]
    assert silenced == []
