"""Lineage: transition (one transaction), children, ancestors, newest descendant, history."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sessions import (
    InvalidSessionIdError,
    NewMessage,
    Session,
    SessionCompactedError,
    SqliteSessionStore,
    new_session_id,
    open_store,
)


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


def text(role: str, value: str) -> NewMessage:
    return NewMessage(role=role, content=[{"type": "text", "text": value}])  # type: ignore[arg-type]


def conversation(n: int) -> list[NewMessage]:
    return [text("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]


def chain(store: SqliteSessionStore, generations: int) -> list[Session]:
    """A root and ``generations - 1`` successive compaction children."""
    root = store.create_session(model="m", workspace="/w", title="t")
    store.append_messages(root.id, conversation(4))
    sessions = [root]
    for _ in range(generations - 1):
        child = store.transition(
            sessions[-1].id, messages=conversation(2), strategy="summarize", summary="s"
        )
        store.append_messages(child.id, conversation(2))
        sessions.append(child)
    return sessions


def dump(store: SqliteSessionStore) -> dict[str, Any]:
    assert store._conn is not None
    return {
        table: store._conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("sessions", "messages", "compactions")
    }


def test_transition_creates_the_child_and_keeps_the_parent(store: SqliteSessionStore) -> None:
    parent = store.create_session(
        model="claude-x", workspace="/repo", title="refactor", metadata={"system": "abc", "n": 1}
    )
    store.append_messages(parent.id, conversation(6))
    before = store.get_messages(parent.id)
    kept = [text("user", "summary of the work"), text("assistant", "ok")]
    child = store.transition(
        parent.id,
        messages=kept,
        strategy="summarize",
        tokens_before=152_310,
        tokens_after=18_204,
        summary="summary of the work",
        metadata={"n": 2, "system": None},
    )
    assert child.parent_id == parent.id
    assert (child.model, child.workspace, child.title) == ("claude-x", "/repo", "refactor")
    assert child.status == "active"
    assert child.message_count == 2
    assert child.metadata == {"n": 2}
    assert [m.to_param() for m in store.get_messages(child.id)] == [m.to_param() for m in kept]
    after_parent = store.get_session(parent.id)
    assert after_parent.status == "compacted"
    assert after_parent.message_count == 6
    assert store.get_messages(parent.id) == before
    [entry] = store.compaction_history(child.id)
    assert (entry.parent_id, entry.child_id, entry.strategy) == (parent.id, child.id, "summarize")
    assert (entry.messages_before, entry.messages_after) == (6, 2)
    assert (entry.tokens_before, entry.tokens_after) == (152_310, 18_204)
    assert entry.summary == "summary of the work"


def test_transition_is_one_transaction(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = store.create_session(model="m", workspace="/w")
    store.append_messages(parent.id, conversation(3))
    before = dump(store)
    original = store._insert_messages

    def insert_then_fail(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        raise RuntimeError("crash in the middle of the transition")

    monkeypatch.setattr(store, "_insert_messages", insert_then_fail)
    with pytest.raises(RuntimeError):
        store.transition(parent.id, messages=conversation(2), strategy="x")
    monkeypatch.undo()
    assert dump(store) == before
    assert store.get_session(parent.id).status == "active"


def test_transition_with_a_chosen_child_id(store: SqliteSessionStore) -> None:
    parent = store.create_session(model="m", workspace="/w")
    wanted = new_session_id()
    child = store.transition(parent.id, messages=[], strategy="x", child_id=wanted.upper())
    assert child.id == wanted
    with pytest.raises(InvalidSessionIdError, match="taken"):
        store.transition(child.id, messages=[], strategy="x", child_id=wanted)
    with pytest.raises(InvalidSessionIdError):
        store.transition(child.id, messages=[], strategy="x", child_id="../evil")
    assert store.children(child.id) == []


def test_messages_before_defaults_to_the_parent_count(store: SqliteSessionStore) -> None:
    parent = store.create_session(model="m", workspace="/w")
    store.append_messages(parent.id, conversation(7))
    child = store.transition(parent.id, messages=conversation(1), strategy="x", messages_before=5)
    grandchild = store.transition(child.id, messages=conversation(1), strategy="x")
    history = store.compaction_history(grandchild.id)
    assert [e.messages_before for e in history] == [5, 1]


def test_appending_to_a_compacted_session_names_where_it_continues(
    store: SqliteSessionStore,
) -> None:
    sessions = chain(store, 3)
    with pytest.raises(SessionCompactedError) as caught:
        store.append_messages(sessions[0].id, conversation(1))
    assert caught.value.continue_in == sessions[-1].id
    assert sessions[-1].id[:8] in str(caught.value)
    assert store.get_session(sessions[0].id).message_count == 4


def test_children_and_ancestors(store: SqliteSessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    fork = store.create_session(model="m", workspace="/w", parent_id=root.id[:10])
    assert fork.parent_id == root.id
    assert store.get_session(root.id).status == "compacted"  # the fork does not change it
    assert [s.id for s in store.children(root.id)] == [child.id, fork.id]
    assert [s.id for s in store.ancestors(grandchild.id)] == [child.id, root.id]
    assert store.ancestors(root.id) == []


def test_newest_descendant_of_a_chain_is_its_last_child(store: SqliteSessionStore) -> None:
    sessions = chain(store, 10)
    for session in sessions:
        assert store.newest_descendant(session.id).id == sessions[-1].id


def test_newest_descendant_of_a_lone_session_is_itself(store: SqliteSessionStore) -> None:
    lone = store.create_session(model="m", workspace="/w")
    assert store.newest_descendant(lone.id).id == lone.id


def test_newest_descendant_follows_the_most_recently_updated_leaf(
    store: SqliteSessionStore,
) -> None:
    root = store.create_session(model="m", workspace="/w")
    first = store.transition(root.id, messages=conversation(1), strategy="x")
    second = store.transition(root.id, messages=conversation(1), strategy="x")  # a fork
    assert store.newest_descendant(root.id).id == second.id
    store.append_messages(first.id, [text("assistant", "more")])
    assert store.newest_descendant(root.id).id == first.id
    # Compacting the older branch moves resume to its new leaf.
    deeper = store.transition(second.id, messages=conversation(1), strategy="x")
    assert store.newest_descendant(root.id).id == deeper.id
    assert store.newest_descendant(first.id).id == first.id


def test_lineage_from_any_member(store: SqliteSessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    fork = store.transition(root.id, messages=conversation(1), strategy="x")
    other = store.create_session(model="m", workspace="/w")
    expected = [root.id, child.id, grandchild.id, fork.id]
    for member in (root, child, grandchild, fork):
        assert [s.id for s in store.lineage(member.id)] == expected
    assert [s.id for s in store.lineage(other.id)] == [other.id]


def test_history_covers_the_lineage_oldest_first(store: SqliteSessionStore) -> None:
    sessions = chain(store, 4)
    unrelated = chain(store, 2)
    for member in sessions:
        history = store.compaction_history(member.id)
        assert [(e.parent_id, e.child_id) for e in history] == [
            (a.id, b.id) for a, b in itertools.pairwise(sessions)
        ]
    assert len(store.compaction_history(unrelated[0].id)) == 1
    record = store.get_compaction_record(sessions[1].id)
    assert record.compaction_count == 3
    assert record.session_id == sessions[-1].id
    assert record.last_compacted_at == store.compaction_history(sessions[0].id)[-1].created_at
