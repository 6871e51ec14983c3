"""Issue 30 in a real terminal of 80 columns against the test server: the status line while
compaction waits (2), Ctrl-C on a line with text (8), everything the terminal prints wrapped at
word boundaries (3), ``/clear`` and ``/model`` (10), the ``-r`` picker (4)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler
from support.pty import ANSI, Terminal, launch

from agentloop._cli.cells import cells

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch"]  # the pty fixture, used here

COLUMNS = 80
OLDER = ("-m", "claude-haiku-4-5")
"""A model the test server does not compact on demand: the scripted summaries are written."""
SMALL = ("--context-window", "16000", "--compaction-threshold", "0.6")


def _seed_compacted(cli: CLI, turns: int) -> str:
    """A conversation compacted automatically once, near its end; returns the notice."""
    lines = conversation_lines(turns, 250)
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    seeded = cli.run(*OLDER, *SMALL, stdin="\n".join(lines))
    assert seeded.code == 0, seeded.err
    assert len(seeded.notices) == 1, seeded.err
    return seeded.notices[0].group(0)


def test_while_compaction_waits_the_status_line_shows_the_threshold_in_force(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    _seed_compacted(cli, 17)
    cli.script.add(text_reply("still answering"))

    term = launch(*OLDER, *SMALL, "-c", columns=COLUMNS)
    term.expect("Resuming session")
    term.prompt()
    term.send("/undo-compaction\r")
    term.expect("Compaction undone")
    held = term.expect(r"automatic compaction waits until it\s+passes\s+[\d,]+\s+tokens")
    term.prompt()
    term.send("go on\r")
    term.expect("still answering")
    line = term.expect(r"context \d+% · compacts at \d+%[^\n]*")
    # One threshold, the one in force, and why: never "compacts at 60%" beside "paused until".
    found = re.fullmatch(
        r"context (\d+)% · compacts at (\d+)% \(raised from 60%: a compaction was just undone\)",
        line,
    )
    assert found is not None, line
    used, raised = int(found[1]), int(found[2])
    waits = int(held.split()[-2].replace(",", ""))
    assert used < raised == round(100 * waits / 16_000)
    assert raised <= 85  # never into the reply reserve
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def _visible_lines(raw: str) -> list[str]:
    """The lines as a terminal leaves them: of each, what follows its last carriage return
    (a spinner's frames and redrawn prompts overwrite each other), escapes removed."""
    lines = raw.replace("\r\n", "\n").replace("\0EOF", "").split("\n")
    return [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in lines]


def test_what_the_terminal_prints_is_wrapped_at_words_to_its_width(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    _seed_compacted(cli, 17)
    cli.script.add(text_reply("a short answer"))

    term = launch(*OLDER, *SMALL, "-c", columns=COLUMNS)
    term.expect("for commands and keys")  # the banner first
    term.expect("Resuming session")
    term.prompt()
    term.send("/context\r")
    term.expect("Session: ")
    term.prompt()
    term.send("/cost\r")
    term.expect("The whole conversation")
    term.expect("output [\\d,]+ tokens")
    term.prompt()
    term.send("/compact\r")
    term.expect("Conversation compacted")
    term.prompt()
    term.send("one more\r")
    term.expect("a short answer")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    screen = term.raw
    for what in (
        "Resuming session",
        "agentloop · ",
        "Context: ",
        "Conversation compacted",
        "Session ",
    ):
        assert what in screen
    lines = [line for line in _visible_lines(screen) if line.strip()]
    too_wide = [line for line in lines if cells(line) > COLUMNS]
    assert too_wide == []
    # What was wrapped was broken between words: the figures and words are whole.
    text = " ".join(" ".join(lines).split())
    assert re.search(
        r"Conversation compacted: \d+ messages → new session \w{8} \(~?[\d,]+ → ~?[\d,]+ tokens\)",
        text,
    )
    assert re.search(
        r"Session \w{8} saved · continue with `agentloop --continue` or `agentloop --resume \w{8}`",
        text,
    )
    assert "agentloop · claude-haiku-4-5 · 16,000-token window" in text


def test_clear_starts_a_fresh_session_and_keeps_the_old_one_resumable(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    cli.script.add(text_reply("first answer"), text_reply("fresh answer"), text_reply("back"))
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send("the first conversation\r")
    term.expect("first answer")
    term.prompt()
    term.send("/clear\r")
    said = term.expect(r"Fresh conversation: new session \w{8}[^`]+`agentloop --resume \w{8}`")
    old = said.split("--resume ")[1].strip("`")
    term.prompt()
    term.send("a new topic\r")
    term.expect("fresh answer")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    # The fresh session's request carried none of the old conversation.
    fresh = cli.script.conversation[-1]["messages"]
    assert len(fresh) == 1 and "a new topic" in str(fresh[0]["content"])
    with cli.store() as store:
        sessions = store.list_sessions(limit=None)
        assert len(sessions) == 2 and all(s.parent_id is None for s in sessions)
        (kept,) = [s for s in sessions if s.id.startswith(old)]
        assert kept.message_count == 2 and kept.status == "active"
    resumed = cli.run("-r", old, stdin="and the old one again\n")
    assert resumed.code == 0, resumed.err
    assert "the first conversation" in str(cli.script.conversation[-1]["messages"])


def test_model_shows_and_switches_the_model_saying_what_it_costs(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    cli.script.add(text_reply("from sonnet"), text_reply("from opus"))
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send("hello\r")
    term.expect("from sonnet")
    term.prompt()
    term.send("/model\r")
    term.expect(r"Model: claude-sonnet-5-5 \(/model NAME switches for the next turns\)")
    term.prompt()
    term.send("/model claude-opus-5-5\r")
    term.expect("Model: claude-opus-5-5 for the next turns")
    term.expect("prompt")
    term.expect("cache starts over")
    term.expect("may be dropped")
    term.prompt()
    term.send("and now?\r")
    term.expect("from opus")
    term.prompt()
    term.send("/model\r")
    term.expect(r"Model: claude-opus-5-5 \(")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    assert [body["model"] for body in cli.script.conversation] == [
        "claude-sonnet-5-5",
        "claude-opus-5-5",
    ]
    assert "/help" not in term.screen.split("/model claude-opus-5-5")[0].split("from sonnet")[1]


def test_the_resume_picker_fits_80_columns_and_takes_arrow_keys(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    topics = [
        "the older topic, with a title long enough to need cutting at eighty columns wide",
        "the middle topic",
        "the newer topic",
    ]
    for topic in topics:
        cli.script.add(text_reply(f"about {topic[:16]}"))
        assert cli.run("-p", topic).code == 0
    with cli.store() as store:
        newest, middle, oldest = (c.head.id for c in store.list_conversations(limit=None))

    term = launch("-r", columns=COLUMNS)
    term.expect("Recent conversations in")
    term.expect(r"Resume which\? \[↑↓ or 1-3, Enter: resume, q: none\] 1")
    term.send("\x1b[B")  # ↓: the second
    term.expect(r"q: none\] 2")
    term.send("\x1b[B\x1b[B")  # ↓ ↓: the third, and no further
    term.expect(r"q: none\] 3")
    term.send("\x1b[A")  # ↑: back to the second
    term.expect(r"q: none\] 2")
    term.send("\r")
    term.expect(f"Resuming session {middle[:8]}")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    table = term.raw.split("Recent conversations in")[1].split("Resume which")[0]
    rows = [line for line in _visible_lines(table) if line.strip()][1:]  # (the workspace)
    assert len(rows) == 4  # the header and three conversations, none wrapped
    assert all(cells(row) <= COLUMNS for row in rows), rows
    assert newest != oldest
