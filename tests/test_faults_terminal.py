"""Fault injection, the store's disk fills and frees while the agent runs in a real
pseudo-terminal: the reply shown is said not to be saved, no model call is made while the store
refuses writes (a message typed meanwhile is not sent), and once the disk has room again the
next message writes what was kept and the conversation goes on, whole.

The disk fills for real: the process's file-size limit set from outside (``prlimit``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fake_api import FakeAnthropicServer, ReplySpec, text_reply
from support.faults import fill_sqlite, free_sqlite, texts
from support.pty import Model, Terminal

from agentloop._adapters.records import from_record
from sessions import open_store


def test_in_a_terminal_a_lost_reply_is_said_and_nothing_is_sent_until_the_store_takes_it(
    fake_api: FakeAnthropicServer, launch: Callable[..., Terminal], model: Model
) -> None:
    store = Path(os.environ["AGENTLOOP_HOME"]) / "sessions.db"
    terminal = launch()

    def fill_then_answer() -> ReplySpec:
        fill_sqlite(store, terminal.process.pid)  # the disk fills while the reply streams
        return text_reply("second answer")

    model.replies = [text_reply("first answer"), fill_then_answer, text_reply("fourth answer")]
    try:
        terminal.prompt()
        terminal.send("first\r")
        terminal.expect("first answer")
        terminal.prompt()
        terminal.send("second\r")
        terminal.expect("second answer")  # shown...
        # (The terminal wraps at words: the store's path may begin a line of its own, and where
        # its line ends depends on the path's length, longer on a pytest-xdist worker.)
        terminal.expect(
            r"the reply was not saved: session store\s+\S+sessions\.db:\s+disk\s+I/O\s+error"
        )
        terminal.expect(r"\(not saved: the store refuses writes")  # ...and said to be lost
        terminal.prompt()
        terminal.send("third\r")
        terminal.expect("still refuses writes, so this message was not sent")
        terminal.prompt()
        assert len(model.requests) == 2  # no model call while the store refuses writes
        free_sqlite(terminal.process.pid)
        terminal.send("fourth\r")
        terminal.expect("fourth answer")
        terminal.prompt()
        terminal.send("/exit\r")
        assert terminal.wait() == 1  # turns failed
    finally:
        free_sqlite(terminal.process.pid)
    assert "Traceback" not in terminal.screen
    said = ["first", "first answer", "second", "second answer", "fourth", "fourth answer"]
    sent = model.requests[-1]["messages"]
    # 5.x replies begin with thinking: the first text block of each message.
    assert [next(b["text"] for b in m["content"] if "text" in b) for m in sent] == said[:-1]
    with open_store(store, read_only=True) as opened:
        (session,) = opened.list_sessions(limit=None)
        assert texts([from_record(m) for m in opened.get_messages(session.id)]) == said
