"""The ``-r`` picker (``_cli/picker``) in a real pseudo-terminal: the recent conversations
offered when no id is given, a number or the arrow keys choosing one, the table fitting 80
columns."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI
from support.pty import ANSI, Model, Terminal, launch, model, workspace

from agentloop._cli.cells import cells

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch", "model", "workspace"]  # the pty fixtures, used here

pytest.importorskip("prompt_toolkit")

COLUMNS = 80


def _visible_lines(raw: str) -> list[str]:
    """The lines as a terminal leaves them: of each, what follows its last carriage return
    (a spinner's frames and redrawn prompts overwrite each other), escapes removed."""
    lines = raw.replace("\r\n", "\n").replace("\0EOF", "").split("\n")
    return [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in lines]


def test_resume_without_an_id_offers_a_picker(
    launch: Callable[..., Terminal], model: Model, piped: Callable[..., str]
) -> None:
    for topic in ("the older topic", "the newer topic"):
        model.replies.append(text_reply(f"about {topic}"))
        piped(f"{topic}\n")
    from sessions import open_store

    with open_store() as store:
        newer, older = (c.head.id for c in store.list_conversations(limit=None))
    term = launch("-r")
    term.expect("Recent conversations in")
    term.expect(r"1 .* the newer topic")
    term.expect(r"2 .* the older topic")
    term.expect(r"Resume which\? \[↑↓ or 1-2, Enter: resume, q: none\] 1")
    term.send("2\r")
    term.expect(f"Resuming session {older[:8]}")
    term.expect("you: the older topic")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    assert newer != older


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
