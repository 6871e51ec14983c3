"""Choosing the store: a path or ``sqlite:`` URL for SQLite, a ``postgresql://`` URL for
PostgreSQL, else ``$AGENTLOOP_STORE``, else the default SQLite file.

psycopg is imported only when a PostgreSQL location is opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload
from urllib.parse import unquote

from ._store_errors import StoreError

if TYPE_CHECKING:
    from ._protocol import SessionStore
    from ._sqlite import SqliteSessionStore

STORE_ENV = "AGENTLOOP_STORE"
DEFAULT_BUSY_TIMEOUT = 5.0
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")

Backend = Literal["sqlite", "postgresql"]


@contextmanager
def postgres_imports() -> Iterator[None]:
    """Imports of the PostgreSQL backend: without its extra, one line saying how to get it."""
    try:
        yield
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("psycopg", "psycopg_pool", "greenlet"):
            raise
        raise StoreError(
            "a postgresql:// store needs psycopg: pip install 'agentloop[postgres]'"
        ) from None


def parse_location(location: str | os.PathLike[str] | None) -> tuple[Backend, str | Path | None]:
    """Which backend a location names, and its path (SQLite; None: the default file) or URL.

    ``sqlite:`` URLs follow ``file:`` URLs: ``sqlite:///abs/path.db`` is ``/abs/path.db`` and
    ``sqlite:relative.db`` is relative (percent-escapes are decoded; ``~`` is expanded).
    """
    if location is None:
        env = os.environ.get(STORE_ENV, "").strip()
        if not env:
            return "sqlite", None
        location = env
    if isinstance(location, os.PathLike):
        return "sqlite", Path(location).expanduser()
    if not isinstance(location, str):
        raise TypeError(f"store location must be a path or URL, not {type(location).__name__}")
    if not location.strip():
        raise StoreError("the store location is empty: give a path or a postgresql:// URL")
    lowered = location.lower()
    if lowered.startswith(("postgresql://", "postgres://")):
        return "postgresql", location
    if lowered.startswith("sqlite:"):
        rest = location[len("sqlite:") :]
        if rest.startswith("//"):
            rest = rest[2:]  # the (empty) authority of sqlite:///path
        if not rest:
            raise StoreError(f"store location {location!r} names no file: use sqlite:///path")
        return "sqlite", Path(unquote(rest)).expanduser()
    scheme = _SCHEME.match(location)
    if scheme is not None:
        raise StoreError(
            f"unknown store location {scheme.group(1)}://…: use a path, sqlite:///path "
            "or postgresql://user@host/database"
        )
    return "sqlite", Path(location).expanduser()


@overload
def open_store(
    location: os.PathLike[str],
    *,
    read_only: bool = False,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    clock: Callable[[], datetime] | None = None,
) -> SqliteSessionStore: ...


@overload
def open_store(
    location: str | None = None,
    *,
    read_only: bool = False,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    clock: Callable[[], datetime] | None = None,
) -> SessionStore: ...


def open_store(
    location: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = False,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    clock: Callable[[], datetime] | None = None,
) -> SessionStore:
    """Open the session store at ``location``.

    ``location``: a path or ``sqlite:///path`` (SQLite, created 0600 in a 0700 directory if
    missing); ``postgresql://user@host:port/database`` (or ``postgres://``; optional query
    parameters ``schema`` — default ``agentloop`` — and ``pool_size``); None:
    ``$AGENTLOOP_STORE`` if set, else ``$AGENTLOOP_HOME/sessions.db``, else
    ``<user data dir>/sessions.db``.

    ``read_only=True`` never creates or writes anything: :class:`StoreMissingError` if there
    is no store there yet; a store written by a newer version can still be read, and so can a
    SQLite file that may not be written (a shared or archived one, in a read-only directory).
    Otherwise a newer store raises :class:`StoreVersionError` and nothing is written.

    ``busy_timeout``: seconds a write waits for another writer (SQLite's write lock, a
    PostgreSQL row lock) before :class:`StoreBusyError`. ``clock`` stamps every write
    (default: the local clock for SQLite, the server's clock for PostgreSQL).

    Raises :class:`StoreCorruptError` (left untouched) for something that is not a store,
    :class:`StoreConnectionError` for a server that does not answer or refuses the
    credentials: one-line errors.
    """
    backend, target = parse_location(location)
    if backend == "postgresql":
        with postgres_imports():
            from ._postgres import PostgresSessionStore
        assert isinstance(target, str)
        return PostgresSessionStore(
            target, read_only=read_only, busy_timeout=busy_timeout, clock=clock
        )
    from ._sqlite import SqliteSessionStore

    return SqliteSessionStore(target, read_only=read_only, busy_timeout=busy_timeout, clock=clock)
