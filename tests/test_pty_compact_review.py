"""``/compact --review`` in a real terminal of 80 columns against the test server: the
review (summary, ledger, question) fits the screen, wrapped between words; Ctrl-C at the
question aborts and writes nothing; ``r`` asks again with the instructions typed next; ``a``
applies the summary shown."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import SUMMARY, filler
from support.pty import ANSI, Terminal, launch

from agentloop._cli.cells import cells
from agentloop._cli.compact_review import ABORTED, AGAIN, QUESTION

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch"]  # the pty fixture, used here

COLUMNS = 80
ARGS = ("-m", "claude-haiku-4-5", "--context-window", "100000")
"""A model the test server does not compact on demand: the scripted summary is written."""


def _visible_lines(raw: str) -> list[str]:
    """The lines as the terminal leaves them (what follows each line's last carriage return)."""
    lines = raw.replace("\r\n", "\n").replace("\0EOF", "").split("\n")
    return [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in lines]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_review_fits_80_columns_and_its_keys_work(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    lines = conversation_lines(4, 120)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 120)))
    seeded = cli.run(*ARGS, stdin="\n".join(lines))
    assert seeded.code == 0, seeded.err
    with cli.store() as store:
        (parent,) = store.list_sessions(limit=None)

    term = launch(*ARGS, "-c", columns=COLUMNS)
    term.expect("Resuming session")
    term.prompt()
    term.send("/compact --review keep the hello\r")
    term.expect(re.escape(QUESTION.strip()))
    term.send("\x03")  # Ctrl-C at the question: abort
    term.expect(re.escape(ABORTED.split(";")[0]))
    term.prompt()
    with cli.store() as store:
        assert [s.id for s in store.list_sessions(limit=None)] == [parent.id]  # no child
        assert store.get_session(parent.id).message_count == parent.message_count

    term.send("/compact --review\r")
    term.expect(re.escape(QUESTION.strip()))
    term.send("r\r")
    term.expect(re.escape(AGAIN.strip()))
    term.send("keep it short\r")
    term.expect(r"following 'keep it\s+short'")
    term.expect(re.escape(QUESTION.strip()))
    term.send("a\r")
    term.expect(r"Conversation compacted: \d+ messages")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0

    # Three summaries were written (one per review) and the last one was applied, as shown.
    requests = cli.script.summaries
    assert len(requests) == 3
    assert "keep the hello" in str(requests[0]["messages"])
    assert "keep it short" in str(requests[2]["messages"])
    with cli.store() as store:
        (child,) = store.children(parent.id)
        (entry,) = store.compaction_history(child.id)
    assert entry.summary is not None and entry.summary.strip() == SUMMARY.strip()

    visible = [line for line in _visible_lines(term.raw) if line.strip()]
    assert [line for line in visible if cells(line) > COLUMNS] == []
    text = _words(" ".join(visible))
    # Wrapped between words: every line of the review is whole once the wraps are undone.
    assert re.search(
        r"Compaction review \(nothing is written until you apply\): \d+ messages → \d+ "
        r"messages \(~?[\d,]+ → ~?[\d,]+ tokens\)",
        text,
    )
    assert "Summary by agentloop, written now with 1 request, following 'keep the hello':" in text
    assert _words(SUMMARY) in text
    assert "Ledger carried into the compacted context: <ledger>" in text
    assert (
        "'unchanged' means no file tool changed the file since (a command may have); "
        "search_history finds every full output and request." in text
    )
    assert text.count(QUESTION.strip()) == 3
    assert _words(ABORTED) in text
    wrapped = [line for line in visible if line.startswith("    ") and "request" in line]
    assert wrapped  # the ledger's long lines did need wrapping (under a hanging indent)
