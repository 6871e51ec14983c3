"""The loop under faults: replies that break off, messages that cannot fit, what is stored when.

The transport-level faults (a stream that drops, one that ends without ``message_stop``) are
driven through the real SDK against our own server in ``test_anthropic_faults.py``; here the
model double raises what the adapter raises, so the loop's policy is tested on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ContextFullError,
    ConversationCompacter,
    LoopEvents,
    ModelRequest,
    ModelResponse,
)
from agentloop._errors import IncompleteReplyError
from agentloop.testing import FunctionModel, Reply, ScriptedModel, text_reply
from sessions import NewMessage, Session, SqliteSessionStore, StoredMessage


class JournalStore(SqliteSessionStore):
    """A real store that writes down, in one journal with the UI's events, what it stored."""

    def __init__(self, path: Path, journal: list[str]) -> None:
        super().__init__(path)
        self.journal = journal

    def create_session(self, **options: Any) -> Session:
        self.journal.append("create")
        return super().create_session(**options)

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage | Mapping[str, Any]], **options: Any
    ) -> list[StoredMessage]:
        stored = super().append_messages(session_id, messages, **options)
        self.journal.append("append " + ",".join(str(m.role) for m in stored))
        return stored


class JournalEvents(LoopEvents):
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    def on_reply(self, response: ModelResponse) -> None:
        self.journal.append(f"shown {response.text}")

    def on_reply_incomplete(self, reason: str) -> None:
        self.journal.append(f"withdrawn: {reason}")


def journaled_loop(
    tmp_path: Path, model: Any, window: int = 100_000
) -> tuple[AgentLoop, list[str]]:
    journal: list[str] = []
    store = JournalStore(tmp_path / "sessions.db", journal)
    compacter = ConversationCompacter(
        model_name="m",
        context_window=window,
        model=model,
        max_output_tokens=1_000,
        settings=CompactionSettings(),
    )
    loop = AgentLoop(
        model=model,
        model_name="m",
        compacter=compacter,
        store=store,
        max_tokens=1_000,
        events=JournalEvents(journal),
    )
    return loop, journal


def test_a_reply_is_stored_before_it_is_shown_and_a_turn_is_one_write(tmp_path: Path) -> None:
    loop, journal = journaled_loop(
        tmp_path, ScriptedModel([text_reply("first"), text_reply("second")])
    )
    loop.run_turn("hello")
    loop.run_turn("again")
    # One transaction per reply (the user's message with it), and stored before shown.
    assert journal == [
        "create",
        "append user,assistant",
        "shown first",
        "append user,assistant",
        "shown second",
    ]


def test_a_reply_that_breaks_off_is_withdrawn_retried_once_and_never_stored(
    tmp_path: Path,
) -> None:
    attempts: list[int] = []

    def flaky(request: ModelRequest) -> Reply | str:
        attempts.append(1)
        if len(attempts) == 1:
            raise IncompleteReplyError("the API's reply broke off before its end")
        return "whole answer"

    loop, journal = journaled_loop(tmp_path, FunctionModel(flaky))
    result = loop.run_turn("hello")

    assert result.text == "whole answer"
    assert len(attempts) == 2
    assert journal[0].startswith("withdrawn: the API's reply broke off")
    assert journal[1:] == ["create", "append user,assistant", "shown whole answer"]
    assert loop.store is not None
    stored = [m.content for m in loop.store.get_messages(loop.session_id)]
    assert stored == [
        [{"type": "text", "text": "hello"}],
        [{"type": "text", "text": "whole answer"}],
    ]


def test_a_reply_that_breaks_off_twice_fails_the_turn_and_the_next_turn_runs(
    tmp_path: Path,
) -> None:
    replies: list[Exception | str] = [
        IncompleteReplyError("connection dropped"),
        IncompleteReplyError("connection dropped again"),
        "back",
    ]

    def flaky(request: ModelRequest) -> str:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    loop, _ = journaled_loop(tmp_path, FunctionModel(flaky))
    with pytest.raises(IncompleteReplyError, match="again"):
        loop.run_turn("hello")
    assert not loop.saved  # a first request that failed leaves no session behind
    assert loop.run_turn("still there?").text == "back"
    assert loop.store is not None
    roles = [m.role for m in loop.store.get_messages(loop.session_id)]
    assert roles == ["user", "assistant", "user", "assistant"]  # nothing said was lost
    placeholder = loop.store.get_messages(loop.session_id)[1].content[0]["text"]
    assert "interrupted or failed" in placeholder


def test_a_failed_turn_in_a_stored_session_keeps_the_users_message(tmp_path: Path) -> None:
    replies: list[Exception | str] = ["ok", IncompleteReplyError("a"), IncompleteReplyError("b")]

    def flaky(request: ModelRequest) -> str:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    loop, _ = journaled_loop(tmp_path, FunctionModel(flaky))
    loop.run_turn("first")
    with pytest.raises(IncompleteReplyError):
        loop.run_turn("second, which fails")
    assert loop.store is not None
    stored = loop.store.get_messages(loop.session_id)
    assert stored[-1].content[0]["text"] == "second, which fails"


def test_a_message_that_cannot_fit_the_window_is_refused_before_it_is_sent(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([text_reply("never")])
    loop, journal = journaled_loop(tmp_path, model, window=20_000)
    huge = "x" * 400_000  # one pasted line far larger than the window
    with pytest.raises(ContextFullError, match="was not sent"):
        loop.run_turn(huge)
    assert model.requests == []
    assert journal == []
    assert loop.messages == []
