"""A PostgreSQL store's connection (or pool) and its transactions, each seen as a :class:`Db`:
what the store (:mod:`sessions._postgres`) and the listing (:mod:`sessions._list_handle`) share.

Imports no store values (no pydantic): ``agentloop sessions list --store postgresql://…``
reads through it alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ._bridge import in_bridge, run_bridged
from ._postgres_async import AsyncSide, BridgedConnection
from ._postgres_schema import Target, connect_error, first_line, parse_url, prepare
from ._sql_db import Dialect, storable
from ._store_errors import (
    SessionError,
    StoreBusyError,
    StoreConnectionError,
    StoreError,
)

POSTGRES = Dialect(name="postgresql", row_locks=True, no_limit="LIMIT ALL")
DEFAULT_BUSY_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 5.0

Connection = psycopg.Connection[tuple[Any, ...]]
AnyConnection = Connection | BridgedConnection
"""A synchronous connection, or the async one seen through the bridge (inside ``arun``)."""
T = TypeVar("T")


@lru_cache(maxsize=1024)
def _translate(statement: str) -> str:
    # The shared SQL uses `?`; psycopg uses `%s` (and so a literal % must be doubled).
    return statement.replace("%", "%%").replace("?", "%s")


def _params(params: Sequence[Any]) -> Sequence[Any]:
    # (A NUL is rare: the parameters are copied only when one is there.)
    if any(isinstance(value, str) and "\x00" in value for value in params):
        return [storable(value) for value in params]
    return params


class PostgresDb:
    """The statements of one transaction on a psycopg connection."""

    dialect = POSTGRES

    def __init__(self, conn: AnyConnection) -> None:
        self.conn = conn
        self.began_at: datetime | None = None
        """The server's time read with BEGIN (a stamped transaction), else None."""

    def one(self, statement: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self.conn.execute(_translate(statement), _params(params)).fetchone()

    def all(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(_translate(statement), _params(params)).fetchall()

    def run(self, statement: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(_translate(statement), _params(params)).rowcount

    def many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(_translate(statement), [_params(row) for row in rows])


class PostgresConnection:
    """The connection (``pool_size`` > 1: a psycopg-pool) to one store's schema; :meth:`_db`
    runs one transaction on it. Thread-safe.

    The schema is created on first open for writing; ``read_only=True`` creates nothing
    (:class:`StoreMissingError` if there is no store) and may read a newer schema.
    """

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        pool_size: int | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self._target: Target = parse_url(url)
        self.location = self._target.display
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self._connect_timeout = connect_timeout
        self._lock = threading.RLock()
        self._conn: Connection | None = None
        self._pool: ConnectionPool[Connection] | None = None
        self._closed = False
        self._async: AsyncSide | None = None
        self._aside_lock = threading.Lock()
        self._aside_conn: Connection | None = None
        conn = self._connect()
        try:
            prepare(conn, self._target, read_only)
            self._configure(conn)
        except psycopg.Error as error:
            conn.close()
            raise self._map(error) from None
        except BaseException:
            conn.close()
            raise
        size = pool_size if pool_size is not None else self._target.pool_size
        if size <= 1:
            self._conn = conn
            return
        conn.close()
        self._pool = ConnectionPool(
            self._target.conninfo,
            min_size=1,
            max_size=size,
            kwargs=self._connect_options(),
            configure=self._configure,
            name="agentloop-sessions",
            timeout=max(busy_timeout, 1.0),
            open=True,
        )

    def _async_side(self) -> AsyncSide:
        with self._lock:
            if self._async is None:
                options = self._connect_options()
                self._async = AsyncSide(
                    self._target.conninfo,
                    options,
                    self._setup(),
                    lambda error: connect_error(error, self.location),
                )
            return self._async

    async def arun(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` (code that calls this store) with every statement sent
        over psycopg's ``AsyncConnection`` and awaited on the running event loop: an asyncio
        caller's event loop never waits on the database, and no thread is used."""
        self._async_side()
        return await run_bridged(function, *args, **kwargs)

    # ------------------------------------------------------------------ connections

    def _connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self._target.conninfo:
            options["connect_timeout"] = max(1, round(self._connect_timeout))
        return options

    def _connect(self) -> Connection:
        try:
            return psycopg.Connection.connect(self._target.conninfo, **self._connect_options())
        except psycopg.Error as error:
            raise connect_error(error, self.location) from None

    def _configure(self, conn: Connection) -> None:
        """Per connection: UTC, the store's schema, how long to wait for a row lock."""
        conn.execute(self._setup())

    def _setup(self) -> sql.Composed:
        timeout_ms = max(1, round(self.busy_timeout * 1000))
        statements = [
            sql.SQL("SET TIME ZONE 'UTC'"),
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self._target.schema)),
            sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{timeout_ms}ms")),
        ]
        if self.read_only:
            statements.append(sql.SQL("SET default_transaction_read_only = on"))
        return sql.SQL("; ").join(statements)

    @contextmanager
    def _borrow(self) -> Iterator[AnyConnection]:
        if self._closed:
            raise StoreError(f"session store {self.location} is closed", location=self.location)
        if in_bridge() and self._async is not None:  # inside arun(): the async connection
            with self._async.borrow() as bridged:
                yield bridged
            return
        if self._pool is not None:
            try:
                with self._pool.connection() as conn:
                    yield conn
            except PoolTimeout:
                raise StoreBusyError(
                    f"session store {self.location} is busy: every connection of its pool "
                    f"stayed in use for more than {max(self.busy_timeout, 1.0):g}s; try again",
                    location=self.location,
                ) from None
            except PoolClosed:
                raise StoreError(
                    f"session store {self.location} is closed", location=self.location
                ) from None
            return
        with self._lock:
            if self._closed:
                raise StoreError(f"session store {self.location} is closed", location=self.location)
            if self._conn is None or self._conn.closed or self._conn.broken:
                # The server restarted or the network dropped: connect again.
                stale, self._conn = self._conn, None
                self._conn = self._connected_again(stale)
            yield self._conn

    def _connected_again(self, stale: Connection | None) -> Connection:
        """A new configured connection in place of ``stale`` (closed first, if any); a
        database error while configuring it is one-line :class:`SessionError`."""
        if stale is not None:
            stale.close()
        conn = self._connect()
        try:
            self._configure(conn)
        except psycopg.Error as error:
            conn.close()
            raise self._map(error) from None
        return conn

    @contextmanager
    def _db(self, *, write: bool, stamp: bool = False) -> Iterator[PostgresDb]:
        """One transaction (a read: one REPEATABLE READ snapshot), committed when the block
        ends, rolled back if it raises; database errors become one-line
        :class:`SessionError` s. ``stamp``: read the server's time with BEGIN
        (``began_at``)."""
        if write and self.read_only:
            raise StoreError(
                f"session store {self.location} is open read-only; nothing was written",
                location=self.location,
            )
        with self._borrow() as conn:
            db = PostgresDb(conn)
            try:
                conn, db.began_at = self._begin(conn, write, stamp)
                db.conn = conn
                try:
                    yield db
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except psycopg.Error as error:
                self._rollback(conn)
                raise self._map(error) from None

    @contextmanager
    def _aside(self) -> Iterator[PostgresDb]:
        """One write transaction on a connection of its own, for the store's background work
        (the search index's batches), so that it never holds the calls' connection or a slot
        of their pool. The connection is made on first use and closed by :meth:`close`."""
        with self._aside_lock:
            if self._closed:
                raise StoreError(f"session store {self.location} is closed", location=self.location)
            conn = self._aside_conn
            if conn is None or conn.closed or conn.broken:
                self._aside_conn = None
                conn = self._aside_conn = self._connected_again(conn)
            try:
                conn.execute("BEGIN")
                try:
                    yield PostgresDb(conn)
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except psycopg.Error as error:
                self._rollback(conn)
                raise self._map(error) from None

    def _begin(
        self, conn: AnyConnection, write: bool, stamp: bool
    ) -> tuple[AnyConnection, datetime | None]:
        """BEGIN, and with ``stamp`` (a write without an injected clock) the server's time in the
        same round trip. A lone connection found dead at this point (the server restarted, an idle
        connection was cut) is replaced once: nothing was sent yet, so nothing is repeated."""
        begin = "BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        if stamp:
            begin += "; SELECT clock_timestamp()"
        try:
            cursor = conn.execute(begin)
        except psycopg.OperationalError:
            # (the async connection is replaced when it is next borrowed)
            if isinstance(conn, BridgedConnection) or self._pool is not None or not conn.broken:
                raise
            conn.close()
            self._conn = None
            conn = self._connect()
            try:
                self._configure(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            cursor = conn.execute(begin)
        row = cursor.fetchone() if cursor.description else None
        began_at = row[0] if row is not None else None
        assert began_at is None or isinstance(began_at, datetime)
        return conn, began_at

    @staticmethod
    def _rollback(conn: AnyConnection) -> None:
        if conn.closed or conn.broken:
            return
        if conn.info.transaction_status != TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    def _map(self, error: psycopg.Error) -> SessionError:
        """The one-line :class:`SessionError` a user sees for a database error."""
        state = error.sqlstate
        where = self.location
        if state in ("55P03", "40P01"):  # lock_not_available (lock_timeout), deadlock_detected
            held = f"kept it locked for more than {self.busy_timeout:g}s"
            if self.busy_timeout <= 0:
                held = "holds its lock"
            return StoreBusyError(
                f"session store {where} is busy: another process {held}; try again",
                location=where,
            )
        if isinstance(error, psycopg.OperationalError) and state is None:
            return StoreConnectionError(
                f"lost the connection to {where}: {first_line(error)}", location=where
            )
        if state == "53100":  # disk_full: the server could not extend a table's file
            return StoreError(
                f"session store {where}: the disk is full ({first_line(error)}); nothing more "
                "was written",
                location=where,
            )
        if state == "57014":  # query_canceled: a statement_timeout ended the write
            return StoreError(
                f"session store {where}: the server canceled the write ({first_line(error)}); "
                "nothing more was written",
                location=where,
            )
        return StoreError(f"session store {where}: {first_line(error)}", location=where)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the connection or the pool (idempotent); further calls raise StoreError."""
        with self._lock:
            self._closed = True
            if self._pool is not None:
                self._pool.close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._async is not None:
                self._async.close()
        with self._aside_lock:
            if self._aside_conn is not None:
                self._aside_conn.close()
                self._aside_conn = None
