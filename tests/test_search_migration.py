"""The search index of a store written before it existed: built by a migration (SQLite
``m003_search_index``, PostgreSQL ``m002_search_index``) from the messages already there, the
first time the store is opened for writing; read-only, the store stays readable and a search says
what it needs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import (
    DETAIL,
    call,
    drop_schema,
    fresh_schema,
    index_rows,
    postgres_unavailable,
    postgres_url,
    result,
    user,
)

from sessions import (
    SessionStore,
    StoreVersionError,
    _migrations,
    _postgres_schema,
    _sql_messages,
    open_store,
)


def write_old_conversation(store: SessionStore) -> tuple[str, str]:
    """What an older agentloop stored: a compacted root holding the detail, and its child."""
    root = store.create_session(model="m", workspace="/w", title="old")
    store.append_messages(
        root.id,
        [
            user(DETAIL),
            call("toolu_1", "run_command", command="make release"),
            result("toolu_1", "release signed by HELIOTROPE"),
        ],
    )
    child = store.transition(root.id, messages=[user("Summary: releasing.")], strategy="s")
    store.append_messages(child.id, [user("go on")])
    return root.id, child.id


@pytest.fixture
def without_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Until undone: the store code of before, which wrote no index."""
    monkeypatch.setattr(_sql_messages, "index_messages", lambda *args, **kwargs: None)
    yield monkeypatch


def check_upgraded(store: SessionStore, root: str, child: str) -> None:
    (hit,) = store.search_messages("deploy key", session_id=child)
    assert (hit.session_id, hit.seq) == (root, 0) and "ORCHID-7" in hit.excerpt
    (output,) = store.search_messages("heliotrope", session_id=child)
    assert (output.seq, output.tool_name) == (2, "run_command")
    messages = sum(len(store.get_messages(s.id)) for s in store.lineage(root))
    assert index_rows(store) == messages
    # New messages are indexed as before.
    store.append_messages(child, [user("after the upgrade: AMBER")])
    assert [h.session_id for h in store.search_messages("amber")] == [child]


def test_sqlite_store_gets_its_index_when_first_opened_for_writing(
    tmp_path: Path, without_index: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sessions.db"
    without_index.setattr(_migrations, "MIGRATIONS", _migrations.MIGRATIONS[:2])
    with open_store(path) as old:
        root, child = write_old_conversation(old)
    without_index.undo()
    assert "m003_search_index" in [name for name, _ in _migrations.MIGRATIONS]

    with open_store(path, read_only=True) as reader:
        assert [c.root_id for c in reader.list_conversations()] == [root]
        with pytest.raises(StoreVersionError) as caught:
            reader.search_messages("orchid", session_id=child)
        message = str(caught.value)
        assert "\n" not in message and "search index" in message and "for writing" in message
    raw = sqlite3.connect(path)
    assert ("m003_search_index",) not in raw.execute("SELECT name FROM _migrations").fetchall()
    raw.close()

    with open_store(path) as store:
        check_upgraded(store, root, child)
    raw = sqlite3.connect(path)
    assert ("m003_search_index",) in raw.execute("SELECT name FROM _migrations").fetchall()
    raw.close()


@pytest.fixture
def postgres() -> Iterator[str]:
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schema = fresh_schema()
    yield f"{postgres_url()}?schema={schema}"
    drop_schema(schema)


def _applied(url: str) -> list[Any]:
    import psycopg

    schema = url.rpartition("schema=")[2]
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        rows = conn.execute(f"SELECT name FROM {schema}.agentloop_migrations ORDER BY name")
        return [row[0] for row in rows.fetchall()]


def test_postgres_store_gets_its_index_when_first_opened_for_writing(
    postgres: str, without_index: pytest.MonkeyPatch
) -> None:
    without_index.setattr(_postgres_schema, "MIGRATIONS", _postgres_schema.MIGRATIONS[:1])
    with open_store(postgres) as old:
        root, child = write_old_conversation(old)
    without_index.undo()
    assert _applied(postgres) == ["m001_initial"]

    with open_store(postgres, read_only=True) as reader:  # still readable without it
        assert [c.root_id for c in reader.list_conversations()] == [root]
        with pytest.raises(StoreVersionError, match="search index"):
            reader.search_messages("orchid", session_id=child)
    assert _applied(postgres) == ["m001_initial"]

    with open_store(postgres) as store:
        check_upgraded(store, root, child)
    assert _applied(postgres) == ["m001_initial", "m002_search_index", "m003_search_queue"]


def test_postgres_store_indexed_with_its_appends_gets_its_queue(
    postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessions._sql_search import behind, index_at_once
    from sessions._sql_store import SqlSessionStore

    def in_the_append(db: Any, root_id: str, rows: Any, **kwargs: Any) -> bool:
        index_at_once(db, root_id, rows)
        return False

    # The store code of before the queue: every append wrote its index rows.
    with monkeypatch.context() as before:
        before.setattr(_sql_messages, "index_messages", in_the_append)
        before.setattr(_postgres_schema, "MIGRATIONS", _postgres_schema.MIGRATIONS[:2])
        with open_store(postgres) as old:
            root, child = write_old_conversation(old)
    assert _applied(postgres) == ["m001_initial", "m002_search_index"]

    with open_store(postgres, read_only=True) as reader:  # searched as it is, no queue needed
        (hit,) = reader.search_messages("heliotrope", session_id=child)
        assert (hit.session_id, hit.seq) == (root, 2)
    assert _applied(postgres) == ["m001_initial", "m002_search_index"]

    with open_store(postgres) as store:
        assert isinstance(store, SqlSessionStore)
        with store._transaction(write=False) as tx:
            assert behind(tx.db) == 0  # nothing waits: all were indexed with their append
        check_upgraded(store, root, child)
    assert _applied(postgres) == ["m001_initial", "m002_search_index", "m003_search_queue"]
