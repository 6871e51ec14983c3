"""The newcomer's path, in one run through a real terminal of 80 columns against the
test server: the README's interactive command with a small window, 15 turns with ``/model``, a
reviewed compaction applied and undone, ``/clear``; then ``-r`` through the picker back to the
conversation left with ``/clear``: its window and its model are kept."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI
from support.loop_scripts import filler
from support.pty import ANSI, Terminal, launch

from agentloop._cli.compact_review import QUESTION

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch"]  # the pty fixture, used here

COLUMNS = 80
WINDOW = ("--context-window", "16000")


def _turn(term: Terminal, text: str, answer: str) -> None:
    term.send(text + "\r")
    term.expect(re.escape(answer.split(":")[0]))
    term.prompt()


def test_the_newcomers_path_keeps_the_window_and_the_model(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    requests = [filler(f"request {n}", 40) for n in range(15)]
    answers = [filler(f"answer {n}", 250) for n in range(15)]
    cli.script.add(*(text_reply(answer) for answer in answers))

    term = launch(*WINDOW, columns=COLUMNS)
    term.expect(r"agentloop · claude-sonnet-5-5 · 16,000-token window")
    term.prompt()
    for n in range(5):
        _turn(term, requests[n], answers[n])
    term.send("/model claude-opus-5-5\r")
    term.expect("Model: claude-opus-5-5 for the next turns")
    term.prompt()
    for n in range(5, 10):
        _turn(term, requests[n], answers[n])
    term.send("/compact --review\r")
    term.expect(re.escape(QUESTION.strip()))
    term.send("a\r")
    term.expect(r"Conversation compacted: \d+ messages")
    term.prompt()
    term.send("/undo-compaction\r")
    term.expect("Compaction undone")
    term.prompt()
    for n in range(10, 13):
        _turn(term, requests[n], answers[n])
    term.send("/clear\r")
    said = term.expect(r"Fresh conversation: new session \w{8}[^`]+`agentloop --resume \w{8}`")
    left = said.split("--resume ")[1].strip("`")
    term.prompt()
    for n in range(13, 15):
        _turn(term, requests[n], answers[n])
    term.send("\x04")
    assert term.wait() == 0
    assert [body["model"] for body in cli.script.conversation] == [
        *["claude-sonnet-5-5"] * 5,
        *["claude-opus-5-5"] * 10,
    ]
    with cli.store() as store:
        everything = store.list_sessions(limit=None)
        head = store.newest_descendant(left)
    assert {s.metadata.get("context_window") for s in everything} == {16_000}
    assert head.model == "claude-opus-5-5"

    # -r: the picker, the second conversation (the one left with /clear), Enter.
    cli.script.add(text_reply("where we were"))
    resumed = launch("-r", columns=COLUMNS)
    resumed.expect("Recent conversations in")
    resumed.expect(r"Resume which\? \[↑↓ or 1-\d, Enter: resume, q: none\] 1")
    resumed.send("\x1b[B\r")
    resumed.expect(f"Resuming session {head.id[:8]}")
    resumed.prompt()
    banner = " ".join(ANSI.sub("", resumed.raw).split())
    assert (
        "agentloop · claude-opus-5-5 · 16,000-token window (--context-window, kept from this "
        "conversation's start)"
    ) in banner
    resumed.send("/context\r")
    resumed.expect(r"Window: 16,000 tokens \(source:\s+session\)")
    resumed.prompt()
    resumed.send("where were we\r")
    resumed.expect("where we were")
    resumed.prompt()
    resumed.send("\x04")
    assert resumed.wait() == 0
    assert cli.script.conversation[-1]["model"] == "claude-opus-5-5"
    assert "request 12" in str(cli.script.conversation[-1]["messages"])
