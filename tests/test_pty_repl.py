"""The interactive agent in a real pseudo-terminal: keys, interrupts, paste, type-ahead.

Each test starts ``agentloop`` in a pty as its controlling terminal (so Ctrl-C is a real SIGINT
while the agent works, and a key while the prompt edits), against the fake Messages API on
127.0.0.1. The model's answers are held back with events where a test needs the agent to be
busy; nothing waits for a guessed amount of time.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_api import ReplySpec, text_reply, tool_reply
from support.cli import CLI
from support.pty import (
    TIMEOUT,
    Model,
    Terminal,
)

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

pytest.importorskip("prompt_toolkit")

# The CLI with a thread dump on SIGUSR1 (faulthandler), so a test can see which threads live.


def test_ctrl_c_clears_the_line_and_twice_on_an_empty_line_quits(
    launch: Callable[..., Terminal], model: Model
) -> None:
    model.replies.append(text_reply("hi there"))
    term = launch()
    term.prompt()
    term.send("draft text")
    term.expect("draft text")
    term.send("\x03")  # clears the line, and does not arm quitting
    term.send("\x03")  # the first press on the empty line: arms
    term.expect("Press Ctrl-C again to quit")  # still running: the text did not count
    term.send("hello\r")
    term.expect("hi there")
    term.prompt()
    assert [model.last_text(i) for i in range(len(model.requests))] == ["hello"]
    term.send("\x03")
    term.expect("Press Ctrl-C again to quit")
    term.send("\x03")
    assert term.wait() == 0
    assert re.search(r"Session [0-9a-z]{8} saved · continue with", term.screen)
    assert len(model.requests) == 1


def test_ctrl_d_on_an_empty_line_quits_and_nothing_is_stored(
    launch: Callable[..., Terminal], model: Model
) -> None:
    term = launch()
    term.prompt()
    term.send("abc")
    term.expect("abc")
    term.send("\x04")  # not on an empty line: it edits, it does not quit
    term.send("\x7f\x7f\x7f")
    term.send("\x04")
    assert term.wait() == 0
    assert model.requests == []
    assert "saved" not in term.screen
    from sessions import open_store

    with open_store() as store:
        assert store.list_sessions(limit=None) == []


def test_a_paste_is_one_message_and_newlines_can_be_typed(
    launch: Callable[..., Terminal], model: Model
) -> None:
    model.replies += [text_reply("got the paste"), text_reply("got the lines")]
    term = launch()
    term.prompt()
    term.send("\x1b[200~line one\nline two\nline three\x1b[201~")
    term.send("\r")
    term.expect("got the paste")
    term.prompt()
    term.send("line a\\\r")
    term.send("line b\x1b\r")
    term.send("line c\r")
    term.expect("got the lines")
    assert [model.last_text(i) for i in range(len(model.requests))] == [
        "line one\nline two\nline three",
        "line a\nline b\nline c",
    ]
    term.prompt()  # before the editor takes the terminal, a Ctrl-D there would be end-of-file
    term.send("\x04")
    assert term.wait() == 0


def test_history_persists_across_runs(launch: Callable[..., Terminal], model: Model) -> None:
    model.replies += [text_reply("first answer"), text_reply("second answer")]
    term = launch()
    term.prompt()
    term.send("remember this line\r")
    term.expect("first answer")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0

    again = launch()
    again.prompt()
    again.send("\x1b[A")
    again.expect("remember this line")
    again.send("\r")
    again.expect("second answer")
    assert model.last_text() == "remember this line"
    again.prompt()
    again.send("\x04")
    assert again.wait() == 0


def test_consent_is_not_answered_by_type_ahead_and_the_text_is_kept(
    launch: Callable[..., Terminal], model: Model, workspace: Path
) -> None:
    asked = threading.Event()
    typed = threading.Event()

    def after_typing() -> ReplySpec:
        asked.set()
        typed.wait(TIMEOUT)
        return tool_reply(("run_command", {"command": "touch made.txt"}))

    model.replies += [after_typing, text_reply("all done"), text_reply("got the next one")]
    term = launch()
    term.prompt()
    term.send("make the file\r")
    assert asked.wait(TIMEOUT)
    term.expect("Thinking…")  # something shows between sending and the first token
    # Typed while the agent works: not echoed over the reply, queued for later.
    ahead = "next message\r"
    term.send(ahead)
    deadline = time.monotonic() + TIMEOUT
    while term.queued_input() < len(ahead) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert term.queued_input() >= len(ahead)
    typed.set()
    term.expect(r"Run `touch made\.txt`\? \[y/N/a\(lways\)\]")
    term.send("y\r")
    term.expect("all done")
    # The typed-ahead text waits in the next prompt; Enter sends it.
    term.expect("› next message")
    assert (workspace / "made.txt").exists()
    term.send("\r")
    term.expect("got the next one")
    assert model.last_text() == "next message"
    assert "typed meanwhile is kept" in term.screen
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def _seed_conversation(piped: Callable[..., str], model: Model) -> None:
    """Four stored exchanges in the workspace (via the pipe mode), enough to compact."""
    words = " ".join(f"word{n}" for n in range(100))
    model.replies += [text_reply(f"answer {n} {words}") for n in range(4)]
    piped("\n".join(f"request {n} {words}" for n in range(4)) + "\n")
    model.requests.clear()
    model.summary_started.clear()


def test_ctrl_c_during_compact_stops_the_spinner_and_returns_to_the_prompt(
    launch: Callable[..., Terminal], model: Model, piped: Callable[..., str]
) -> None:
    _seed_conversation(piped, model)
    release = threading.Event()
    model.summary_release = release
    model.replies.append(text_reply("still here"))
    term = launch("--continue")
    try:
        term.expect("Resuming session")
        term.prompt()
        term.send("/compact\r")
        assert model.summary_started.wait(TIMEOUT)
        term.expect("Compacting conversation…")
        term.send("\x03")
        term.expect(r"\(interrupted\)")
        term.prompt()
        # The spinner's line was cleared before anything else was written.
        raw = term.raw
        last_frame = raw.rindex("Compacting conversation…")
        assert "\r\x1b[K" in raw[last_frame : raw.index("(interrupted)", last_frame)]
        # No thread is left drawing: a dump of every thread shows no spinner.
        term.process.send_signal(signal.SIGUSR1)
        term.send("/help\r")
        term.expect("Commands:")
        dump = term.screen[term.screen.rindex("/compact\n") :]
        assert "Current thread" in dump or "Thread 0x" in dump
        assert "spinner.py" not in dump
        # The session goes on.
        term.prompt()
        term.send("are you there?\r")
        term.expect("still here")
        assert model.last_text() == "are you there?"
        term.prompt()
        term.send("\x04")
        assert term.wait() == 0
        assert "Traceback" not in term.screen
    finally:
        release.set()


# -- /clear and /model ---------------------------------------------------------------------------

COLUMNS = 80


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
