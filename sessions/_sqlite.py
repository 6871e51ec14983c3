"""The default store: one SQLite file (stdlib ``sqlite3``, WAL mode), private to the user.

Durability: WAL with ``synchronous=FULL``, so a committed write survives a crash of the process
and of the machine. Every write is one short ``BEGIN IMMEDIATE`` transaction (one WAL flush: a
turn's messages appended in one call cost one fsync); readers never wait for writers. The
file itself (creation, checks, migrations, errors) is :mod:`sessions._sqlite_file`, the
connection and its transactions :mod:`sessions._sqlite_db`; the SQL, shared with PostgreSQL, is
:mod:`sessions._sql_transaction`; the methods are :class:`sessions._sql_store.SqlSessionStore`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ._lease_book import LeaseBook
from ._sql_search import catch_up
from ._sql_store import SqlSessionStore
from ._sql_transaction import SqlTransaction
from ._sqlite_db import DEFAULT_BUSY_TIMEOUT, SqliteConnection


class SqliteSessionStore(SqliteConnection, SqlSessionStore):
    """:class:`SessionStore` on one SQLite file. Thread-safe; use one per process.

    ``read_only=True`` opens an existing store without creating or writing anything
    (:class:`StoreMissingError` if there is none); its writes raise :class:`StoreError`.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
        read_only: bool = False,
    ) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))
        self._book = LeaseBook()
        self._indexer: threading.Thread | None = None
        SqliteConnection.__init__(self, path, busy_timeout=busy_timeout, read_only=read_only)

    @contextmanager
    def _transaction(self, *, write: bool, lease: bool = False) -> Iterator[SqlTransaction]:
        with self._lock:  # (held until the commit's callbacks ran)
            with self._db(write=write, checked=not lease) as db:
                tx = SqlTransaction(db, self.location, self._clock, write=write, book=self._book)
                yield tx
            for done in tx.on_commit:
                done()

    def _index_waiting(self) -> None:
        """Index the batch that waits for the search index on a thread, so that the append
        that completed it returns at once (a turn's next append comes after a model call)."""
        indexer = self._indexer
        if indexer is not None and indexer.is_alive():
            return  # it indexes until none waits
        self._indexer = threading.Thread(
            target=self._index_batch, name="agentloop-search-index", daemon=True
        )
        self._indexer.start()

    def _index_batch(self) -> None:
        try:
            with self._transaction(write=True) as tx:
                catch_up(tx.db)
        except Exception:
            # Closed meanwhile, or the disk refused: the messages wait, committed, for the next
            # batch or search, which index them (nothing is lost: the mark did not move).
            pass

    def close(self) -> None:
        """Close the connection (idempotent), once a batch being indexed is written."""
        indexer = self._indexer
        if indexer is not None and indexer is not threading.current_thread():
            indexer.join()
        super().close()

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"
