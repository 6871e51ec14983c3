"""PostgreSQL's search index written in batches (a turn's append that wrote its tsvector cost up
to +48 %): an append queues its messages (``search_waiting``); a search finds them at once (a
read-only one too); a thread of the store indexes a batch every :data:`POSTGRES_BATCH` appends on
a connection of its own; workers sharing a database never take the same messages; a writer killed
before or during a batch loses nothing; a queued message deleted before its batch is dropped."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import (
    drop_schema,
    fresh_schema,
    postgres_unavailable,
    postgres_url,
    user,
    with_schema,
)

from sessions import SessionStore, open_store
from sessions._sql_search import _TAKE, POSTGRES_BATCH, behind, catch_up
from sessions._sql_store import SqlSessionStore

if (_reason := postgres_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)

from sessions import PostgresSessionStore


@pytest.fixture
def url() -> Iterator[str]:
    schema = fresh_schema()
    yield with_schema(postgres_url(), schema)
    drop_schema(schema)


def _one(store: SessionStore, statement: str) -> Any:
    assert isinstance(store, SqlSessionStore)
    with store._transaction(write=False) as tx:
        row = tx.db.one(statement)
    assert row is not None
    return row[0]


def _behind(store: SessionStore) -> int:
    assert isinstance(store, SqlSessionStore)
    with store._transaction(write=False) as tx:
        return behind(tx.db)


def _indexed(store: SessionStore) -> int:
    return int(_one(store, "SELECT count(*) FROM message_search"))


def _queued(store: SessionStore) -> int:
    return int(_one(store, "SELECT count(*) FROM search_waiting"))


def _no_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends leave every message queued (no thread indexes them): the catch-ups are the
    test's own."""
    monkeypatch.setattr(PostgresSessionStore, "_index_waiting", lambda self: None)


def test_an_append_queues_its_messages_and_a_search_finds_them_at_once(url: str) -> None:
    with open_store(url) as store:
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, [user("the deploy key is ORCHID-7"), user("ok")])
        # One queue row for the append, no index row yet.
        assert (_queued(store), _behind(store), _indexed(store)) == (1, 2, 0)
        (hit,) = store.search_messages("orchid", session_id=session.id)
        assert (hit.session_id, hit.seq) == (session.id, 0) and "ORCHID-7" in hit.excerpt
        # The search indexed what waited first.
        assert (_queued(store), _behind(store), _indexed(store)) == (0, 0, 2)
        assert [h.seq for h in store.search_messages("orchid")] == [0]


def test_a_read_only_store_finds_what_waits_and_writes_nothing(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_batches(monkeypatch)
    with open_store(url) as store:
        first = store.create_session(model="m", workspace="/w")
        other = store.create_session(model="m", workspace="/elsewhere")
        store.append_messages(first.id, [user("indexed MAGNOLIA"), user("x")])
        assert store.search_messages("magnolia")  # indexes it
        store.append_messages(first.id, [user("waiting MAGNOLIA gate"), user("a word* prefix")])
        store.append_messages(other.id, [user("waiting MAGNOLIA elsewhere")])
        assert (_behind(store), _indexed(store)) == (3, 2)
    with open_store(url, read_only=True) as reader:
        (gate,) = reader.search_messages("magnolia gate")
        assert (gate.session_id, gate.seq) == (first.id, 2)
        assert {h.session_id for h in reader.search_messages("magnolia", limit=100)} == {
            first.id,
            other.id,
        }
        assert len(reader.search_messages("magnolia", session_id=first.id)) == 2
        assert len(reader.search_messages("magnolia", workspace="/elsewhere")) == 1
        assert [h.seq for h in reader.search_messages("prefi*", session_id=first.id)] == [3]
        assert {h.seq for h in reader.search_messages("gate prefix", any_term=True)} == {2, 3}
        assert (_behind(reader), _indexed(reader)) == (3, 2)  # nothing was written


def test_every_batch_of_appends_is_indexed_by_a_thread_on_its_own_connection(url: str) -> None:
    with open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        session = store.create_session(model="m", workspace="/w")
        for n in range(POSTGRES_BATCH - 1):
            store.append_messages(session.id, [user(f"note {n} about PEONY"), user("ok")])
        assert store._indexer is None and _indexed(store) == 0
        # The append whose queue row completes a batch returns; a thread indexes them all.
        store.append_messages(session.id, [user("the last note about PEONY")])
        assert store._indexer is not None
        store._indexer.join()
        assert (_queued(store), _indexed(store)) == (0, 2 * POSTGRES_BATCH - 1)
        # ... on a connection of its own: the calls' one was never taken from them.
        assert store._aside_conn is not None and store._aside_conn is not store._conn
        assert len(store.search_messages("peony", limit=100)) == POSTGRES_BATCH


def test_an_awaited_append_that_completes_a_batch_has_it_indexed_on_a_thread(url: str) -> None:
    """Inside ``arun`` the calls' statements go over the async connection; the batch still runs
    on its thread, over its own connection."""

    async def main() -> tuple[int, int, int]:
        with open_store(url) as store:
            assert isinstance(store, PostgresSessionStore)
            session = await store.arun(store.create_session, model="m", workspace="/w")
            for n in range(POSTGRES_BATCH):
                await store.arun(store.append_messages, session.id, [user(f"{n}: PEONY")])
            assert store._indexer is not None
            store._indexer.join()
            found = await store.arun(store.search_messages, "peony", limit=100)
            return _queued(store), _indexed(store), len(found)

    assert asyncio.run(main()) == (0, POSTGRES_BATCH, POSTGRES_BATCH)


def test_workers_sharing_a_database_never_take_the_same_messages(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_batches(monkeypatch)
    appends = _TAKE + 20
    with (
        open_store(url) as first,
        open_store(url, busy_timeout=2.0) as second,
        open_store(url) as third,
    ):
        assert isinstance(first, PostgresSessionStore)
        assert isinstance(second, PostgresSessionStore)
        session = first.create_session(model="m", workspace="/w")
        for n in range(appends):
            first.append_messages(session.id, [user(f"message {n} about QUINCE")])
        with first._transaction(write=True) as tx:  # a batch of the first, not committed yet
            taken_first = catch_up(tx.db, rounds=1)
            assert taken_first == _TAKE
            # The second skips what the first holds (it does not wait for it: a wait would
            # end in StoreBusyError after 2 s), and takes all the rest.
            with second._transaction(write=True) as other:
                taken_second = catch_up(other.db)
            assert taken_second == appends - _TAKE
            # What the first is indexing is still found, by another worker, where it waits.
            assert len(third.search_messages("quince", limit=appends)) == appends
        assert (_queued(first), _indexed(first)) == (0, appends)
        assert taken_first + taken_second == appends  # no message was indexed twice
        with second._transaction(write=True) as tx:
            assert catch_up(tx.db) == 0


def _killed_writer(url: str, during_batch: bool) -> str:
    """A process that appends, then dies as by kill -9 (before any batch, or in the middle of
    one, its transaction open); the session's id."""
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from sessions import open_store
        from sessions._sql_search import catch_up
        from support.store_contract import user
        store = open_store({url!r})
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, [user("said before the end: QUINCE")])
        print(session.id, flush=True)
        if {during_batch!r}:
            with store._aside() as db:
                assert catch_up(db) == 1  # taken, indexed, not committed
                os._exit(9)
        os._exit(9)  # no close, nothing flushed by Python: as after kill -9
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("during_batch", [False, True], ids=["before", "during"])
def test_a_writer_killed_before_or_during_a_batch_loses_nothing(
    url: str, during_batch: bool
) -> None:
    session_id = _killed_writer(url, during_batch)
    with open_store(url, read_only=True) as reader:
        assert (_queued(reader), _indexed(reader)) == (1, 0)  # the batch's work was undone
        assert [h.session_id for h in reader.search_messages("quince")] == [session_id]
    with open_store(url) as store:
        assert [h.session_id for h in store.search_messages("quince")] == [session_id]
        assert (_queued(store), _indexed(store)) == (0, 1)


def test_queued_messages_deleted_or_imported_again_do_not_stop_a_batch(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_batches(monkeypatch)
    with open_store(url) as store:
        gone = store.create_session(model="m", workspace="/w")
        store.append_messages(gone.id, [user("deleted words: ORCHID")])
        back = store.create_session(model="m", workspace="/w")
        store.append_messages(back.id, [user("imported words: TULIP")])
        (exported,) = [e for e in store.export_lineages() if e.root_id == back.id]
        kept = store.create_session(model="m", workspace="/w")
        store.append_messages(kept.id, [user("kept words: LILAC")])
        store.delete_session(gone.id)
        store.delete_session(back.id)
        store.import_lineages([exported])  # indexed at once, its old queue row still there
        assert (_queued(store), _indexed(store)) == (3, 1)
        assert isinstance(store, SqlSessionStore)
        with store._transaction(write=True) as tx:
            assert catch_up(tx.db) == 3  # the deleted message's queue row, dropped
        assert (_queued(store), _indexed(store)) == (0, 2)
        assert store.search_messages("orchid") == []
        assert [h.session_id for h in store.search_messages("tulip")] == [back.id]
        assert [h.session_id for h in store.search_messages("lilac")] == [kept.id]
