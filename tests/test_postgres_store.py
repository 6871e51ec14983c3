"""PostgresSessionStore specifics: bad locations and servers, foreign and newer schemas,
read-only opening, the pool, a dropped connection, the server's clock, lazy psycopg.

What every backend does is pinned once in ``test_store_contract*.py``. These tests use the
server at ``$AGENTLOOP_TEST_POSTGRES`` and skip (one line) only when it does not answer.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import (
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
    SessionStore,
    StoreConnectionError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    _compaction,
    open_store,
)

REPO = Path(__file__).resolve().parents[1]

if (_reason := postgres_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)

import psycopg  # noqa: E402  (only once the server is known to answer)
from psycopg import sql  # noqa: E402

from sessions import PostgresSessionStore  # noqa: E402
from sessions._postgres_schema import MIGRATIONS  # noqa: E402


def raw(statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def schema_exists(schema: str) -> bool:
    return bool(raw("SELECT 1 FROM pg_namespace WHERE nspname = %s", schema))


@pytest.fixture
def schema() -> Iterator[str]:
    name = fresh_schema()
    yield name
    drop_schema(name)


@pytest.fixture
def url(schema: str) -> str:
    return with_schema(postgres_url(), schema)


def test_the_store_type_and_its_schema(url: str, schema: str) -> None:
    with open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        assert _takes(store) is store
        session = store.create_session(model="m", workspace="/w")
    tables = {
        row[0] for row in raw("SELECT tablename FROM pg_tables WHERE schemaname = %s", schema)
    }
    expected = {"sessions", "messages", "compactions", "lineages", "leases", "message_search"}
    assert expected | {"search_waiting"} <= tables
    applied = raw(f"SELECT name FROM {schema}.agentloop_migrations ORDER BY name")
    assert applied == [("m001_initial",), ("m002_search_index",), ("m003_search_queue",)]
    with open_store(url.replace("postgresql://", "postgres://")) as again:
        assert again.get_session(session.id) == session
    # The server trusts 127.0.0.1, so any password works; none is ever shown.
    with_password = url.replace("://postgres@", "://postgres:s3cret@", 1)
    with open_store(with_password) as store:
        assert isinstance(store, PostgresSessionStore)
        assert "s3cret" not in repr(store) and "s3cret" not in store.location


def _takes(store: SessionStore) -> SessionStore:
    """mypy checks this call: PostgresSessionStore conforms to the protocol structurally."""
    return store


# ------------------------------------------------------------------ bad servers and URLs


@pytest.mark.parametrize(
    ("make_url", "wording"),
    [
        (lambda: "postgresql://postgres:s3cret@127.0.0.1:1/test", "cannot connect to"),
        (lambda: postgres_url().replace("postgres@", "nobody_here@", 1), "refused the credentials"),
        (lambda: postgres_url().rsplit("/", 1)[0] + "/no_such_database", "does not exist"),
    ],
)
def test_servers_that_cannot_be_used_give_one_line(make_url: Any, wording: str) -> None:
    url = make_url()
    for read_only in (False, True):
        with pytest.raises(StoreConnectionError) as caught:
            open_store(url, read_only=read_only)
        message = str(caught.value)
        assert wording in message, message
        assert "\n" not in message and "s3cret" not in message


def test_bad_store_options_are_refused() -> None:
    for bad in ("?schema=Robert'); DROP", "?pool_size=many", "?pool_size=0"):
        with pytest.raises(StoreError, match="invalid"):
            open_store(postgres_url() + bad)


# ------------------------------------------------------------------ schemas


def test_read_only_creates_nothing(url: str, schema: str) -> None:
    with pytest.raises(StoreMissingError) as caught:
        open_store(url, read_only=True)
    assert "no session store at" in str(caught.value) and "\n" not in str(caught.value)
    assert not schema_exists(schema)
    raw(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)).as_string())
    with pytest.raises(StoreMissingError):
        open_store(url, read_only=True)  # an empty schema holds no store either
    assert raw("SELECT tablename FROM pg_tables WHERE schemaname = %s", schema) == []


def test_a_foreign_schema_is_refused_and_untouched(url: str, schema: str) -> None:
    raw(f"CREATE SCHEMA {schema}")
    raw(f"CREATE TABLE {schema}.contacts (name text)")
    raw(f"INSERT INTO {schema}.contacts VALUES ('ada')")
    for read_only in (False, True):
        with pytest.raises(StoreCorruptError) as caught:
            open_store(url, read_only=read_only)
        assert "not an agentloop session store" in str(caught.value)
        assert "\n" not in str(caught.value)
    assert raw("SELECT tablename FROM pg_tables WHERE schemaname = %s", schema) == [("contacts",)]
    assert raw(f"SELECT name FROM {schema}.contacts") == [("ada",)]


def test_a_newer_schema_is_never_written_but_can_be_read(url: str, schema: str) -> None:
    with open_store(url) as store:
        session = store.create_session(model="m", workspace="/w")
    raw(f"INSERT INTO {schema}.agentloop_migrations (name) VALUES ('m900_from_the_future')")
    with pytest.raises(StoreVersionError) as caught:
        open_store(url)
    assert "newer version of agentloop" in str(caught.value) and "\n" not in str(caught.value)
    with open_store(url, read_only=True) as reader:
        assert reader.get_session(session.id) == session
        with pytest.raises(Exception, match="read-only"):
            reader.append_messages(session.id, [user("no")])
    assert raw(f"SELECT message_count FROM {schema}.sessions") == [(0,)]


def test_two_first_openers_create_the_schema_once(url: str, schema: str) -> None:
    start = threading.Barrier(4)
    stores: list[SessionStore] = []
    errors: list[BaseException] = []

    def first_open() -> None:
        start.wait()
        try:
            stores.append(open_store(url))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=first_open) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Each migration ran once (the search index's backfill too), by whichever opener won.
    applied = raw(f"SELECT name FROM {schema}.agentloop_migrations ORDER BY name")
    assert applied == [(name,) for name, _ in MIGRATIONS]
    for store in stores:
        store.close()


# ------------------------------------------------------------------ connections


def test_a_pool_lets_threads_write_different_lineages_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One thread is parked inside a compaction (holding its lineage); with a pool another
    thread of the same store appends to another lineage meanwhile."""
    store = open_store(url + "&pool_size=3")
    assert isinstance(store, PostgresSessionStore) and store._pool is not None
    try:
        held = store.create_session(model="m", workspace="/w")
        store.append_messages(held.id, conversation(6))
        free = store.create_session(model="m", workspace="/w")
        parked, go_on = threading.Event(), threading.Event()
        planned = _compaction.keep

        def parked_plan(*args: Any, **kwargs: Any) -> _compaction.Kept:
            parked.set()
            go_on.wait(timeout=60)
            return planned(*args, **kwargs)

        monkeypatch.setattr(_compaction, "keep", parked_plan)
        compacting = threading.Thread(
            target=lambda: store.compact(held.id, CompactionStrategy.sliding_window(2))
        )
        compacting.start()
        assert parked.wait(timeout=60)
        appended = threading.Event()

        def append() -> None:
            store.append_messages(free.id, [user("meanwhile")])
            appended.set()

        other = threading.Thread(target=append)
        other.start()
        try:
            assert appended.wait(timeout=30), "the append waited for the parked compaction"
        finally:
            go_on.set()
            compacting.join()
            other.join()
        assert store.get_session(held.id).status == "compacted"
    finally:
        store.close()


def test_a_dropped_connection_is_replaced(url: str) -> None:
    with open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        session = store.create_session(model="m", workspace="/w")
        assert store._conn is not None
        pid = store._conn.info.backend_pid
        raw("SELECT pg_terminate_backend(%s)", pid)
        store.append_messages(session.id, [user("after the drop")])
        assert store._conn.info.backend_pid != pid
        assert store.get_session(session.id).message_count == 1


def test_writes_are_stamped_with_the_server_clock(url: str) -> None:
    with open_store(url) as store:
        [(before,)] = raw("SELECT clock_timestamp()")
        session = store.create_session(model="m", workspace="/w")
        [(after,)] = raw("SELECT clock_timestamp()")
    assert before <= session.created_at <= after


def test_psycopg_is_loaded_only_for_a_postgresql_store(tmp_path: Path, url: str) -> None:
    code = (
        "import sys\n"
        "from sessions import open_store\n"
        f"open_store({str(tmp_path / 's.db')!r}).close()\n"
        "print('psycopg' in sys.modules, end=' ')\n"
        f"open_store({url!r}).close()\n"
        "print('psycopg' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.stdout.strip() == "False True", result.stderr
