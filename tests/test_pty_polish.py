"""The polish of the terminal agent (issue 19) in a real pseudo-terminal: Markdown replies, the
start line, the spinner's time and hint, the file tools' diff, a folded paste and a small
history file, the ``-r`` picker, and ``/help`` and tables wrapped to the terminal in display
cells. The harness (a pty, the fake Messages API) is test_pty_repl.py's."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply, tool_reply
from support.pty import REPO, TIMEOUT, Model, Terminal, launch, model, workspace

from agentloop._cli.cells import cells

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch", "model", "workspace"]  # the fixtures, shared with test_pty_repl.py

pytest.importorskip("prompt_toolkit")

REPLY = (
    "Here is the **plan**:\n\n- first step\n- second step\n\n"
    "```python\nprint('hi')\n```\n\nThat is all."
)


def resize(term: Terminal, columns: int, rows: int = 30) -> None:
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def pipe_run(
    fake_api: FakeAnthropicServer, workspace: Path, stdin: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(
        ANTHROPIC_BASE_URL=fake_api.base_url, ANTHROPIC_API_KEY="test-key", PYTHONPATH=str(REPO)
    )
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=workspace,
        env=env,
        timeout=TIMEOUT,
    )


def test_the_start_line_and_a_reply_drawn_as_markdown(
    launch: Callable[..., Terminal], model: Model
) -> None:
    model.replies.append(text_reply(REPLY))
    term = launch("--context-window", "50000")
    # (wrapped at a word where the workspace's path makes it wider than the terminal)
    term.expect(r"agentloop · claude-[\w.-]+ · 50,000-token window \(--context-window\) ·\s")
    term.prompt()
    term.send("plan it\r")
    term.expect("• first step")
    term.expect("That is all.")
    term.prompt()
    assert "\x1b[1mplan" in term.raw  # bold, not asterisks
    assert "**plan**" not in term.screen and "```" not in term.screen
    term.send("\x04")
    assert term.wait() == 0


def test_a_piped_reply_stays_plain(
    fake_api: FakeAnthropicServer, model: Model, workspace: Path
) -> None:
    model.replies.append(text_reply(REPLY))
    done = pipe_run(fake_api, workspace, "plan it\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == REPLY + "\n"


def test_the_spinner_shows_the_time_and_how_to_interrupt(
    launch: Callable[..., Terminal], model: Model
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def held() -> ReplySpec:
        arrived.set()
        release.wait(10 * TIMEOUT)  # held until the test has seen the spinner, however slow
        return text_reply("finally")

    model.replies.append(held)
    term = launch()
    try:
        term.prompt()
        term.send("take your time\r")
        # The turn's own start (imports, counting) may take long on a loaded machine: wait for
        # the request itself; the spinner turns from before it was sent, and the reply is held
        # for as long as the test needs to see a second pass on it.
        assert arrived.wait(10 * TIMEOUT), "the request never reached the server"
        term.expect(r"Thinking… \([1-9]\d*s · Ctrl-C to interrupt\)")  # a second has passed
    finally:
        release.set()
    term.expect("finally")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def test_an_edit_shows_a_compact_diff(
    launch: Callable[..., Terminal], model: Model, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    edit = {"path": "notes.txt", "old_string": "line 12\n", "new_string": "twelve\n"}
    model.replies += [tool_reply(("edit_file", edit)), text_reply("edited")]
    term = launch()
    term.prompt()
    term.send("change line 12\r")
    term.expect("⎿ 1 line added, 1 removed")
    term.expect(r"12 - line 12\s+12 \+ twelve")
    term.expect("edited")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def test_a_long_paste_shows_as_a_label_and_the_history_stays_small(
    launch: Callable[..., Terminal], model: Model
) -> None:
    from agentloop._sessions import default_store_path

    history = default_store_path().parent / "history"
    history.parent.mkdir(parents=True, exist_ok=True)
    old = "".join(f"\n# 2026-01-01 00:00:00\n+old message {n} {'x' * 500}\n" for n in range(6000))
    history.write_text(old)  # 3 MB left by an earlier version
    model.replies.append(text_reply("got it"))
    pasted = "\n".join(f"row {n} of the log" for n in range(300))
    term = launch()
    term.prompt()
    term.send(f"\x1b[200~{pasted}\x1b[201~")
    term.expect(r"\[pasted 300 lines\]")
    assert "row 150 of the log" not in term.screen
    term.send("\r")
    term.expect("got it")
    assert model.last_text() == pasted  # the message holds the paste itself
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    kept = history.read_text()
    assert "[pasted 300 lines]" in kept and "row 150" not in kept
    assert history.stat().st_size < 1_000_000
    assert "old message 5999" in kept  # the newest entries stay


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


def test_help_and_tables_fit_the_terminal_in_display_cells(
    launch: Callable[..., Terminal], model: Model, piped: Callable[..., str]
) -> None:
    model.replies.append(text_reply("ok"))
    title = "日本語のとても長いタイトルのメッセージです、よろしくお願いします"
    piped(f"{title}\n")

    listing = launch("sessions", "list")
    resize(listing, 60)
    listing.expect("ID")
    assert listing.wait() == 0
    lines = [line for line in listing.screen.replace("\0EOF", "").splitlines() if line]
    assert any("日本語" in line for line in lines)
    assert all(cells(line) <= 60 for line in lines), lines

    term = launch()
    term.prompt()
    resize(term, 50)
    term.send("/help\r")
    text = term.expect(r"Commands:[\s\S]*compaction is off\)\.")
    assert all(cells(line) <= 50 for line in text.splitlines()), text
    assert re.search(r"\n\s+summary\)", text)  # wrapped under its column, not cut
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
