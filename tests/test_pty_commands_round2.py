"""Issue 19 in a real terminal: the status line after a turn says why the context is past the
trigger and nothing compacted (the circuit breaker waits), instead of showing the same two
figures turn after turn."""

from __future__ import annotations

from collections.abc import Callable

from fake_api import text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler
from support.pty import Terminal, launch

__all__ = ["launch"]  # the pty fixture, used here


def test_the_status_line_says_the_breaker_waits_and_until_when(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    cli.script.summary = filler("summary", 7_000)  # longer than what it would replace
    lines = conversation_lines(12, 250)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    seeded = cli.run("--context-window", "9000", stdin="\n".join(lines))
    assert seeded.code == 0, seeded.err
    assert "Compaction skipped" in seeded.err
    cli.script.add(text_reply("still answering"))

    term = launch("-c")  # the window given at the start is kept
    term.expect("Resuming session")
    term.expect(r"9,000-token window \(--context-window, kept from this conversation's start\)")
    term.prompt()
    term.send("go on\r")
    term.expect("Compaction skipped")
    term.expect("still answering")
    line = term.expect(r"context \d+% · compacts at 85% · paused until \d+%: [^\n]+")
    assert line.endswith(": the last compaction saved too little")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


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
