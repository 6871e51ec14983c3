"""On PostgreSQL the async loop awaits the store on psycopg's AsyncConnection: every write runs on
the event loop's own thread (no worker thread), and while a write waits on the server (here: a
lineage lock another connection holds) the event loop goes on running other tasks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.loop_scripts import WriteRecorder
from support.store_contract import (
    drop_schema,
    fresh_schema,
    postgres_unavailable,
    postgres_url,
    with_schema,
)

from agentloop import AgentLoop
from agentloop.testing import ScriptedModel, text_reply
from sessions import PostgresSessionStore, Session


class RecordingStore(WriteRecorder, PostgresSessionStore):
    """A real PostgreSQL store that notes the thread of every write."""


@pytest.fixture
def schema_url() -> Iterator[tuple[str, str]]:
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schema = fresh_schema()
    try:
        yield schema, with_schema(postgres_url(), schema)
    finally:
        drop_schema(schema)


def test_arun_turn_awaits_postgresql_on_the_event_loop(schema_url: tuple[str, str]) -> None:
    import psycopg
    from psycopg import sql

    schema, url = schema_url
    store = RecordingStore(url)
    loop = AgentLoop(
        model=ScriptedModel([text_reply("first"), text_reply("second")]),
        model_name="m",
        store=store,
    )

    async def waiting_on_a_lock(holder: psycopg.AsyncConnection[Any]) -> bool:
        cursor = await holder.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        row = await cursor.fetchone()
        return row is not None and row[0] > 0

    async def main() -> tuple[int, list[str], int]:
        assert (await loop.arun_turn("hi")).text == "first"
        root = loop.session_id
        # Another connection holds the lineage's row: the next write must wait on the server.
        holder = await psycopg.AsyncConnection.connect(postgres_url())
        watcher = await psycopg.AsyncConnection.connect(postgres_url(), autocommit=True)
        await holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await holder.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (root,))
        turn = asyncio.ensure_future(loop.arun_turn("again"))
        polls = 0
        while not await waiting_on_a_lock(watcher):  # this loop runs only if the event loop does
            polls += 1
            assert not turn.done(), "the write did not wait for the lock"
            await asyncio.sleep(0.01)
        await holder.rollback()  # only a task on this event loop can let the write go on
        result = await turn
        await holder.close()
        await watcher.close()
        return threading.get_ident(), [result.text], polls

    loop_thread, texts, _polls = asyncio.run(main())

    assert texts == ["second"]
    assert store.write_threads and {t for _, t in store.write_threads} == {loop_thread}
    stored = store.get_messages(loop.session_id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    store.close()


def test_the_same_store_serves_sync_callers_and_concurrent_tasks(
    schema_url: tuple[str, str],
) -> None:
    _schema, url = schema_url
    store = PostgresSessionStore(url)
    created = store.create_session(model="m", workspace="/w", title="sync")

    async def main() -> list[Session]:
        return list(
            await asyncio.gather(
                *(
                    store.arun(store.create_session, model="m", workspace="/w", title=str(n))
                    for n in range(6)
                )
            )
        )

    sessions = asyncio.run(main())
    titles = {s.title for s in store.list_sessions(limit=20)}
    assert titles == {"sync", *(str(n) for n in range(6))}
    assert len({s.id for s in sessions} | {created.id}) == 7
    store.close()
