"""The store contract, part two: the seed's ``compact`` and ``get_compaction_record``.

Written once against the ``SessionStore`` protocol; runs against every backend in
``store_contract.BACKENDS`` through the ``store_factory`` fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import support.store_contract as store_contract
from support.store_contract import (
    StoreFactory,
    conversation,
    new_session,
    text,
    texts,
    tool_call,
    tool_result,
    user,
)

from sessions import (
    CompactionError,
    CompactionRecord,
    CompactionStrategy,
    SessionCompactedError,
    SessionStore,
    StoreBusyError,
    _compaction,
)
from sessions._cut import has_tool_result

SLIDING = CompactionStrategy.sliding_window

# The fixtures are defined once, beside the backends; binding them here registers them.
store_factory = store_contract.store_factory
store = store_contract.store


def test_none_changes_nothing_but_is_counted(store: SessionStore) -> None:
    sid = new_session(store, conversation(6))
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
    assert [(e.messages_before, e.messages_after) for e in store.compaction_history(sid)] == [
        (6, 6),
        (6, 6),
    ]


def test_sliding_window_continues_with_the_last_n(store: SessionStore) -> None:
    sid = new_session(store, conversation(10))
    before = store.get_messages(sid)
    record = store.compact(sid, SLIDING(4))
    assert record.compaction_count == 1
    assert record.message_count == 4
    assert record.session_id is not None and record.session_id != sid
    child = store.get_session(record.session_id)
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


def test_sliding_window_moves_the_cut_past_tool_results(store: SessionStore) -> None:
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
    # The last 6 would start at tool_result "b": the cut moves to "now the tests".
    record = store.compact(sid, SLIDING(6))
    assert texts(store, record.session_id) == ["now the tests", "c", "c", "green"]
    assert record.session_id is not None
    kept = store.get_messages(record.session_id)
    assert kept[0].role == "user" and not has_tool_result(kept[0])


def test_sliding_window_larger_than_the_session_keeps_everything(store: SessionStore) -> None:
    sid = new_session(store, conversation(3))
    record = store.compact(sid, SLIDING(50))
    assert texts(store, record.session_id) == ["m0", "m1", "m2"]


def test_sliding_window_without_a_clean_start_is_refused(store: SessionStore) -> None:
    sid = new_session(store, [text("user", "go"), tool_call("a"), tool_result("a"), tool_call("b")])
    with pytest.raises(CompactionError, match="no user message without tool_result"):
        store.compact(sid, SLIDING(3))
    assert store.get_compaction_record(sid).compaction_count == 0
    assert store.children(sid) == []


def test_summarize_needs_a_summary(store: SessionStore) -> None:
    sid = new_session(store, conversation(4))
    for summary in (None, "", "   "):
        with pytest.raises(CompactionError, match="needs a summary"):
            store.compact(sid, CompactionStrategy.SUMMARIZE, summary=summary)
    assert store.get_compaction_record(sid).compaction_count == 0
    assert store.get_session(sid).status == "active"


def test_summarize_continues_with_one_user_message(store: SessionStore) -> None:
    sid = new_session(store, conversation(8))
    record = store.compact(sid, CompactionStrategy.SUMMARIZE, summary="We fixed the parser.")
    assert record.summary == "We fixed the parser."
    assert record.message_count == 1
    assert record.session_id is not None
    [message] = store.get_messages(record.session_id)
    assert message.to_param() == {
        "role": "user",
        "content": [{"type": "text", "text": "We fixed the parser."}],
    }
    assert len(store.get_messages(sid)) == 8


def test_summarize_waits_for_pending_tool_results(store: SessionStore) -> None:
    sid = new_session(store, [text("user", "go"), tool_call("a")])
    with pytest.raises(CompactionError, match="awaits its tool_result"):
        store.compact(sid, CompactionStrategy.SUMMARIZE, summary="s")


def test_repeated_calls_compact_the_conversation_where_it_continues(store: SessionStore) -> None:
    sid = new_session(store, conversation(12))
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


def test_compact_refuses_something_that_is_not_a_strategy(store: SessionStore) -> None:
    sid = new_session(store, conversation(2))
    with pytest.raises(CompactionError):
        store.compact(sid, "summarize")  # type: ignore[arg-type]
    assert store.get_compaction_record(sid).compaction_count == 0


def test_compact_holds_the_lineage_from_its_read_to_its_transition(
    store_factory: StoreFactory, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reading the newest descendant's messages and continuing it in a child, no other
    writer may append to it or compact the lineage: a message appended in between would be
    missing from the child. The compaction is parked right after its read; a second handle that
    does not wait for locks must then be refused."""
    sid = new_session(store, conversation(6))
    other = store_factory.open_nowait()
    has_read, go_on = threading.Event(), threading.Event()
    planned = _compaction.keep

    def parked_plan(*args: Any, **kwargs: Any) -> _compaction.Kept:
        has_read.set()
        go_on.wait()
        return planned(*args, **kwargs)

    monkeypatch.setattr(_compaction, "keep", parked_plan)
    outcome: list[object] = []

    def compact() -> None:
        try:
            outcome.append(store.compact(sid, SLIDING(4)))
        except BaseException as error:
            outcome.append(error)
            has_read.set()

    worker = threading.Thread(target=compact)
    worker.start()
    try:
        assert has_read.wait(timeout=60) and not outcome, outcome
        attempts: list[Callable[[], object]] = [
            lambda: other.append_messages(sid, [user("sneaked in")]),
            lambda: other.compact(sid, CompactionStrategy.NONE),
            lambda: other.transition(sid, messages=[], strategy="x"),
        ]
        for attempt in attempts:
            with pytest.raises(StoreBusyError) as caught:
                attempt()
            assert "\n" not in str(caught.value)
    finally:
        go_on.set()
        worker.join()
    [record] = outcome
    assert isinstance(record, CompactionRecord), record
    assert texts(store, record.session_id) == ["m2", "m3", "m4", "m5"]
    with pytest.raises(SessionCompactedError):
        other.append_messages(sid, [user("too late")])
    assert len(store.compaction_history(sid)) == 1
    assert len(store.get_messages(sid)) == 6
