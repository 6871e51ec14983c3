"""The file tools' compact diff (``_agent/file_diff``): what ``edit_file`` and ``write_file``
carry, a long diff cut, and the UI showing it under the tool line."""

from __future__ import annotations

import io
from pathlib import Path

from support.agent_tools import make_tools, run

from agentloop._agent.file_diff import DIFF_MAX_LINES, FileChange, compact_diff
from agentloop._cli.ui import TerminalUI, change_lines


def test_edit_file_and_write_file_carry_a_compact_diff(ws: Path) -> None:
    tools = make_tools(ws)
    (ws / "m.py").write_text("".join(f"line {n}\n" for n in range(1, 31)))
    edited = run(tools, "edit_file", path="m.py", old_string="line 12\n", new_string="twelve\n")
    assert isinstance(edited, FileChange)
    assert edited.diff.splitlines() == [
        "1 line added, 1 removed",
        "   11   line 11",
        "   12 - line 12",
        "   12 + twelve",
        "   13   line 13",
    ]
    created = run(tools, "write_file", path="new.txt", content="a\nb\n")
    assert isinstance(created, FileChange)
    assert created.diff.splitlines() == ["new file, 2 lines", "    1 + a", "    2 + b"]
    rewritten = run(tools, "write_file", path="new.txt", content="a\nB\nc\n")
    assert isinstance(rewritten, FileChange)
    assert rewritten.diff.splitlines()[0] == "2 lines added, 1 removed"


def test_a_long_diff_is_cut_and_the_ui_shows_it_under_the_tool_line() -> None:
    diff = compact_diff("", "".join(f"{n}\n" for n in range(100)))
    assert len(diff.splitlines()) == DIFF_MAX_LINES + 2
    assert diff.splitlines()[-1].strip() == "… 84 more lines"
    err = io.StringIO()
    ui = TerminalUI(io.StringIO(), err, tty=False)
    ui.on_tool_call("edit_file", {"path": "m.py"})
    ui.on_tool_result("edit_file", {"path": "m.py"}, FileChange("Edited m.py", diff="1 line…"))
    assert err.getvalue() == "  ⏺ edit_file m.py\n    ⎿ 1 line…\n"
    coloured = change_lines("1 line added\n    3 + new", color=True)
    assert "\x1b[32m    3 + new\x1b[0m" in coloured
