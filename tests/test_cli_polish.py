"""The polish of the terminal agent (issue 19), piece by piece: Markdown replies (plain when
piped), the file tools' compact diff, the spinner's time and hint, folded pastes and a history
file that stays small, the start line, widths in display cells, plurals. The same points in a
real terminal are in test_pty_polish.py."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_api import text_reply
from support.agent_tools import make_tools, run
from support.cli import CLI, WINDOW

from agentloop._agent.file_diff import DIFF_MAX_LINES, FileChange, compact_diff
from agentloop._cli import editor
from agentloop._cli.cells import cells, cut_cells, wrap_cells
from agentloop._cli.editor import Pastes, trim_history
from agentloop._cli.render import Column, fit_table
from agentloop._cli.reply_markdown import MarkdownStream, complete_blocks
from agentloop._cli.slash_help import help_text
from agentloop._cli.spinner import spinner_line
from agentloop._cli.ui import TerminalUI, change_lines, notice, start_line

SGR = re.compile(r"\x1b\[[0-9;]*m")
REPLY = (
    "# Plan\n\nSome **bold** words and `code`.\n\n- first item\n- second item\n\n"
    "```python\nprint('hi')\n```\n\nDone."
)


class Screen(io.StringIO):
    """An output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def stream_reply(ui: TerminalUI, text: str) -> None:
    for start in range(0, len(text), 7):  # arriving in pieces, as a stream does
        ui.on_text(text[start : start + 7])
    ui.on_reply(None)


# ---------------------------------------------------------------------------- Markdown


def test_a_reply_on_a_terminal_is_drawn_as_markdown() -> None:
    out = Screen()
    stream_reply(TerminalUI(out, io.StringIO(), tty=False), REPLY)
    drawn = out.getvalue()
    plain = SGR.sub("", drawn)
    assert "\x1b[1mbold" in drawn  # emphasis is emphasis, not asterisks
    assert "**" not in plain and "```" not in plain and "# Plan" not in plain
    assert "• first item" in plain and "• second item" in plain
    assert "print('hi')" in plain and "Done." in plain
    assert not any(line.endswith(" ") for line in plain.splitlines())  # no padding to copy


def test_a_piped_reply_stays_the_text_that_came() -> None:
    out = io.StringIO()
    stream_reply(TerminalUI(out, io.StringIO(), tty=False), REPLY)
    assert out.getvalue() == REPLY + "\n"


def test_blocks_are_drawn_once_complete_and_code_blocks_are_not_split() -> None:
    blocks, rest = complete_blocks("para one\n\n```\nx = 1\n\ny = 2\n```\nnext li")
    assert blocks == ["para one\n", "```\nx = 1\n\ny = 2\n```\n"]
    assert rest == "next li"
    drawn: list[str] = []
    stream = MarkdownStream(Screen(), lambda: drawn.append("spinner stopped"), width=60)
    stream.feed("half a para")
    assert drawn == []  # nothing complete yet: the spinner keeps turning
    stream.feed("graph\n\n")
    assert drawn == ["spinner stopped"]


def test_while_a_block_is_on_its_way_the_spinner_says_so() -> None:
    out = Screen()
    ui = TerminalUI(out, io.StringIO(), tty=True)
    try:
        ui.on_text("the first half of a para")
        assert ui.spinner.running and out.getvalue() == ""
        ui.on_text("graph\n\n")
        assert not ui.spinner.running and "the first half of a paragraph" in out.getvalue()
    finally:
        ui.end_turn()
    assert not ui.spinner.running


# ---------------------------------------------------------------------------- diffs


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


# ---------------------------------------------------------------------------- the spinner


def test_the_spinner_shows_elapsed_time_and_how_to_interrupt() -> None:
    assert spinner_line("⠋", "Thinking…", 3.4) == "⠋ Thinking… (3s · Ctrl-C to interrupt)"
    assert spinner_line("⠋", "Thinking…", 65) == "⠋ Thinking… (1m 05s · Ctrl-C to interrupt)"


# ---------------------------------------------------------------------------- pastes, history


def test_a_long_paste_is_folded_into_a_label_and_expanded_when_sent() -> None:
    pastes = Pastes()
    text = "".join(f"row {n}\n" for n in range(300))
    label = pastes.fold(text)
    assert label == "[pasted 300 lines]"
    assert pastes.fold("short\npaste") == "short\npaste"
    other = pastes.fold(text.replace("row", "col"))
    assert other == "[pasted 300 lines #2]"
    assert pastes.expand(f"look: {label} and {other}") == (
        f"look: {text} and {text.replace('row', 'col')}"
    )
    assert pastes.fold("x" * 5000) == "[pasted 5,000 characters]"


def test_a_history_file_past_its_cap_is_cut_to_its_newest_entries(tmp_path: Path) -> None:
    path = tmp_path / "history"
    entries = [f"\n# 2026-01-01 00:00:00\n+message {n} {'x' * 400}\n" for n in range(5000)]
    path.write_text("".join(entries) + "\n# 2026\n+" + "y" * 100_000 + "\n\n# 2026\n+last one\n")
    assert path.stat().st_size > editor.HISTORY_MAX_BYTES
    trim_history(path)
    kept = path.read_text()
    assert path.stat().st_size <= editor.HISTORY_MAX_BYTES // 2
    assert kept.endswith("\n# 2026\n+last one\n") and "message 4999" in kept
    assert "y" * 1000 not in kept and "message 0 " not in kept
    assert kept.startswith("\n# ")


# ---------------------------------------------------------------------------- start line


def test_the_start_line_names_the_model_and_the_window() -> None:
    line = start_line("claude-haiku-4-5", 200_000, "builtin", "/work/app")
    assert line == (
        "agentloop · claude-haiku-4-5 · 200,000-token window · /work/app · "
        "/help for commands and keys"
    )
    assert "12,000-token window (--context-window)" in start_line("m", 12_000, "override", "/w")


# ---------------------------------------------------------------------------- display cells


def test_widths_are_display_cells() -> None:
    assert cells("abc") == 3 and cells("日本語") == 6 and cells("👍") == 2 and cells("é") == 1
    assert cut_cells("日本語のタイトル", 7) == "日本語…"
    assert all(cells(line) <= 10 for line in wrap_cells("日本語の 文章は とても 長いです", 10))
    rows = [["a1", "日本語のタイトル"], ["b2", "plain title"]]
    lines = fit_table([Column("ID"), Column("TITLE", flex=True, min_width=5)], rows, 14)
    assert [cells(line) <= 14 for line in lines] == [True] * 3
    assert lines[1] == "a1  日本語の…"  # 9 cells: a wide character does not split


@pytest.mark.parametrize("width", [40, 60, 80, 100])
def test_help_wraps_to_the_terminal_width(width: int) -> None:
    text = help_text(width)
    assert all(cells(line) <= width for line in text.splitlines())

    def words(help_: str) -> list[str]:
        return [word for word in help_.split() if word != "·"]

    assert words(text) == words(help_text(None))  # nothing lost, only wrapped


# ---------------------------------------------------------------------------- plurals


def test_plurals_are_right_for_one() -> None:
    summary = SimpleNamespace(
        tokens_before=1000,
        tokens_before_source="api",
        tokens_after=200,
        tokens_after_source="api",
        original_message_count=1,
    )
    transition: Any = SimpleNamespace(summary=summary, new_session_id="abcdefghij")
    assert "compacted: 1 message → new session abcdefgh" in notice(transition)


def test_one_calibration_sample_is_one_sample(cli: CLI) -> None:
    cli.script.add(text_reply("hello back"))
    result = cli.run("--context-window", WINDOW, stdin="hello\n/context\n")
    assert result.code == 0, result.err
    assert "(1 sample)" in result.err and "1 samples" not in result.err


def test_read_file_past_the_end_of_a_one_line_file_says_line(ws: Path) -> None:
    (ws / "one.txt").write_text("only\n")
    result = run(make_tools(ws), "read_file", path="one.txt", offset=5)
    assert "which has 1 line" in result.content and "1 lines" not in result.content
