"""``agentloop sessions list`` without pydantic: a read-only handle on a store of either backend
that lists its sessions and conversations as the plain rows of :mod:`sessions._sql_listing`, by
the same SQL the stores' ``list_sessions``/``list_conversations`` run.

It opens what :func:`sessions.open_store` opens (a path, ``sqlite:``/``postgresql://`` URL,
``$AGENTLOOP_STORE``, the default file) read-only, through the backends' connections
(:mod:`sessions._sqlite_db`, :mod:`sessions._postgres_db`): neither the store classes nor their
pydantic values are imported.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Protocol, Self

from ._open import DEFAULT_BUSY_TIMEOUT, parse_location, postgres_imports
from ._sql_db import Db
from ._sql_listing import (
    ConversationRow,
    SessionRow,
    check_page,
    count_conversations,
    count_sessions,
    select_conversations,
    select_sessions,
)


class Connection(Protocol):
    """A backend's connection: one transaction per ``_db`` block."""

    location: str

    def _db(self, *, write: bool) -> AbstractContextManager[Db]: ...

    def close(self) -> None: ...


class Listing:
    """The listing methods of :class:`sessions.SessionStore`, read-only, returning plain rows
    (:class:`SessionRow`, :class:`ConversationRow`: the same fields as ``Session`` and
    ``Conversation``). Each call is one read transaction."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.location = connection.location

    def list_sessions(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[SessionRow]:
        """Sessions, most recently updated first; ``limit=None`` for all of them."""
        check_page(limit, offset)
        with self._connection._db(write=False) as db:
            return select_sessions(db, workspace, limit, offset)

    def count_sessions(self, *, workspace: str | None = None) -> int:
        with self._connection._db(write=False) as db:
            return count_sessions(db, workspace)

    def list_conversations(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[ConversationRow]:
        """One row per lineage (its head: where resuming continues), most recently active
        first."""
        check_page(limit, offset)
        with self._connection._db(write=False) as db:
            return select_conversations(db, workspace, limit, offset)

    def count_conversations(self, *, workspace: str | None = None) -> int:
        with self._connection._db(write=False) as db:
            return count_conversations(db, workspace)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Listing({self.location!r})"


def open_listing(
    location: str | os.PathLike[str] | None = None, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT
) -> Listing:
    """The store at ``location`` (as :func:`sessions.open_store` takes it), opened read-only
    for listing: nothing is created (:class:`StoreMissingError` if there is no store)."""
    backend, target = parse_location(location)
    if backend == "postgresql":
        with postgres_imports():
            from ._postgres_db import PostgresConnection
        assert isinstance(target, str)
        return Listing(PostgresConnection(target, read_only=True, busy_timeout=busy_timeout))
    from ._sqlite_db import SqliteConnection

    return Listing(SqliteConnection(target, read_only=True, busy_timeout=busy_timeout))
