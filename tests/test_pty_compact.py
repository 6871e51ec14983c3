"""``/compact`` and ``/undo-compaction`` in a real terminal: a preview with instructions writes
nothing, and an undo with nothing to undo says so. (The status line while the circuit breaker
waits is in test_pty_ui.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI
from support.pty import Terminal, launch

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch"]  # the pty fixture, used here


def test_a_preview_with_instructions_and_an_undo_with_nothing_to_undo_in_a_terminal(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    cli.script.add(text_reply("hello to you"), text_reply("and again"))
    term = launch()
    term.prompt()
    term.send("hello\r")
    term.expect("hello to you")
    term.prompt()
    term.send("hello again\r")
    term.expect("and again")
    term.prompt()
    term.send("/compact --dry-run keep the hello\r")
    term.expect(r"Compaction preview \(nothing was compacted, nothing written\)")
    term.expect(r"instructions: 'keep the hello' \(the summary would follow them")
    term.prompt()
    term.send("/undo-compaction\r")
    term.expect(r"Nothing to undo: session [0-9a-z]{8} did not come from a compaction")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    assert cli.script.summaries == []
    with cli.store() as store:
        (session,) = store.list_sessions(limit=None)
        assert session.message_count == 4 and session.parent_id is None
