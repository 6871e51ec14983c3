"""Moving a store between SQLite and PostgreSQL, both ways: everything arrives, a second copy
copies nothing, and a copy whose result differs from the source says so in one line."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import (
    Clock,
    chain,
    conversation,
    drop_schema,
    fresh_schema,
    postgres_unavailable,
    postgres_url,
    user,
    with_schema,
)

from sessions import (
    CompactionStrategy,
    NewMessage,
    SessionStore,
    StoredMessage,
    StoreError,
    copy_store,
    open_store,
)
from sessions._sql_transaction import SqlTransaction

if (_reason := postgres_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture
def postgres() -> Iterator[SessionStore]:
    schema = fresh_schema()
    store = open_store(with_schema(postgres_url(), schema), clock=Clock())
    yield store
    store.close()
    drop_schema(schema)


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SessionStore]:
    with open_store(tmp_path / "sessions.db", clock=Clock()) as store:
        yield store


def fill(store: SessionStore) -> None:
    """Lineages of every shape: a chain with a fork, a NONE compaction, odd content."""
    root, _, grandchild = chain(store, 3)
    store.create_session(model="m", workspace="/w", parent_id=root.id, title="a fork")
    store.compact(grandchild.id, CompactionStrategy.NONE)
    odd = store.create_session(model="m", workspace="/x", title=None, metadata={"é": [1, None]})
    store.append_messages(
        odd.id,
        [
            NewMessage(
                role="user",
                content=[{"type": "text", "text": 'nul \u0000 "quoted" ✓'}],
                usage={"input_tokens": 3},
                metadata={"pinned": True},
            )
        ],
    )
    store.acquire_lease(odd.id, owner="a running process")  # leases stay behind
    for n in range(5):
        store.append_messages(store.create_session(model="m", workspace="/w").id, conversation(n))


def everything(store: SessionStore) -> dict[str, Any]:
    sessions = store.list_sessions(limit=None)
    return {
        "sessions": sorted(sessions, key=lambda s: s.id),
        "messages": {s.id: store.get_messages(s.id) for s in sessions},
        "history": {s.id: store.compaction_history(s.id) for s in sessions},
        "conversations": [(c.root_id, c.head.id) for c in store.list_conversations(limit=None)],
    }


@pytest.mark.parametrize("direction", ["sqlite to postgresql", "postgresql to sqlite"])
def test_a_copy_is_complete_and_idempotent(
    direction: str, sqlite: SessionStore, postgres: SessionStore
) -> None:
    source, target = (sqlite, postgres) if direction.startswith("sqlite") else (postgres, sqlite)
    fill(source)
    report = copy_store(source, target, batch=3)
    assert report.lineages == source.count_conversations() == 7
    assert report.sessions_copied == source.count_sessions() == 10
    assert report.messages_copied == sum(s.message_count for s in source.list_sessions())
    assert report.compactions_copied == 3
    assert (report.sessions_present, report.messages_present) == (0, 0)
    assert everything(target) == everything(source)
    assert all(target.get_lease(s.id) is None for s in target.list_sessions(limit=None))
    again = copy_store(source, target)
    assert (again.sessions_copied, again.messages_copied, again.compactions_copied) == (0, 0, 0)
    assert again.sessions_present == 10 and again.compactions_present == 3
    # And back: the round trip changes nothing.
    assert copy_store(target, source).sessions_copied == 0
    assert everything(source) == everything(target)


def test_a_copy_that_does_not_arrive_whole_is_reported(
    sqlite: SessionStore, postgres: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(sqlite)
    original = SqlTransaction._insert_stored

    def lose_the_last(self: SqlTransaction, messages: Sequence[StoredMessage]) -> None:
        original(self, messages[:-1])

    monkeypatch.setattr(SqlTransaction, "_insert_stored", lose_the_last)
    with pytest.raises(StoreError, match=r"copy check failed: session .* has") as caught:
        copy_store(sqlite, postgres)
    assert "\n" not in str(caught.value)


def test_a_copy_onto_itself_is_refused(sqlite: SessionStore) -> None:
    sqlite.append_messages(sqlite.create_session(model="m", workspace="/w").id, [user("x")])
    with pytest.raises(StoreError, match="onto itself"):
        copy_store(sqlite, sqlite)
