"""Replies drawn as Markdown (``_cli/reply_markdown``): on a terminal, block by block as they
stream in, code blocks never split, the spinner turning while a block is on its way; piped, the
text that came. The same in a real terminal is in test_pty_ui.py."""

from __future__ import annotations

import io
import re

from support.screen import Screen

from agentloop._cli.reply_markdown import MarkdownStream, complete_blocks
from agentloop._cli.ui import TerminalUI

SGR = re.compile(r"\x1b\[[0-9;]*m")
REPLY = (
    "# Plan\n\nSome **bold** words and `code`.\n\n- first item\n- second item\n\n"
    "```python\nprint('hi')\n```\n\nDone."
)


def stream_reply(ui: TerminalUI, text: str) -> None:
    for start in range(0, len(text), 7):  # arriving in pieces, as a stream does
        ui.on_text(text[start : start + 7])
    ui.on_reply(None)


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
