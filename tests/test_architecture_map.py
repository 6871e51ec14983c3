"""The map is the territory: every module of agentloop/ and sessions/ is named in ARCHITECTURE.md
or, inside a room of the core, in that room's own map (its ``__init__`` docstring); no two modules
share a name, and each map fits on one screen."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "ARCHITECTURE.md"
SCREEN_LINES, SCREEN_COLUMNS = 100, 100
CORE = ROOT / "agentloop" / "_core"
ROOM_MAP_LINES = 25


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


def _core_rooms() -> list[Path]:
    return sorted(p for p in CORE.iterdir() if (p / "__init__.py").is_file())


def _room_map(room: Path) -> str:
    return ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""


def test_every_module_is_on_the_map() -> None:
    text = MAP.read_text()
    rooms = {room: _room_map(room) for room in _core_rooms()}
    missing = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if not _named_in(rooms.get(p.parent, text), p.stem)
    ]
    assert missing == []


def test_the_core_is_in_rooms_and_each_is_on_the_core_map() -> None:
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert loose == ["compaction_core.py"]
    core_map = ast.get_docstring(ast.parse((CORE / "__init__.py").read_text())) or ""
    assert [r.name for r in _core_rooms() if not _named_in(core_map, r.name)] == []
    assert [r.name for r in _core_rooms() if not _named_in(MAP.read_text(), r.name)] == []


def test_each_room_map_fits_on_a_screen() -> None:
    for room in _core_rooms():
        lines = (room / "__init__.py").read_text().splitlines()
        assert len(lines) <= ROOM_MAP_LINES, room.name
        assert [n for n, line in enumerate(lines, 1) if len(line) > SCREEN_COLUMNS] == []


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
