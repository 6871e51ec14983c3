"""The map is the territory (issue 21.5): every module of agentloop/ and sessions/ is named in
ARCHITECTURE.md, no two modules share a name, and the map still fits on one screen."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "ARCHITECTURE.md"
SCREEN_LINES, SCREEN_COLUMNS = 100, 100


def _modules() -> list[Path]:
    return sorted(
        path
        for package in ("agentloop", "sessions")
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py" or path.parent.name == "agentloop"
    )


def _named_in(text: str, stem: str) -> bool:
    """Whether ``stem`` appears as a word inside a code span of ``text``."""
    return any(
        re.search(rf"(?<![\w.]){re.escape(stem)}(?![\w])", span)
        for span in re.findall(r"`([^`]+)`", text)
    )


def test_every_module_is_on_the_map() -> None:
    text = MAP.read_text()
    missing = [str(p.relative_to(ROOT)) for p in _modules() if not _named_in(text, p.stem)]
    assert missing == []


def test_the_map_checker_sees_a_missing_module() -> None:
    assert _named_in("the store (`_sql_lineage`, `_protocol`)", "_protocol")
    assert not _named_in("the store (`_sql_lineage`)", "_lineage")
    assert not _named_in("a protocol, in prose", "protocol")


def test_no_two_modules_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.stem.lstrip("_")].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def test_the_map_fits_on_one_screen() -> None:
    lines = MAP.read_text().splitlines()
    assert len(lines) <= SCREEN_LINES
    assert [n for n, line in enumerate(lines, 1) if len(line) > SCREEN_COLUMNS] == []
