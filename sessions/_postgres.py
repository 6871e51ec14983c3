"""The PostgreSQL store (psycopg 3; psycopg-pool for many threads): the same contract and the same
SQL as SQLite (:mod:`sessions._sql_transaction`), for sessions shared by many workers on many
machines.

Concurrency: a write transaction locks its lineage's row (``SELECT … FOR UPDATE``) before it
reads or writes anything of the lineage, so writers of one lineage queue (up to
``busy_timeout``, then :class:`StoreBusyError`) while writers of different lineages run in
parallel; a transaction never locks two lineages except in root id order, so writers never
deadlock. Reads run in ``REPEATABLE READ READ ONLY`` transactions (one snapshot, no locks).
Durability: each write is one transaction, committed (one WAL flush, with the server's default
``synchronous_commit = on``) before the call returns. The search index is written after the
appends, in batches, on a thread of the store and a connection of its own
(:func:`sessions._sql_search.catch_up`).

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

import threading
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
from ._sql_search import catch_up
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
        self._indexer: threading.Thread | None = None
        self._indexing = threading.Lock()
        self._stopping = False
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

    def _index_waiting(self) -> None:
        """Index the batch that waits on a thread of the store, on a connection of its own, so
        that the append that completed it returns at once (a turn's next append comes after a
        model call) and never waits for it."""
        with self._indexing:
            indexer = self._indexer
            if self._stopping or (indexer is not None and indexer.is_alive()):
                return  # it indexes until none waits
            self._indexer = threading.Thread(
                target=self._index_batches, name="agentloop-search-index", daemon=True
            )
            self._indexer.start()

    def _index_batches(self) -> None:
        try:
            while not self._stopping:
                # A share per transaction: short ones, each committed (what other workers
                # take meanwhile is skipped, not waited for).
                with self._aside() as db:
                    if catch_up(db, rounds=1) == 0:
                        return
        except Exception:
            # Closed meanwhile, the server gone, the disk full: the messages wait, committed,
            # for the next batch or search, which index them (their queue rows were kept).
            pass

    def close(self) -> None:
        """Close the connections (idempotent), once a share of a batch being indexed is
        written."""
        with self._indexing:
            self._stopping = True
            indexer = self._indexer
        if indexer is not None and indexer is not threading.current_thread():
            indexer.join()
        super().close()

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self.location!r})"
