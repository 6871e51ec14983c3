"""The file tools: read_file, write_file and edit_file results, caps and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.agent_tools import make_tools, run

from agentloop import ToolResult
from agentloop._agent import files

# --------------------------------------------------------------------------------- read_file


def test_read_file_numbers_lines_like_cat_n(ws: Path) -> None:
    (ws / "a.py").write_text("first\n\tsecond\nthird")
    result = run(make_tools(ws), "read_file", path="a.py")
    assert result == ToolResult("     1\tfirst\n     2\t\tsecond\n     3\tthird")


def test_read_file_offset_and_limit_say_how_to_continue(ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = run(make_tools(ws), "read_file", path="a.txt", offset=4, limit=3)
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "lines 4-6 of 10" in lines[3] and "offset=7" in lines[3]
    assert "truncated" not in result.content  # the model asked for 3 lines; nothing was cut
    tail = run(make_tools(ws), "read_file", path="a.txt", offset=9)
    assert tail.content == "     9\tline 9\n    10\tline 10"


def test_read_file_caps_lines(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    result = run(make_tools(ws), "read_file", path="big.txt")
    body, notice = result.content.rsplit("\n", 1)
    assert len(body.splitlines()) == files.READ_MAX_LINES
    assert "truncated" in notice and "of 2500" in notice and "offset=2001" in notice
    asked = run(make_tools(ws), "read_file", path="big.txt", limit=5000)
    assert len(asked.content.splitlines()) == files.READ_MAX_LINES + 1


def test_read_file_caps_characters_and_cuts_long_lines(ws: Path) -> None:
    (ws / "wide.txt").write_text(("x" * 1000 + "\n") * 300 + "y" * 1_000_000 + "\n")
    tools = make_tools(ws)
    result = run(tools, "read_file", path="wide.txt")
    assert len(result.content) <= files.READ_MAX_CHARS + 300
    assert "truncated" in result.content and "of 301" in result.content
    last = run(tools, "read_file", path="wide.txt", offset=301)
    assert "line cut" in last.content
    assert len(last.content) < files.READ_MAX_LINE_CHARS + 100


@pytest.mark.parametrize(
    ("setup", "tool_input", "message"),
    [
        (None, {"path": "missing.txt"}, "file not found"),
        ("dir", {"path": "d"}, "is a directory"),
        ("bin", {"path": "img.bin"}, "binary"),
        ("text", {"path": "t.txt", "offset": 5}, "past the end"),
        ("text", {"path": "t.txt", "offset": 0}, "at least 1"),
        ("text", {"path": "t.txt", "limit": "ten"}, "integer"),
        ("text", {"path": "t.txt", "offset": True}, "integer"),
        ("text", {}, "missing required parameter 'path'"),
        ("text", {"path": 3}, "must be a string"),
    ],
)
def test_read_file_errors(
    ws: Path, setup: str | None, tool_input: dict[str, Any], message: str
) -> None:
    (ws / "d").mkdir()
    (ws / "img.bin").write_bytes(b"\x89PNG\r\n\x00\x00\x01")
    (ws / "t.txt").write_text("one\ntwo\n")
    result = make_tools(ws)["read_file"].run(tool_input)
    assert result.is_error
    assert message in result.content


def test_read_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    result = run(make_tools(ws), "read_file", path="empty.txt")
    assert not result.is_error and "empty" in result.content


# --------------------------------------------------------------------------------- write_file


def test_write_file_creates_parents_and_reports_bytes(ws: Path) -> None:
    tools = make_tools(ws)
    result = run(tools, "write_file", path="src/pkg/mod.py", content="café\n")
    assert result == ToolResult("Wrote 6 bytes to src/pkg/mod.py (new file).")
    assert (ws / "src/pkg/mod.py").read_bytes() == "café\n".encode()
    again = run(tools, "write_file", path="src/pkg/mod.py", content="")
    assert "0 bytes" in again.content and "overwrote" in again.content
    assert (ws / "src/pkg/mod.py").read_bytes() == b""


def test_write_file_keeps_newlines_exactly(ws: Path) -> None:
    run(make_tools(ws), "write_file", path="crlf.txt", content="a\r\nb\n")
    assert (ws / "crlf.txt").read_bytes() == b"a\r\nb\n"


def test_write_file_errors(ws: Path) -> None:
    (ws / "d").mkdir()
    tools = make_tools(ws)
    assert "directory" in run(tools, "write_file", path="d", content="x").content
    assert run(tools, "write_file", path=".", content="x").is_error
    missing = run(tools, "write_file", path="a.txt")
    assert missing.is_error and "content" in missing.content
    wrong = run(tools, "write_file", path="a.txt", content=["x"])
    assert wrong.is_error and "string" in wrong.content
    assert not (ws / "a.txt").exists()


# --------------------------------------------------------------------------------- edit_file


def test_edit_file_replaces_unique_string(ws: Path) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = run(
        make_tools(ws), "edit_file", path="m.py", old_string="return 2", new_string="return 3"
    )
    assert result == ToolResult("Edited m.py: replaced 1 occurrence (first at line 5).")
    assert (ws / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


def test_edit_file_ambiguous_needs_replace_all(ws: Path) -> None:
    (ws / "m.py").write_text("x = 1\nx = 2\nx = 3\n")
    tools = make_tools(ws)
    result = run(tools, "edit_file", path="m.py", old_string="x =", new_string="y =")
    assert result.is_error and "3 times" in result.content and "replace_all" in result.content
    assert (ws / "m.py").read_text() == "x = 1\nx = 2\nx = 3\n"
    done = run(
        tools, "edit_file", path="m.py", old_string="x =", new_string="y =", replace_all=True
    )
    assert not done.is_error and "3 occurrences" in done.content
    assert (ws / "m.py").read_text() == "y = 1\ny = 2\ny = 3\n"


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"path": "m.py", "old_string": "absent", "new_string": "x"}, "not found"),
        ({"path": "m.py", "old_string": "", "new_string": "x"}, "must not be empty"),
        ({"path": "m.py", "old_string": "alpha", "new_string": "alpha"}, "identical"),
        ({"path": "nope.py", "old_string": "a", "new_string": "b"}, "file not found"),
        ({"path": "bin.dat", "old_string": "a", "new_string": "b"}, "binary"),
        ({"path": "latin1.txt", "old_string": "a", "new_string": "b"}, "UTF-8"),
        ({"path": "m.py", "old_string": "alpha"}, "new_string"),
        (
            {"path": "m.py", "old_string": "alpha", "new_string": "b", "replace_all": "yes"},
            "true or false",
        ),
    ],
)
def test_edit_file_errors(ws: Path, tool_input: dict[str, Any], message: str) -> None:
    (ws / "m.py").write_text("alpha beta\n")
    (ws / "bin.dat").write_bytes(b"a\x00b")
    (ws / "latin1.txt").write_bytes("a café".encode("latin-1"))
    result = make_tools(ws)["edit_file"].run(tool_input)
    assert result.is_error
    assert message in result.content
    assert (ws / "m.py").read_text() == "alpha beta\n"


def test_read_file_past_the_end_of_a_one_line_file_says_line(ws: Path) -> None:
    (ws / "one.txt").write_text("only\n")
    result = run(make_tools(ws), "read_file", path="one.txt", offset=5)
    assert "which has 1 line" in result.content and "1 lines" not in result.content
