"""SqliteSessionStore: create, read, append, update, list, ids, location, schema."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import sessions
from sessions import (
    AmbiguousSessionIdError,
    InvalidSessionIdError,
    NewMessage,
    SessionNotFoundError,
    SessionStore,
    SqliteSessionStore,
    StoreCorruptError,
    StoreError,
    _migrations,
    default_store_path,
    open_store,
)


class Clock:
    """A clock that moves one second per reading: orderings become deterministic."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(seconds=1)):
        self.now = start or datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    with open_store(tmp_path / "store" / "sessions.db", clock=Clock()) as opened:
        yield opened


def user(text: str, **extra: Any) -> NewMessage:
    return NewMessage(role="user", content=[{"type": "text", "text": text}], **extra)


def assistant(text: str, **extra: Any) -> NewMessage:
    return NewMessage(role="assistant", content=[{"type": "text", "text": text}], **extra)


def test_public_api_is_exported() -> None:
    for name in sessions.__all__:
        assert hasattr(sessions, name), name
    assert isinstance(sessions.open_store, Callable)  # type: ignore[arg-type]


def test_sqlite_store_satisfies_the_protocol(store: SqliteSessionStore) -> None:
    assert isinstance(store, SessionStore)


def test_create_and_get(store: SqliteSessionStore) -> None:
    created = store.create_session(
        model="claude-sonnet-4-5", workspace="/work/app", title="fix the parser", metadata={"a": 1}
    )
    got = store.get_session(created.id)
    assert got == created
    assert got.parent_id is None
    assert got.status == "active"
    assert got.message_count == 0
    assert got.metadata == {"a": 1}
    assert got.created_at.tzinfo is not None
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.updated_at == got.created_at


def test_append_round_trips_content_exactly(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": 'héllo ✓ \u0000 "quoted"', "cache_control": {"type": "ephemeral"}},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "edit",
            "input": {"path": "a.py", "n": [1, 2.5, None, True]},
        },
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
    ]
    written = store.append_messages(
        session.id,
        [
            user("hi", token_estimate=3, metadata={"pinned": True}),
            NewMessage(
                role="assistant",
                content=blocks,
                usage={"input_tokens": 10, "output_tokens": 5},
                token_estimate=40,
            ),
        ],
    )
    assert [m.seq for m in written] == [0, 1]
    read = store.get_messages(session.id)
    assert read == written
    assert read[1].content == blocks
    assert read[1].usage == {"input_tokens": 10, "output_tokens": 5}
    assert read[0].metadata == {"pinned": True}
    assert read[0].token_estimate == 3
    assert read[1].to_param() == {"role": "assistant", "content": blocks}


def test_a_bare_string_becomes_one_text_block(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, [NewMessage(role="user", content="hello")])  # type: ignore[arg-type]
    assert store.get_messages(session.id)[0].content == [{"type": "text", "text": "hello"}]


def test_append_keeps_count_and_updated_at_on_the_session(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, [user("a"), assistant("b")])
    store.append_messages(session.id, [user("c")])
    after = store.get_session(session.id)
    assert after.message_count == 3
    assert after.updated_at > session.updated_at
    assert [m.seq for m in store.get_messages(session.id)] == [0, 1, 2]
    assert [m.content[0]["text"] for m in store.get_messages(session.id)] == ["a", "b", "c"]


def test_append_keeps_given_created_at(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    when = datetime(2024, 12, 24, 18, 0, tzinfo=UTC)
    store.append_messages(session.id, [user("a", created_at=when)])
    assert store.get_messages(session.id)[0].created_at == when


def test_append_statements_do_not_depend_on_session_length(store: SqliteSessionStore) -> None:
    """Appending must not read, count or rewrite the session's existing messages."""
    short = store.create_session(model="m", workspace="/w")
    long = store.create_session(model="m", workspace="/w")
    store.append_messages(short.id, [user("x")] * 5)
    store.append_messages(long.id, [user("x")] * 600)

    def statements(session_id: str) -> list[str]:
        seen: list[str] = []
        assert store._conn is not None
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


def test_append_to_unknown_or_invalid_session(store: SqliteSessionStore) -> None:
    with pytest.raises(SessionNotFoundError):
        store.append_messages(sessions.new_session_id(), [user("a")])
    with pytest.raises(InvalidSessionIdError):
        store.append_messages("../x", [user("a")])


def test_invalid_message_is_refused_before_writing(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    with pytest.raises(ValueError):
        store.append_messages(session.id, [{"role": "system", "content": "no"}])
    assert store.get_session(session.id).message_count == 0


def test_update_session_changes_only_what_is_given(store: SqliteSessionStore) -> None:
    session = store.create_session(
        model="m", workspace="/w", title="old", metadata={"a": 1, "b": 2}
    )
    updated = store.update_session(session.id, metadata={"b": None, "c": 3})
    assert updated.metadata == {"a": 1, "c": 3}
    assert updated.title == "old"
    assert store.update_session(session.id, title="new").title == "new"
    assert store.update_session(session.id, title=None).title is None
    assert store.update_session(session.id, status="compacted").status == "compacted"
    with pytest.raises(ValueError):
        store.update_session(session.id, status="deleted")  # type: ignore[arg-type]
    assert store.get_session(session.id).metadata == {"a": 1, "c": 3}


def test_list_is_newest_first_and_filters_by_workspace(store: SqliteSessionStore) -> None:
    first = store.create_session(model="m", workspace="/a")
    second = store.create_session(model="m", workspace="/b")
    third = store.create_session(model="m", workspace="/a")
    assert [s.id for s in store.list_sessions()] == [third.id, second.id, first.id]
    assert [s.id for s in store.list_sessions(workspace="/a")] == [third.id, first.id]
    # Activity moves a session to the top.
    store.append_messages(first.id, [user("back again")])
    assert [s.id for s in store.list_sessions(workspace="/a")] == [first.id, third.id]
    assert [s.id for s in store.list_sessions(limit=1, offset=1)] == [third.id]
    assert store.list_sessions(limit=0) == []
    assert len(store.list_sessions(limit=None)) == 3
    assert store.list_sessions(workspace="/nowhere") == []
    assert store.count_sessions() == 3
    assert store.count_sessions(workspace="/a") == 2


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


def test_prefixes_resolve_and_ambiguity_lists_candidates(tmp_path: Path) -> None:
    frozen = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    with open_store(tmp_path / "s.db", clock=lambda: frozen) as store:
        ids = [store.create_session(model="m", workspace="/w").id for _ in range(3)]
        # Same second: the first 6 characters are shared, so a 6-character prefix is ambiguous.
        assert len({i[:6] for i in ids}) == 1
        with pytest.raises(AmbiguousSessionIdError) as caught:
            store.get_session(ids[0][:6])
        message = str(caught.value)
        assert "\n" not in message
        assert all(i[:8] in message for i in ids)
        assert sorted(caught.value.candidates) == sorted(ids)
        for session_id in ids:
            assert store.resolve_id(session_id) == session_id
            assert store.get_session(session_id.upper()).id == session_id
            # A unique prefix (long enough to tell the three apart) resolves.
            assert store.resolve_id(session_id[:20]) == session_id


def test_unknown_and_bad_ids_raise_one_line_errors(store: SqliteSessionStore) -> None:
    for ref, error in (
        (sessions.new_session_id(), SessionNotFoundError),
        ("zzzz", SessionNotFoundError),
        ("../x", InvalidSessionIdError),
        ("", InvalidSessionIdError),
        ("a b c d", InvalidSessionIdError),
        ("abc", InvalidSessionIdError),
    ):
        with pytest.raises(error) as caught:
            store.get_session(ref)
        assert "\n" not in str(caught.value)
        assert isinstance(caught.value, sessions.SessionError)


def test_closed_store_refuses_work(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace="/w")
    with pytest.raises(StoreError, match="closed"):
        store.get_session(session.id)
    store.close()  # idempotent


def test_threads_share_one_store(store: SqliteSessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")

    def work(worker: int) -> None:
        for n in range(25):
            store.append_messages(session.id, [user(f"{worker}:{n}")])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = store.get_messages(session.id)
    assert [m.seq for m in messages] == list(range(100))
    for worker in range(4):
        mine = [
            m.content[0]["text"] for m in messages if m.content[0]["text"].startswith(f"{worker}:")
        ]
        assert mine == [f"{worker}:{n}" for n in range(25)]


# ------------------------------------------------------------------ location and permissions


def test_store_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / "sessions.db"
    with open_store() as store:
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
