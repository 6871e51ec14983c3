"""The store contract, part four: listing by conversation, delete, prune, export and import.

Written once against the ``SessionStore`` protocol; runs against every backend in
``store_contract.BACKENDS``. Copies between backends are in ``test_postgres_copy.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import support.store_contract as store_contract
from support.store_contract import Clock, StoreFactory, chain, conversation, snapshot, user

from sessions import (
    CompactionStrategy,
    Conversation,
    SessionError,
    SessionLeasedError,
    SessionNotFoundError,
    SessionStore,
    StoreError,
    copy_store,
    open_store,
)

store_factory = store_contract.store_factory
store = store_contract.store


def truth(store: SessionStore, workspace: str | None = None) -> list[tuple[str, str, int, int]]:
    """What list_conversations must say, worked out from the lineage methods alone."""
    roots = {s.id for s in store.list_sessions(limit=None) if s.parent_id is None}
    rows = []
    for root in roots:
        head = store.newest_descendant(root)
        if workspace is not None and head.workspace != workspace:
            continue
        members = store.lineage(root)
        latest = max(s.updated_at for s in members)
        rows.append((latest, root, head.id, len(store.ancestors(head.id)), len(members)))
    rows.sort(reverse=True)
    return [(root, head, depth, size) for _, root, head, depth, size in rows]


def listed(conversations: list[Conversation]) -> list[tuple[str, str, int, int]]:
    return [(c.root_id, c.head.id, c.generations, c.sessions) for c in conversations]


def test_one_row_per_conversation_with_its_head_and_depth(store: SessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    lone = store.create_session(model="m", workspace="/other")
    fork = store.create_session(model="m", workspace="/w", parent_id=child.id)
    [first, second] = store.list_conversations()
    assert (first.root_id, first.head.id, first.generations, first.sessions) == (
        root.id,
        fork.id,
        2,
        4,
    )
    assert first.head == store.get_session(fork.id)
    assert (second.root_id, second.head.id, second.generations, second.sessions) == (
        lone.id,
        lone.id,
        0,
        1,
    )
    # Activity anywhere moves a conversation up; resume follows the newest leaf.
    store.append_messages(grandchild.id, [user("back to the main line")])
    assert listed(store.list_conversations()) == truth(store)
    assert store.list_conversations()[0].head.id == grandchild.id
    store.append_messages(lone.id, [user("hello")])
    assert [c.root_id for c in store.list_conversations()] == [lone.id, root.id]
    assert [c.root_id for c in store.list_conversations(workspace="/other")] == [lone.id]
    assert [c.root_id for c in store.list_conversations(limit=1, offset=1)] == [root.id]
    assert store.list_conversations(limit=0) == []
    assert store.count_conversations() == 2
    assert store.count_conversations(workspace="/w") == 1
    for bad in (-1, True):
        with pytest.raises(ValueError):
            store.list_conversations(limit=bad)


def test_conversations_stay_true_under_random_operations(store: SessionStore) -> None:
    """Every kind of write, in a random order: the listing always agrees with the lineage."""
    rng = random.Random(11)
    for step in range(120):
        sessions = store.list_sessions(limit=None)
        action = rng.choice(["root", "append", "transition", "fork", "update", "compact", "delete"])
        if action == "root" or not sessions:
            store.create_session(model="m", workspace=rng.choice(["/a", "/b"]))
            continue
        target = rng.choice(sessions)
        if action == "append" and target.status == "active":
            store.append_messages(target.id, conversation(2))
        elif action == "transition":
            store.transition(target.id, messages=conversation(1), strategy="x")
        elif action == "fork":
            store.create_session(model="m", workspace=rng.choice(["/a", "/b"]), parent_id=target.id)
        elif action == "update":
            store.update_session(target.id, title=f"t{step}")
        elif action == "compact":
            store.compact(target.id, CompactionStrategy.NONE)
        elif action == "delete" and not store.children(target.id):
            assert store.delete_session(target.id) == 1
        if step % 10 == 0:
            assert listed(store.list_conversations(limit=None)) == truth(store)
            assert listed(store.list_conversations(workspace="/a", limit=None)) == truth(
                store, "/a"
            )
    assert listed(store.list_conversations(limit=None)) == truth(store)


def test_delete_a_leaf_reopens_its_parent(store: SessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    assert store.delete_session(grandchild.id[:8]) == 1
    for gone in (
        lambda: store.get_session(grandchild.id),
        lambda: store.get_messages(grandchild.id),
    ):
        with pytest.raises(SessionNotFoundError):
            gone()
    assert store.get_session(child.id).status == "active"  # nothing continues it any more
    store.append_messages(child.id, [user("continues here again")])
    assert [(e.parent_id, e.child_id) for e in store.compaction_history(root.id)] == [
        (root.id, child.id)
    ]
    assert store.newest_descendant(root.id).id == child.id
    assert listed(store.list_conversations()) == truth(store)


def test_delete_refuses_a_session_with_children(store: SessionStore) -> None:
    root, child, _ = chain(store, 3)
    store.create_session(model="m", workspace="/w", parent_id=root.id)
    before = snapshot(store, root.id)
    with pytest.raises(SessionError, match="has 2 child sessions") as caught:
        store.delete_session(root.id)
    assert "\n" not in str(caught.value)
    with pytest.raises(SessionError, match="has 1 child session;"):
        store.delete_session(child.id)
    assert snapshot(store, root.id) == before


def test_delete_a_whole_lineage(store: SessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    other = chain(store, 2)
    kept = snapshot(store, other[0].id)
    del kept["sessions"]  # every session of the store: the deleted ones too
    assert store.delete_session(child.id, lineage=True) == 3
    for session in (root, child, grandchild):
        with pytest.raises(SessionNotFoundError):
            store.get_session(session.id)
    after = snapshot(store, other[0].id)
    del after["sessions"]
    assert after == kept
    assert store.count_sessions() == 2
    assert [c.root_id for c in store.list_conversations()] == [other[0].id]


def test_delete_refuses_what_another_writer_holds(store: SessionStore) -> None:
    root, child = chain(store, 2)
    lease = store.acquire_lease(child.id, owner="pid 7 on host h")
    attempts: list[Callable[[], object]] = [
        lambda: store.delete_session(child.id),
        lambda: store.delete_session(root.id, lineage=True),
    ]
    for attempt in attempts:
        with pytest.raises(SessionLeasedError, match="pid 7 on host h"):
            attempt()
    store.release_lease(lease)
    assert store.delete_session(root.id, lineage=True) == 2


def test_prune_removes_idle_lineages_only(store_factory: StoreFactory) -> None:
    clock = Clock()
    store = store_factory.open(clock=clock)
    old = chain(store, 3)
    old_elsewhere = store.create_session(model="m", workspace="/elsewhere")
    leased = store.create_session(model="m", workspace="/w")
    clock.now += timedelta(days=40)
    store.acquire_lease(leased.id, owner="busy", ttl=3600)
    fresh = store.create_session(model="m", workspace="/w")
    with pytest.raises(ValueError):
        store.prune(older_than=timedelta(days=-1))
    assert store.prune(older_than=timedelta(days=30), workspace="/w") == 3
    assert {s.id for s in store.list_sessions(limit=None)} == {
        old_elsewhere.id,
        leased.id,
        fresh.id,
    }
    assert store.prune(older_than=timedelta(days=30)) == 1
    assert {s.id for s in store.list_sessions(limit=None)} == {leased.id, fresh.id}
    with pytest.raises(SessionNotFoundError):
        store.get_messages(old[0].id)


def test_export_then_import_copies_nothing_twice(store: SessionStore, tmp_path: Path) -> None:
    root, *_ = chain(store, 3)
    store.compact(root.id, CompactionStrategy.NONE)
    store.create_session(model="m", workspace="/w", parent_id=root.id, title="fork")
    lone = store.create_session(model="m", workspace="/x", metadata={"k": [1, 2]})
    exported = store.export_lineages()
    assert sorted(e.root_id for e in exported) == sorted([root.id, lone.id])
    again = store.import_lineages(exported)
    assert (again.sessions_copied, again.messages_copied, again.compactions_copied) == (0, 0, 0)
    assert again.sessions_present == 5
    assert again.compactions_present == 3

    with open_store(tmp_path / "copy.db") as target:
        report = copy_store(store, target, batch=1)
        assert (report.lineages, report.sessions_copied, report.compactions_copied) == (2, 5, 3)
        assert report.messages_copied == sum(s.message_count for s in store.list_sessions())
        for session in store.list_sessions(limit=None):
            assert target.get_session(session.id) == session
            assert target.get_messages(session.id) == store.get_messages(session.id)
        assert snapshot(target, root.id) == snapshot(store, root.id)
        assert listed(target.list_conversations()) == listed(store.list_conversations())
        assert copy_store(store, target).sessions_copied == 0
        # A copy that was cut short resumes: the tail of a session arrives later, beside a
        # conversation that is new (one batch: one merged, one inserted whole).
        store.append_messages(lone.id, [user("written after the first copy")])
        late = store.create_session(model="m", workspace="/w")
        store.append_messages(late.id, conversation(3))
        report = copy_store(store, target)
        assert (report.sessions_copied, report.messages_copied, report.lineages) == (1, 4, 3)
        assert target.get_messages(lone.id) == store.get_messages(lone.id)
        assert listed(target.list_conversations()) == listed(store.list_conversations())


def test_an_import_that_contradicts_the_store_is_refused_whole(
    store: SessionStore, tmp_path: Path
) -> None:
    root, child = chain(store, 2)
    with open_store(tmp_path / "other.db") as other:
        copy_store(store, other)
        other.append_messages(child.id, [user("only in the copy")])
        store.append_messages(store.create_session(model="m", workspace="/w").id, [user("new")])
        before = snapshot(other, root.id)
        count = store.get_session(child.id).message_count
        with pytest.raises(StoreError) as caught:
            copy_store(store, other)
        message = str(caught.value)
        assert "\n" not in message
        assert f"holds {count + 1} messages of it, the import only {count}" in message
        assert snapshot(other, root.id) == before
        assert other.count_sessions() == 2  # the batch was refused whole
