"""One SQLite store file's connection and its transactions, each seen as a :class:`Db`: what the
store (:mod:`sessions._sqlite`) and the listing (:mod:`sessions._list_handle`) share.

Imports no store values (no pydantic): ``agentloop sessions list`` reads through it alone.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._paths import default_store_path
from ._sql_db import Dialect, storable
from ._sqlite_check import IntegrityCheck
from ._sqlite_file import map_error, open_connection, open_read_only, tidy_sidecars
from ._store_errors import StoreError

DEFAULT_BUSY_TIMEOUT = 5.0
SQLITE = Dialect(name="sqlite", row_locks=False, no_limit="LIMIT -1")


def _ts(moment: datetime) -> str:
    # Fixed width, always UTC: the text sorts like the time.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _params(params: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_ts(value) if isinstance(value, datetime) else storable(value) for value in params)


class SqliteDb:
    """The statements of one transaction on a ``sqlite3`` connection."""

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, _params(params)).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, _params(params)).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(sql, _params(params)).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # Rows of one batch mostly share their time stamps (a compaction's child: hundreds of
        # messages stamped alike): each distinct one is formatted once.
        stamps: dict[datetime, str] = {}

        def stamp(moment: datetime) -> str:
            text = stamps.get(moment)
            if text is None:
                text = stamps[moment] = _ts(moment)
            return text

        self.conn.executemany(
            sql,
            [[stamp(v) if isinstance(v, datetime) else storable(v) for v in row] for row in rows],
        )


class SqliteConnection:
    """The connection to one store file (opened, checked and migrated by
    :mod:`sessions._sqlite_file`); :meth:`_db` runs one transaction on it. Thread-safe.

    ``read_only=True`` opens an existing store without creating or writing anything
    (:class:`StoreMissingError` if there is none); its write transactions raise
    :class:`StoreError`.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path).expanduser().absolute() if path is not None else default_store_path()
        self.location = str(self.path)
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._tidy = False
        self._check: IntegrityCheck | None = None
        if read_only:
            self._conn, self._tidy = open_read_only(self.path, busy_timeout)
        else:
            self._conn = open_connection(self.path, busy_timeout)
            self._check = IntegrityCheck(self.path, busy_timeout)

    @contextmanager
    def _db(self, *, write: bool, checked: bool = True) -> Iterator[SqliteDb]:
        """One transaction, committed when the block ends, rolled back if it raises; SQLite's
        errors become one-line :class:`SessionError` s. A write waits for the check of the
        whole file (:mod:`sessions._sqlite_check`) unless not ``checked`` (a lease), and none
        is made to a file found damaged."""
        if write and self._check is not None:
            self._check.require_sound(wait=checked)  # (outside the lock: reads go on meanwhile)
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"session store {self.path} is closed", path=self.path)
            if write and self.read_only:
                raise StoreError(
                    f"session store {self.path} is open read-only; nothing was written",
                    path=self.path,
                )
            try:
                # IMMEDIATE takes the write lock up front, so two writers queue on the busy
                # timeout instead of failing mid-transaction; DEFERRED gives readers a snapshot.
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield SqliteDb(conn)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise map_error(error, self.path, self.busy_timeout) from None

    def close(self) -> None:
        """Close the connection (idempotent); further calls raise :class:`StoreError`."""
        if self._check is not None:
            self._check.close()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                if self._tidy:
                    tidy_sidecars(self.path)
