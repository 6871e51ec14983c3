"""The search tools: list_files glob semantics and grep, their caps and errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_tools import SECRET, make_tools, run

from agentloop._agent import search_tools as search

# --------------------------------------------------------------------------------- list_files


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel in (
        "setup.py",
        "README.md",
        "src/app/__init__.py",
        "src/app/main.py",
        "src/app/ui.tsx",
        "src/app/ui.ts",
        "tests/test_main.py",
        ".git/config",
        "src/app/__pycache__/main.cpython-311.pyc",
        ".venv/lib/site.py",
        "web/node_modules/pkg/index.js",
    ):
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\nneedle in {rel}\n")
    return ws


def test_list_files_sorted_relative_and_skips_tool_dirs(tree: Path) -> None:
    result = run(make_tools(tree), "list_files")
    assert result.content.splitlines() == [
        "README.md",
        "setup.py",
        "src/app/__init__.py",
        "src/app/main.py",
        "src/app/ui.ts",
        "src/app/ui.tsx",
        "tests/test_main.py",
    ]


def test_list_files_glob_semantics(tree: Path) -> None:
    tools = make_tools(tree)
    assert run(tools, "list_files", pattern="*.py").content == "setup.py"
    assert run(tools, "list_files", pattern="**/*.py").content.splitlines() == [
        "setup.py",
        "src/app/__init__.py",
        "src/app/main.py",
        "tests/test_main.py",
    ]
    assert run(tools, "list_files", pattern="**/*.{ts,tsx}").content.splitlines() == [
        "src/app/ui.ts",
        "src/app/ui.tsx",
    ]
    # pattern is relative to path; results stay relative to the workspace
    assert run(tools, "list_files", pattern="*.py", path="src/app").content.splitlines() == [
        "src/app/__init__.py",
        "src/app/main.py",
    ]


def test_list_files_caps_count(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        (ws / f"f{i:02d}.txt").write_text("")
    monkeypatch.setattr(search, "LIST_MAX_FILES", 10)
    lines = run(make_tools(ws), "list_files").content.splitlines()
    assert lines[:10] == [f"f{i:02d}.txt" for i in range(10)]
    assert len(lines) == 11 and "10 of 30" in lines[10]


def test_list_files_errors_and_no_match(tree: Path, outside: Path) -> None:
    tools = make_tools(tree)
    none = run(tools, "list_files", pattern="**/*.rs")
    assert not none.is_error and "No files match" in none.content
    assert "not found" in run(tools, "list_files", path="nowhere").content
    assert "not a directory" in run(tools, "list_files", path="setup.py").content
    escaped = run(tools, "list_files", path="../outside")
    assert escaped.is_error and "secret.txt" not in escaped.content
    assert run(tools, "list_files", pattern="/etc/*").is_error


def test_list_files_does_not_follow_symlinked_dirs_out(ws: Path, outside: Path) -> None:
    (ws / "a.txt").write_text("")
    (ws / "link").symlink_to(outside, target_is_directory=True)
    assert run(make_tools(ws), "list_files").content == "a.txt"


# --------------------------------------------------------------------------------- grep


def test_grep_reports_path_line_text(tree: Path) -> None:
    result = run(make_tools(tree), "grep", pattern=r"needle in .*main")
    assert result.content.splitlines() == [
        "src/app/main.py:2: needle in src/app/main.py",
        "tests/test_main.py:2: needle in tests/test_main.py",
    ]


def test_grep_glob_path_and_case(tree: Path) -> None:
    tools = make_tools(tree)
    by_name = run(tools, "grep", pattern="needle", glob="*.tsx")
    assert by_name.content == "src/app/ui.tsx:2: needle in src/app/ui.tsx"
    by_path = run(tools, "grep", pattern="needle", glob="src/**/*.py")
    assert [line.split(":")[0] for line in by_path.content.splitlines()] == [
        "src/app/__init__.py",
        "src/app/main.py",
    ]
    one_file = run(tools, "grep", pattern="needle", path="setup.py")
    assert one_file.content == "setup.py:2: needle in setup.py"
    assert "No matches" in run(tools, "grep", pattern="NEEDLE", path="setup.py").content
    insensitive = run(tools, "grep", pattern="NEEDLE", path="setup.py", case_insensitive=True)
    assert insensitive.content == "setup.py:2: needle in setup.py"


def test_grep_skips_binary_tool_dirs_and_outside_symlinks(ws: Path, outside: Path) -> None:
    (ws / "data.bin").write_bytes(b"needle\x00\x01")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "x.js").write_text("needle\n")
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "ok.txt").write_text("a needle\n")
    tools = make_tools(ws)
    assert run(tools, "grep", pattern="needle").content == "ok.txt:1: a needle"
    leaked = run(tools, "grep", pattern="secret")
    assert SECRET not in leaked.content


def test_grep_caps_matches_and_long_lines(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "many.txt").write_text("hit\n" * 50 + "z" * 5000 + "hit" + "z" * 5000 + "\n")
    monkeypatch.setattr(search, "GREP_MAX_MATCHES", 20)
    lines = run(make_tools(ws), "grep", pattern="hit").content.splitlines()
    assert len(lines) == 21 and "stopped after 20 matches" in lines[-1]
    monkeypatch.setattr(search, "GREP_MAX_MATCHES", 200)
    long_line = run(make_tools(ws), "grep", pattern="zhitz").content
    assert "hit" in long_line and len(long_line) < search.GREP_MAX_LINE_CHARS + 50


def test_grep_errors(ws: Path) -> None:
    tools = make_tools(ws)
    invalid = run(tools, "grep", pattern="(unclosed")
    assert invalid.is_error and "invalid regular expression" in invalid.content
    assert run(tools, "grep", pattern="x", path="missing").is_error
    assert run(tools, "grep", pattern="x", path="../").is_error
    assert run(tools, "grep").is_error
