"""The seam between the SQL written once and a backend's connection: :class:`Db` (one open
transaction's statements), the :class:`Dialect`, the tables' columns, and the two bases every
concern's SQL builds on (:class:`SqlTransactionBase`, :class:`SqlStoreBase`).

SQLite and PostgreSQL run the same statements (written with ``?`` placeholders; a backend's
:class:`Db` translates them) over the same tables. Where the two differ (row locks, "no
limit"), the :class:`Dialect` says so. Timestamps go in as ``datetime`` and come back as text
(SQLite) or ``datetime`` (PostgreSQL); :func:`dt` reads either. JSON is stored as text in both,
so content round-trips byte for byte.

Every lineage has one row in ``lineages`` (root id, head = newest descendant, last activity,
the head's workspace, session count), and every session row carries its ``root_id`` and
``depth``: lineage walks are one indexed query, listing by conversation reads one row per
lineage, and a write transaction locks its lineage by locking that one row.

The SQL is split by concern, each a transaction mixin and the store methods that run it:
:mod:`._sql_lineage` (sessions and their lineage), :mod:`._sql_leases`, :mod:`._sql_messages`,
:mod:`._sql_transitions` (transitions and compaction entries), :mod:`._sql_deletion`,
:mod:`._sql_transfer` (export and import), :mod:`._sql_listing`; :mod:`._sql_transaction` and
:mod:`._sql_store` compose them. This module loads no pydantic: the listing reads through it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from ._lease_book import LeaseBook

SESSION_COLUMNS = (
    "id, parent_id, created_at, updated_at, model, title, workspace, status, message_count, "
    "metadata"
)
S_COLUMNS = ", ".join(f"s.{c.strip()}" for c in SESSION_COLUMNS.split(","))
MESSAGE_COLUMNS = "session_id, seq, role, content, token_estimate, usage, metadata, created_at"
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
COMPACTION_COLUMNS = (
    "parent_id, child_id, created_at, strategy, messages_before, messages_after, "
    "tokens_before, tokens_after, summary"
)
C_COLUMNS = ", ".join(f"c.{c.strip()}" for c in COMPACTION_COLUMNS.split(","))
NEWEST_FIRST = "ORDER BY updated_at DESC, created_at DESC, id DESC"


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the backends' SQL."""

    name: str
    row_locks: bool
    """True when a write transaction must lock its lineage's row (a server with row locks);
    False when a transaction already holds the whole database (SQLite's BEGIN IMMEDIATE)."""
    no_limit: str

    def lock_of(self, alias: str) -> str:
        # NO KEY UPDATE: what an UPDATE that keeps the key takes (a later DELETE upgrades it).
        # Only the lineage row is ever locked this way: one lock per transaction, no cycles.
        return f" FOR NO KEY UPDATE OF {alias}" if self.row_locks else ""


def storable(value: Any) -> Any:
    """A parameter as both backends store it: text with NUL characters gets U+FFFD in their
    place (PostgreSQL's text cannot hold NUL; SQLite stores the same, so both agree). JSON
    columns are unaffected: JSON writes a NUL as ``\\u0000``, which round-trips."""
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


class Db(Protocol):
    """One open transaction's statements; ``?`` placeholders, parameters as Python values
    (text passed through :func:`storable` by every backend)."""

    dialect: Dialect

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute; the number of rows changed."""
        ...

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


def dt(value: Any) -> datetime:
    """A stored timestamp (ISO text or a datetime) as an aware UTC datetime."""
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value if value.tzinfo is UTC else value.astimezone(UTC)


class SqlTransactionBase:
    """One open transaction: its statements (``db``), where it runs (``location``, for
    messages), its moment (``now``, read once, on first use), whether it writes, the store
    handle's leases (``book``) and what to do once it committed (``on_commit``)."""

    def __init__(
        self,
        db: Db,
        location: str,
        clock: Callable[[], datetime],
        *,
        write: bool,
        book: LeaseBook | None = None,
    ) -> None:
        self.db = db
        self.location = location
        self._clock = clock
        self._now: datetime | None = None
        self.write = write
        self.book = book if book is not None else LeaseBook()
        self.on_commit: list[Callable[[], None]] = []
        """Run by the store once the transaction committed (never after a rollback)."""

    @property
    def now(self) -> datetime:
        if self._now is None:
            self._now = self._clock().astimezone(UTC)
        return self._now


Tx = TypeVar("Tx", bound=SqlTransactionBase)


class SqlStoreBase(abc.ABC, Generic[Tx]):
    """What every concern's store methods stand on: the backend's transactions, seen as the
    concern's transaction (``Tx``). Every public call is one transaction: arguments are checked
    first (a bad call never waits for a lock), a write is committed, and so durable, before the
    call returns."""

    location: str
    """The store's file path or server URL (never with a password), for messages."""

    @abc.abstractmethod
    def _transaction(self, *, write: bool, lease: bool = False) -> AbstractContextManager[Tx]:
        """One transaction of the backend (a write transaction holds the write lock). ``lease``:
        a write of leases only, which need not wait for a check of the whole store."""
