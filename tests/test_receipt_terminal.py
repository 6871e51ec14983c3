"""The compaction receipt where people see it: ``/context`` in a real terminal after a
compaction, and ``sessions show`` (text and ``--json``) of the compacted session."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler
from support.pty import Terminal

from agentloop._cli.transcript import show_command

OLDER = ("-m", "claude-haiku-4-5")
"""A model the test server does not compact on demand: the scripted summaries are written."""
SMALL = ("--context-window", "16000", "--compaction-threshold", "0.6")
HEADER = "Left out of the context by the last compaction: "


def _seed_compacted(cli: CLI, turns: int = 17) -> None:
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    seeded = cli.run(*OLDER, *SMALL, stdin="\n".join(conversation_lines(turns, 250)))
    assert seeded.code == 0, seeded.err
    assert len(seeded.notices) == 1, seeded.err


@pytest.mark.heavy
def test_context_shows_what_the_last_compaction_left_out(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    _seed_compacted(cli)
    term = launch(*OLDER, *SMALL, "-c", columns=100)
    term.expect("Resuming session")
    term.prompt()
    term.send("/context\r")
    term.expect(HEADER + r"\d+ of \d+ facts \(search_history finds each\)")
    term.expect(r"user requests: \d+ of \d+ in context")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def test_sessions_show_gives_the_receipt_as_text_and_json(cli: CLI) -> None:
    _seed_compacted(cli)
    store = cli.store()
    try:
        child = next(s for s in store.list_sessions() if s.parent_id is not None)
        root = next(s for s in store.list_sessions() if s.parent_id is None)
        text = io.StringIO()
        show_command(store, text, child.id)
        assert HEADER in text.getvalue()
        assert "user requests: " in text.getvalue()
        data = io.StringIO()
        show_command(store, data, child.id, as_json=True)
        receipt = json.loads(data.getvalue())["receipt"]
        assert receipt["requests"]["facts"] > 0
        assert all("search" in item for item in receipt["requests"]["left_out"])
        plain = io.StringIO()
        show_command(store, plain, root.id, as_json=True)
        assert json.loads(plain.getvalue())["receipt"] is None  # nothing compacted made it
    finally:
        store.close()
