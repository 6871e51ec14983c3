"""Seed compaction semantics: NONE, sliding_window(n), SUMMARIZE; never destructive."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions import (
    CompactionError,
    CompactionStrategy,
    NewMessage,
    SqliteSessionStore,
    open_store,
)
from sessions._compaction import has_tool_result, sliding_window_start

SLIDING = CompactionStrategy.sliding_window


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    with open_store(tmp_path / "sessions.db", clock=Clock()) as opened:
        yield opened


def text(role: str, value: str, tokens: int | None = 10) -> NewMessage:
    return NewMessage(
        role=role,  # type: ignore[arg-type]
        content=[{"type": "text", "text": value}],
        token_estimate=tokens,
    )


def tool_call(call_id: str) -> NewMessage:
    return NewMessage(
        role="assistant",
        content=[{"type": "tool_use", "id": call_id, "name": "read", "input": {"p": call_id}}],
        token_estimate=10,
    )


def tool_result(call_id: str) -> NewMessage:
    return NewMessage(
        role="user",
        content=[{"type": "tool_result", "tool_use_id": call_id, "content": "data"}],
        token_estimate=10,
    )


def plain(n: int) -> list[NewMessage]:
    return [text("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]


def new_session(store: SqliteSessionStore, messages: list[NewMessage]) -> str:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, messages)
    return session.id


def texts(store: SqliteSessionStore, session_id: str) -> list[Any]:
    blocks = [m.content[0] for m in store.get_messages(session_id)]
    return [b.get("text") or b.get("id") or b.get("tool_use_id") for b in blocks]


def test_strategies_are_obvious_values() -> None:
    assert str(CompactionStrategy.NONE) == "none"
    assert str(CompactionStrategy.SUMMARIZE) == "summarize"
    assert str(SLIDING(50)) == "sliding_window(50)"
    assert SLIDING(50) == SLIDING(50)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(CompactionError):
            SLIDING(bad)  # type: ignore[arg-type]
    with pytest.raises(CompactionError):
        CompactionStrategy("truncate")  # type: ignore[arg-type]


def test_none_changes_nothing_but_is_counted(store: SqliteSessionStore) -> None:
    sid = new_session(store, plain(6))
    before = store.get_messages(sid)
    first = store.compact(sid, CompactionStrategy.NONE)
    second = store.compact(sid, CompactionStrategy.NONE)
    assert (first.compaction_count, second.compaction_count) == (1, 2)
    assert second.last_compacted_at is not None
    assert first.last_compacted_at is not None
    assert second.last_compacted_at > first.last_compacted_at
    assert second.session_id == sid
    assert second.message_count == 6
    assert store.get_messages(sid) == before
    assert store.children(sid) == []
    assert store.get_session(sid).status == "active"
    assert [e.child_id for e in store.compaction_history(sid)] == [None, None]


def test_sliding_window_continues_with_the_last_n(store: SqliteSessionStore) -> None:
    sid = new_session(store, plain(10))
    before = store.get_messages(sid)
    record = store.compact(sid, SLIDING(4))
    assert record.compaction_count == 1
    assert record.message_count == 4
    assert record.session_id != sid
    child = store.get_session(record.session_id)  # type: ignore[arg-type]
    assert child.parent_id == sid
    assert texts(store, child.id) == ["m6", "m7", "m8", "m9"]
    # The originals stay readable in the parent.
    assert store.get_messages(sid) == before
    assert store.get_session(sid).status == "compacted"
    [entry] = store.compaction_history(sid)
    assert (entry.strategy, entry.messages_before, entry.messages_after) == (
        "sliding_window(4)",
        10,
        4,
    )
    assert (entry.tokens_before, entry.tokens_after) == (100, 40)


def test_sliding_window_moves_the_cut_past_tool_results(store: SqliteSessionStore) -> None:
    messages = [
        text("user", "fix the bug"),
        tool_call("a"),
        tool_result("a"),
        tool_call("b"),
        tool_result("b"),
        text("assistant", "fixed"),
        text("user", "now the tests"),
        tool_call("c"),
        tool_result("c"),
        text("assistant", "green"),
    ]
    sid = new_session(store, messages)
    # The last 5 would start at tool_result "b": the cut moves to "now the tests".
    record = store.compact(sid, SLIDING(6))
    assert texts(store, record.session_id) == ["now the tests", "c", "c", "green"]  # type: ignore[arg-type]
    kept = store.get_messages(record.session_id)  # type: ignore[arg-type]
    assert kept[0].role == "user" and not has_tool_result(kept[0])


def test_sliding_window_larger_than_the_session_keeps_everything(
    store: SqliteSessionStore,
) -> None:
    sid = new_session(store, plain(3))
    record = store.compact(sid, SLIDING(50))
    assert texts(store, record.session_id) == ["m0", "m1", "m2"]  # type: ignore[arg-type]


def test_sliding_window_without_a_clean_start_is_refused(store: SqliteSessionStore) -> None:
    sid = new_session(store, [text("user", "go"), tool_call("a"), tool_result("a"), tool_call("b")])
    with pytest.raises(CompactionError, match="no user message without tool_result"):
        store.compact(sid, SLIDING(3))
    assert store.get_compaction_record(sid).compaction_count == 0
    assert store.children(sid) == []


def test_summarize_needs_a_summary(store: SqliteSessionStore) -> None:
    sid = new_session(store, plain(4))
    for summary in (None, "", "   "):
        with pytest.raises(CompactionError, match="needs a summary"):
            store.compact(sid, CompactionStrategy.SUMMARIZE, summary=summary)
    assert store.get_compaction_record(sid).compaction_count == 0
    assert store.get_session(sid).status == "active"


def test_summarize_continues_with_one_user_message(store: SqliteSessionStore) -> None:
    sid = new_session(store, plain(8))
    record = store.compact(sid, CompactionStrategy.SUMMARIZE, summary="We fixed the parser.")
    assert record.summary == "We fixed the parser."
    assert record.message_count == 1
    [message] = store.get_messages(record.session_id)  # type: ignore[arg-type]
    assert message.to_param() == {
        "role": "user",
        "content": [{"type": "text", "text": "We fixed the parser."}],
    }
    assert len(store.get_messages(sid)) == 8


def test_summarize_waits_for_pending_tool_results(store: SqliteSessionStore) -> None:
    sid = new_session(store, [text("user", "go"), tool_call("a")])
    with pytest.raises(CompactionError, match="awaits its tool_result"):
        store.compact(sid, CompactionStrategy.SUMMARIZE, summary="s")


def test_repeated_calls_compact_the_conversation_where_it_continues(
    store: SqliteSessionStore,
) -> None:
    sid = new_session(store, plain(12))
    first = store.compact(sid, SLIDING(6))
    second = store.compact(sid, SLIDING(4))
    third = store.compact(sid, CompactionStrategy.SUMMARIZE, summary="short")
    fourth = store.compact(sid, CompactionStrategy.NONE)
    assert [r.compaction_count for r in (first, second, third, fourth)] == [1, 2, 3, 4]
    assert [r.message_count for r in (first, second, third, fourth)] == [6, 4, 1, 1]
    assert fourth.summary == "short"  # kept by a later compaction without one
    assert fourth.session_id == third.session_id
    lineage = store.lineage(sid)
    assert len(lineage) == 4
    assert [s.message_count for s in lineage] == [12, 6, 4, 1]
    # Every member sees the same state across the lineage.
    for member in lineage:
        assert store.get_compaction_record(member.id) == fourth
    assert texts(store, lineage[1].id) == [f"m{i}" for i in range(6, 12)]


def test_compact_refuses_something_that_is_not_a_strategy(store: SqliteSessionStore) -> None:
    sid = new_session(store, plain(2))
    with pytest.raises(CompactionError):
        store.compact(sid, "summarize")  # type: ignore[arg-type]


# ------------------------------------------------------------------ property


class Msg:
    def __init__(self, role: str, content: list[dict[str, Any]]) -> None:
        self.role = role
        self.content = content


@st.composite
def tool_conversations(draw: st.DrawFn) -> list[Msg]:
    """Valid Messages API histories: user requests, tool_use rounds, final answers."""
    messages: list[Msg] = []
    call = 0
    for _ in range(draw(st.integers(1, 8))):
        messages.append(Msg("user", [{"type": "text", "text": "request"}]))
        for _ in range(draw(st.integers(0, 4))):
            ids = [f"t{call + i}" for i in range(draw(st.integers(1, 3)))]
            call += len(ids)
            messages.append(Msg("assistant", [{"type": "tool_use", "id": i} for i in ids]))
            messages.append(Msg("user", [{"type": "tool_result", "tool_use_id": i} for i in ids]))
        messages.append(Msg("assistant", [{"type": "text", "text": "answer"}]))
    return messages


@given(tool_conversations(), st.integers(1, 40))
def test_no_kept_tool_result_loses_its_tool_use(messages: list[Msg], window: int) -> None:
    start = sliding_window_start(messages, window)
    kept = messages[start:]
    if start == 0:
        assert kept == messages
        return
    if not kept:
        # Refused by compact(): no clean start inside the window.
        assert all(m.role != "user" or has_tool_result(m) for m in messages[-window:])
        return
    assert len(kept) <= window
    assert kept[0].role == "user" and not has_tool_result(kept[0])
    for index, message in enumerate(kept):
        for block in message.content:
            if block["type"] == "tool_result":
                asked = [b.get("id") for b in kept[index - 1].content] if index else []
                assert block["tool_use_id"] in asked
    # The cut is as late as it needs to be, no later: nothing clean was skipped.
    skipped = messages[len(messages) - min(window, len(messages)) : start]
    assert all(m.role != "user" or has_tool_result(m) for m in skipped)
