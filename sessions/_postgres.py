"""The PostgreSQL store (psycopg 3; psycopg-pool for many threads): the same contract and the same
SQL as SQLite (:mod:`sessions._sql_transaction`), for sessions shared by many workers on many
machines.

Concurrency: a write transaction locks its lineage's row (``SELECT … FOR UPDATE``) before it
reads or writes anything of the lineage, so writers of one lineage queue (up to
``busy_timeout``, then :class:`StoreBusyError`) while writers of different lineages run in
parallel; a transaction never locks two lineages except in root id order, so writers never
deadlock. Reads run in ``REPEATABLE READ READ ONLY`` transactions (one snapshot, no locks).
Durability: each write is one transaction, committed (one WAL flush, with the server's default
``synchronous_commit = on``) before the call returns.

Time: without an injected ``clock``, every write is stamped with the *server's* clock
(``clock_timestamp()``), so workers on machines whose clocks disagree still order sessions and
judge lease expiry alike.

Threads: one store may be shared by threads. By default it holds one connection (calls take
turns); ``pool_size`` (or ``?pool_size=N`` in the URL) gives it a psycopg-pool of up to N
connections so N calls run at once. Async callers use ``await store.arun(function, ...)``:
the same calls, their statements sent over psycopg's ``AsyncConnection`` and awaited on the
event loop (:mod:`sessions._postgres_async`); agentloop's async loop does this for every store
write, so the event loop never waits on the database and no thread is used.

The connection, the pool and their transactions are :mod:`sessions._postgres_db`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from ._lease_book import LeaseBook
from ._postgres_db import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    PostgresConnection,
    PostgresDb,
)
from ._sql_store import SqlSessionStore
from ._sql_transaction import SqlTransaction


def _server_clock(db: PostgresDb, began_at: datetime | None) -> Callable[[], datetime]:
    """The server's time: read with BEGIN (writes), else asked when first needed."""

    def now() -> datetime:
        if began_at is not None:
            return began_at
        row = db.one("SELECT clock_timestamp()")
        assert row is not None and isinstance(row[0], datetime)
        return row[0]

    return now


class PostgresSessionStore(PostgresConnection, SqlSessionStore):
    """:class:`SessionStore` on a PostgreSQL database (one schema of it). Thread-safe.

    ``url``: ``postgresql://user[:password]@host[:port]/database`` with libpq's parameters,
    plus ``schema`` (default ``agentloop``) and ``pool_size`` (default 1). The schema is
    created on first open for writing; ``read_only=True`` creates nothing
    (:class:`StoreMissingError` if there is no store) and may read a newer schema.
    """

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
        pool_size: int | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self._clock = clock
        self._book = LeaseBook()
        PostgresConnection.__init__(
            self,
            url,
            read_only=read_only,
            busy_timeout=busy_timeout,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
        )

    @contextmanager
    def _transaction(self, *, write: bool, lease: bool = False) -> Iterator[SqlTransaction]:
        with self._db(write=write, stamp=write and self._clock is None) as db:
            clock = self._clock or _server_clock(db, db.began_at)
            tx = SqlTransaction(db, self.location, clock, write=write, book=self._book)
            yield tx
        for done in tx.on_commit:
            done()

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self.location!r})"
