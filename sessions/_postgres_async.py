"""The PostgreSQL store's calls on psycopg's ``AsyncConnection``, for asyncio callers.

``await store.arun(function, *args)`` runs ``function`` (any code that calls the store: the
store's own methods, or agentloop's store effects) in :mod:`sessions._bridge`; while it runs,
each transaction borrows the store's async connection and every statement is awaited on the
running event loop. The SQL is the one the synchronous store runs: only the connection differs.

One async connection per store and event loop, opened on first use; a transaction holds it (an
``asyncio.Lock``) from BEGIN to COMMIT, so two tasks never interleave statements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from ._bridge import await_bridged

if TYPE_CHECKING:
    from psycopg.pq import TransactionStatus

AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]
AsyncCursor = psycopg.AsyncCursor[tuple[Any, ...]]


class BridgedCursor:
    """A cursor whose fetches are awaited through the bridge."""

    def __init__(self, cursor: AsyncCursor) -> None:
        self._cursor = cursor

    @property
    def description(self) -> object:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return await_bridged(self._cursor.fetchone())

    def fetchall(self) -> list[tuple[Any, ...]]:
        return await_bridged(self._cursor.fetchall())

    def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        await_bridged(self._cursor.executemany(query, rows))

    def __enter__(self) -> BridgedCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        await_bridged(self._cursor.close())


class _Info:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    @property
    def transaction_status(self) -> TransactionStatus:
        return self._conn.info.transaction_status


class BridgedConnection:
    """The subset of a synchronous psycopg connection the store uses, on an async one."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def broken(self) -> bool:
        return self._conn.broken

    @property
    def info(self) -> _Info:
        return _Info(self._conn)

    def execute(self, query: str, params: Sequence[Any] | None = None) -> BridgedCursor:
        return BridgedCursor(await_bridged(self._conn.execute(query, params)))

    def cursor(self) -> BridgedCursor:
        return BridgedCursor(self._conn.cursor())


class AsyncSide:
    """A store's async connection: opened on first use in an event loop, reopened when it
    broke or when another event loop uses the store."""

    def __init__(
        self,
        conninfo: str,
        options: dict[str, Any],
        setup: sql.Composed,
        connect_error: Callable[[psycopg.Error], Exception],
    ) -> None:
        self._conninfo = conninfo
        self._options = options
        self._setup = setup
        self._connect_error = connect_error
        self._conn: AsyncConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    async def _connect(self) -> AsyncConnection:
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._options)
        except psycopg.Error as error:
            raise self._connect_error(error) from None
        try:
            await conn.execute(self._setup)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _acquire(self) -> AsyncConnection:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            self._loop, self._lock, self._conn = loop, asyncio.Lock(), None
        await self._lock.acquire()
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = await self._connect()
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    @contextmanager
    def borrow(self) -> Iterator[BridgedConnection]:
        """The async connection for one transaction (inside :func:`run_bridged` only)."""
        conn = await_bridged(self._acquire())
        try:
            yield BridgedConnection(conn)
        finally:
            assert self._lock is not None
            self._lock.release()

    def close(self) -> None:
        """Close the async connection from synchronous code (the store's ``close``)."""
        if self._conn is not None:
            self._conn.pgconn.finish()  # what AsyncConnection.close does, without awaiting
            self._conn = None
