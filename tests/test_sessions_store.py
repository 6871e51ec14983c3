"""SqliteSessionStore specifics: SQL cost, indexes, atomicity on disk, location, modes, schema,
read-only opening, schema versions.

What every backend does is pinned once in ``test_store_contract.py``.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import Clock

from sessions import (
    NewMessage,
    SessionStore,
    SqliteSessionStore,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    _migrations,
    default_store_path,
    open_store,
)
from sessions._sql_transaction import SqlTransaction as SqliteTransaction


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    with open_store(tmp_path / "store" / "sessions.db", clock=Clock()) as opened:
        yield opened


def user(text: str, **extra: Any) -> NewMessage:
    return NewMessage(role="user", content=[{"type": "text", "text": text}], **extra)


def _takes(store: SessionStore) -> SessionStore:
    return store


def test_sqlite_store_is_a_session_store(store: SqliteSessionStore) -> None:
    """mypy checks this call: SqliteSessionStore must conform to the protocol structurally
    (every method, with compatible signatures). Its behaviour is the contract suite's job."""
    assert _takes(store) is store


def dump(store: SqliteSessionStore) -> dict[str, Any]:
    assert store._conn is not None
    return {
        table: store._conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("sessions", "messages", "compactions")
    }


def test_a_failed_transition_rolls_back_every_row(
    store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = store.create_session(model="m", workspace="/w")
    store.append_messages(parent.id, [user("a"), user("b"), user("c")])
    before = dump(store)
    original = SqliteTransaction.insert_messages

    def insert_then_fail(self: SqliteTransaction, *args: Any, **kwargs: Any) -> Any:
        original(self, *args, **kwargs)
        raise RuntimeError("crash in the middle of the transition")

    monkeypatch.setattr(SqliteTransaction, "insert_messages", insert_then_fail)
    with pytest.raises(RuntimeError):
        store.transition(parent.id, messages=[user("kept")], strategy="x")
    monkeypatch.undo()
    assert dump(store) == before
    assert store.get_session(parent.id).status == "active"


def test_append_statements_do_not_depend_on_session_length(store: SqliteSessionStore) -> None:
    """Appending must not read, count or rewrite the session's existing messages."""
    short = store.create_session(model="m", workspace="/w")
    long = store.create_session(model="m", workspace="/w")
    store.append_messages(short.id, [user("x")] * 5)
    store.append_messages(long.id, [user("x")] * 600)

    def statements(session_id: str) -> list[str]:
        seen: list[str] = []
        assert store._conn is not None
        if store._indexer is not None:  # a batch for the search index, written on a thread
            store._indexer.join()
        store._conn.set_trace_callback(seen.append)
        try:
            store.append_messages(session_id, [user("y")])
        finally:
            store._conn.set_trace_callback(None)
        return seen

    short_sql, long_sql = statements(short.id), statements(long.id)
    assert len(short_sql) == len(long_sql)
    touching_messages = [s for s in long_sql if "messages" in s.lower()]
    assert touching_messages and all(
        s.lstrip().upper().startswith("INSERT") for s in touching_messages
    )


def test_invalid_message_is_refused_before_writing(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    with pytest.raises(ValueError):
        store.append_messages(session.id, [{"role": "system", "content": "no"}])
    assert store.get_session(session.id).message_count == 0


def test_list_uses_indexes(store: SqliteSessionStore) -> None:
    assert store._conn is not None
    for where, params in (("WHERE workspace = ?", ("/a",)), ("", ())):
        plan = store._conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM sessions "
            f"{where} ORDER BY updated_at DESC, created_at DESC, id DESC LIMIT 50",
            params,
        ).fetchall()
        text = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX" in text and "TEMP B-TREE" not in text, text


# ------------------------------------------------------------------ location and permissions


def test_store_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / "sessions.db"
    with open_store() as store:
        assert isinstance(store, SqliteSessionStore)
        assert store.path == tmp_path / "home" / "sessions.db"
    with open_store(tmp_path / "explicit.db") as store:
        assert store.path == tmp_path / "explicit.db"
    assert (tmp_path / "explicit.db").is_file()

    import platformdirs

    monkeypatch.delenv("AGENTLOOP_HOME")
    monkeypatch.setattr(
        platformdirs,
        "user_data_dir",
        lambda appname, appauthor=None: str(tmp_path / "pd" / appname),
    )
    assert default_store_path() == tmp_path / "pd" / "agentloop" / "sessions.db"


def test_directory_0700_and_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        directory = tmp_path / "fresh" / "agentloop"
        with open_store(directory / "sessions.db") as store:
            store.create_session(model="m", workspace="/w")
            names = sorted(p.name for p in directory.iterdir())
            assert names == ["sessions.db", "sessions.db-shm", "sessions.db-wal"]
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700
            for path in directory.iterdir():
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        os.umask(old)


def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    directory = tmp_path / "mine"
    directory.mkdir()
    directory.chmod(0o755)
    with open_store(directory / "sessions.db"):
        pass
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755


def test_no_temporary_files_are_left_after_creation(tmp_path: Path) -> None:
    with open_store(tmp_path / "d" / "sessions.db"):
        pass
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["sessions.db"]


# ------------------------------------------------------------------ schema and migrations


def test_wal_foreign_keys_and_recorded_migrations(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(path) as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    raw = sqlite3.connect(path)
    rows = raw.execute("SELECT name, applied_at FROM _migrations").fetchall()
    raw.close()
    assert [name for name, _ in rows] == [name for name, _ in _migrations.MIGRATIONS]
    with open_store(path):
        pass
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT name, applied_at FROM _migrations").fetchall() == rows
    raw.close()


def test_a_new_migration_is_applied_once_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    with open_store(path) as store:
        kept = store.create_session(model="m", workspace="/w")
    calls: list[int] = []

    def m999_add_column(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("ALTER TABLE sessions ADD COLUMN extra TEXT")

    monkeypatch.setattr(
        _migrations, "MIGRATIONS", [*_migrations.MIGRATIONS, ("m999_add_column", m999_add_column)]
    )
    with open_store(path) as store:
        assert store.get_session(kept.id) == kept
    with open_store(path):
        pass
    assert calls == [1]
    raw = sqlite3.connect(path)
    assert "extra" in [row[1] for row in raw.execute("PRAGMA table_info(sessions)")]
    assert ("m999_add_column",) in raw.execute("SELECT name FROM _migrations").fetchall()
    raw.close()


def test_a_foreign_sqlite_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE contacts (name TEXT)")
    raw.execute("INSERT INTO contacts VALUES ('ada')")
    raw.commit()
    raw.close()
    before = path.read_bytes(), path.stat().st_mtime_ns
    with pytest.raises(StoreCorruptError) as caught:
        open_store(path)
    assert str(path) in str(caught.value)
    assert "not an agentloop session store" in str(caught.value)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_an_empty_sqlite_database_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE t (x)")
    raw.execute("DROP TABLE t")
    raw.commit()
    raw.close()
    with open_store(path) as store:
        session = store.create_session(model="m", workspace="/w")
    with open_store(path) as store:
        assert store.get_session(session.id).id == session.id
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_directory_at_the_store_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sessions.db").mkdir()
    with pytest.raises(StoreCorruptError, match="not a regular file"):
        open_store(tmp_path / "sessions.db")


def test_conversation_list_uses_indexes(store: SqliteSessionStore) -> None:
    assert store._conn is not None
    for where, params in (("WHERE l.workspace = ?", ("/a",)), ("", ())):
        plan = store._conn.execute(
            "EXPLAIN QUERY PLAN SELECT s.id FROM lineages l JOIN sessions s ON s.id = l.head_id "
            f"{where} ORDER BY l.updated_at DESC, l.root_id DESC LIMIT 50",
            params,
        ).fetchall()
        text = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX lineages_by" in text and "TEMP B-TREE" not in text, text


# ------------------------------------------------------------------ one turn, one commit


def test_one_append_call_is_one_durable_commit(store: SqliteSessionStore) -> None:
    """A turn's messages appended in one call: one transaction, so one WAL flush (fsync)."""
    session = store.create_session(model="m", workspace="/w")
    assert store._conn is not None
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    try:
        store.append_messages(session.id, [user("q"), user("a"), user("tool result")])
    finally:
        store._conn.set_trace_callback(None)
    commands = [s.split()[0].upper() for s in seen if s.split()[0].upper() in ("BEGIN", "COMMIT")]
    assert commands == ["BEGIN", "COMMIT"]
    assert len([s for s in seen if s.startswith("INSERT INTO messages")]) == 3


# ------------------------------------------------------------------ choosing the store


def test_locations_name_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "a" / "s.db"
    with open_store(f"sqlite://{absolute}") as store:
        assert isinstance(store, SqliteSessionStore) and store.path == absolute
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:relative.db") as store:
        assert isinstance(store, SqliteSessionStore) and store.path == tmp_path / "relative.db"
    monkeypatch.setenv("AGENTLOOP_STORE", str(tmp_path / "from-env.db"))
    with open_store() as store:
        assert isinstance(store, SqliteSessionStore) and store.path == tmp_path / "from-env.db"
    monkeypatch.setenv("AGENTLOOP_STORE", "")
    with open_store() as store:
        assert isinstance(store, SqliteSessionStore) and store.path == default_store_path()
    for bad, wording in (
        ("mysql://u@h/db", "unknown store location mysql://"),
        ("", "empty"),
        ("sqlite://", "names no file"),
    ):
        with pytest.raises(StoreError, match=wording) as caught:
            open_store(bad)
        assert "\n" not in str(caught.value)


def test_postgresql_without_psycopg_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("psycopg", "psycopg_pool"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    for name in ("sessions._postgres", "sessions._postgres_db", "sessions._postgres_schema"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(StoreError, match=r"needs psycopg: pip install 'agentloop\[postgres\]'"):
        open_store("postgresql://postgres@127.0.0.1/test")


# ------------------------------------------------------------------ read-only opening


def files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def test_read_only_never_creates_a_store(tmp_path: Path) -> None:
    for path in (tmp_path / "missing-dir" / "sessions.db", tmp_path / "sessions.db"):
        with pytest.raises(StoreMissingError) as caught:
            open_store(path, read_only=True)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_read_only_reads_and_leaves_every_byte_alone(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with open_store(path) as store:
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, [user("kept")])
    before = files(tmp_path)
    with open_store(path, read_only=True) as reader:
        assert reader.get_messages(session.id)[0].content[0]["text"] == "kept"
        assert [c.head.id for c in reader.list_conversations()] == [session.id]
        for write in (
            lambda: reader.append_messages(session.id, [user("no")]),
            lambda: reader.create_session(model="m", workspace="/w"),
            lambda: reader.acquire_lease(session.id, owner="me"),
        ):
            with pytest.raises(StoreError, match="read-only") as caught:
                write()
            assert "\n" not in str(caught.value)
    assert files(tmp_path) == before


# ------------------------------------------------------------------ schema versions


def make_store_newer(path: Path, how: str) -> None:
    raw = sqlite3.connect(path)
    if how == "user_version":
        raw.execute("PRAGMA user_version = 999")
    else:
        raw.execute("INSERT INTO _migrations VALUES ('m900_from_the_future', '2030-01-01')")
    raw.commit()
    raw.close()


@pytest.mark.parametrize("how", ["user_version", "unknown migration"])
def test_a_newer_store_is_never_written_but_can_be_read(tmp_path: Path, how: str) -> None:
    path = tmp_path / "sessions.db"
    with open_store(path) as store:
        session = store.create_session(model="m", workspace="/w")
    make_store_newer(path, how)
    before = files(tmp_path)
    with pytest.raises(StoreVersionError) as caught:
        open_store(path)
    message = str(caught.value)
    assert "\n" not in message and "newer version of agentloop" in message and str(path) in message
    assert files(tmp_path) == before
    with open_store(path, read_only=True) as reader:
        assert reader.get_session(session.id).id == session.id
    assert files(tmp_path) == before


def build_old_store(path: Path) -> tuple[str, str, str]:
    """A store as the version before lineage rows wrote it (migration m001 only): a root
    compacted into a child, a fork, and their messages; returns (root, child, fork)."""
    first = _migrations.MIGRATIONS[:1]
    original = _migrations.MIGRATIONS
    _migrations.MIGRATIONS = first
    try:
        SqliteSessionStore(path).close()
    finally:
        _migrations.MIGRATIONS = original
    raw = sqlite3.connect(path)
    ids = ("0" * 25 + "1", "0" * 25 + "2", "0" * 25 + "3")
    rows = [
        (ids[0], None, "2025-01-01T10:00:00.000000+00:00", "compacted", 2),
        (ids[1], ids[0], "2025-01-01T11:00:00.000000+00:00", "active", 1),
        (ids[2], ids[0], "2025-01-01T10:30:00.000000+00:00", "active", 0),
    ]
    for session_id, parent, when, status, count in rows:
        raw.execute(
            "INSERT INTO sessions (id, parent_id, created_at, updated_at, model, workspace, "
            "status, message_count) VALUES (?, ?, ?, ?, 'm', '/w', ?, ?)",
            (session_id, parent, when, when, status, count),
        )
        for seq in range(count):
            raw.execute(
                "INSERT INTO messages (session_id, seq, role, content, created_at) "
                'VALUES (?, ?, ?, \'[{"type":"text","text":"x"}]\', ?)',
                (session_id, seq, "user" if seq % 2 == 0 else "assistant", when),
            )
    raw.execute(
        "INSERT INTO compactions (parent_id, child_id, created_at, strategy, messages_before, "
        "messages_after) VALUES (?, ?, ?, 'summarize', 2, 1)",
        (ids[0], ids[1], rows[1][2]),
    )
    raw.commit()
    raw.close()
    return ids


def check_old_store(store: SessionStore, ids: tuple[str, str, str]) -> None:
    root, child, fork = ids
    [conversation] = store.list_conversations()
    assert (conversation.root_id, conversation.head.id) == (root, child)
    assert (conversation.generations, conversation.sessions) == (1, 3)
    assert store.newest_descendant(root).id == child
    assert [s.id for s in store.lineage(fork)] == [root, fork, child]
    assert len(store.get_messages(root)) == 2


def test_an_older_store_is_read_as_it_is_and_upgraded_when_written(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    ids = build_old_store(path)
    before = files(tmp_path)
    with open_store(path, read_only=True) as reader:
        check_old_store(reader, ids)
    assert files(tmp_path) == before  # read through TEMP tables: not a byte written
    with open_store(path) as store:
        check_old_store(store, ids)
        store.append_messages(ids[2], [user("the fork goes on")])
        assert store.list_conversations()[0].head.id == ids[2]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == len(_migrations.MIGRATIONS)
    raw.close()
