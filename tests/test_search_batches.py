"""SQLite's search index written in batches (an append that wrote its index rows cost +80 %):
appends leave their messages waiting until :data:`SEARCH_BATCH` wait, a search finds them all
the same (read-only too), nothing committed is lost when the writer dies before the batch, and
an id SQLite reuses after a delete is indexed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from support.store_contract import user

from sessions import SessionStore, open_store
from sessions._sql_search import SEARCH_BATCH, behind
from sessions._sql_store import SqlSessionStore
from sessions._sqlite import SqliteSessionStore


def _behind(store: SessionStore) -> int:
    assert isinstance(store, SqlSessionStore)
    with store._transaction(write=False) as tx:
        return behind(tx.db)


def _indexed(store: SessionStore) -> int:
    assert isinstance(store, SqlSessionStore)
    with store._transaction(write=False) as tx:
        row = tx.db.one("SELECT count(*) FROM message_search")
    assert row is not None
    return int(row[0])


def test_appends_wait_for_a_batch_and_a_search_sees_them_all(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace="/w")
        for n in range(SEARCH_BATCH - 1):
            store.append_messages(session.id, [user(f"note {n} about PEONY")])
        assert (_indexed(store), _behind(store)) == (0, SEARCH_BATCH - 1)
        # The append that makes a batch returns; a thread of the store indexes all that waited.
        assert store._indexer is None
        store.append_messages(session.id, [user("the last note")])
        assert store._indexer is not None
        store._indexer.join()
        assert (_indexed(store), _behind(store)) == (SEARCH_BATCH, 0)
        store.append_messages(session.id, [user("one more about PEONY and LILAC")])
        assert _behind(store) == 1
        (hit,) = store.search_messages("peony lilac")
        assert hit.seq == SEARCH_BATCH
        assert _behind(store) == 0  # the search indexed it first
        assert len(store.search_messages("peony", limit=100)) == SEARCH_BATCH


def test_a_read_only_store_finds_what_waits_for_the_index(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(path) as store:
        first = store.create_session(model="m", workspace="/w")
        other = store.create_session(model="m", workspace="/elsewhere")
        for n in range(SEARCH_BATCH // 2):
            store.append_messages(first.id, [user(f"indexed MAGNOLIA {n}"), user(f"x {n}")])
        store.append_messages(first.id, [user("waiting MAGNOLIA gate"), user("a word* prefix")])
        store.append_messages(other.id, [user("waiting MAGNOLIA elsewhere")])
        assert _behind(store) == 3
    with open_store(path, read_only=True) as reader:
        assert _behind(reader) == 3  # nothing was written
        (gate,) = reader.search_messages("magnolia gate")
        assert (gate.session_id, gate.seq) == (first.id, SEARCH_BATCH)
        assert {h.session_id for h in reader.search_messages("magnolia", limit=100)} == {
            first.id,
            other.id,
        }
        assert len(reader.search_messages("magnolia", session_id=first.id, limit=100)) == (
            SEARCH_BATCH // 2 + 1
        )
        assert [h.seq for h in reader.search_messages("prefi*", session_id=first.id)] == [
            SEARCH_BATCH + 1
        ]
        assert {h.seq for h in reader.search_messages("gate prefix", any_term=True)} == {
            SEARCH_BATCH,
            SEARCH_BATCH + 1,
        }
        assert _behind(reader) == 3


def test_a_writer_that_dies_before_its_batch_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from sessions import open_store
        from support.store_contract import user
        store = open_store({str(path)!r})
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, [user("said before the end: QUINCE")])
        print(session.id, flush=True)
        os._exit(9)  # no close, nothing flushed by Python: as after kill -9
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr
    session_id = done.stdout.strip()
    with open_store(path, read_only=True) as reader:
        assert [h.session_id for h in reader.search_messages("quince")] == [session_id]
    with open_store(path) as store:
        assert [h.session_id for h in store.search_messages("quince")] == [session_id]
        assert (_indexed(store), _behind(store)) == (1, 0)


def test_an_id_reused_after_the_newest_messages_are_deleted_is_indexed(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        kept = store.create_session(model="m", workspace="/w")
        store.append_messages(kept.id, [user("kept words")])
        gone = store.create_session(model="m", workspace="/w")
        store.append_messages(gone.id, [user("ORCHID")] * 3)
        assert store.search_messages("orchid")  # indexed: the mark passed their ids
        store.delete_session(gone.id)
        again = store.create_session(model="m", workspace="/w")
        store.append_messages(again.id, [user("new words: TULIP")])  # takes a deleted id
        assert store.search_messages("orchid") == []
        assert [h.session_id for h in store.search_messages("tulip")] == [again.id]
