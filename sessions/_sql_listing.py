"""Listing, for both SQL backends: sessions and conversations (one row per lineage) read as
plain frozen dataclasses, and counted.

The store's ``list_sessions``/``list_conversations`` (:class:`ListingMethods`) build their
pydantic values from these rows; ``agentloop sessions list`` (through :mod:`sessions._list_handle`)
shows them as they are, so this module never imports pydantic (its values are imported when one
is first built).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._sql_db import (
    NEWEST_FIRST,
    S_COLUMNS,
    SESSION_COLUMNS,
    Db,
    SqlStoreBase,
    SqlTransactionBase,
    dt,
)

if TYPE_CHECKING:
    from ._types import Conversation, Session


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session as the listing reads it: the fields of :class:`sessions.Session`, in its
    order, without pydantic."""

    id: str
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    model: str
    title: str | None
    workspace: str
    status: str
    message_count: int
    metadata: dict[str, Any]

    @property
    def short_id(self) -> str:
        return self.id[:8]


SESSION_FIELDS = tuple(field.name for field in fields(SessionRow))
"""The names of a session's fields, in order (those of :class:`sessions.Session` too)."""


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """A lineage as the listing reads it: the fields of :class:`sessions.Conversation`."""

    head: SessionRow
    root_id: str
    generations: int
    sessions: int
    updated_at: datetime


def _session_row(row: Sequence[Any]) -> SessionRow:
    """The first columns of ``row``, in :data:`SESSION_COLUMNS`' order, as a :class:`SessionRow`
    (positional: the listing builds thousands of these)."""
    return SessionRow(
        row[0], row[1], dt(row[2]), dt(row[3]), row[4], row[5], row[6], row[7], int(row[8]),
        json.loads(row[9]),
    )  # fmt: skip


def _page(db: Db, limit: int | None) -> str:
    return "LIMIT ? OFFSET ?" if limit is not None else f"{db.dialect.no_limit} OFFSET ?"


def _filter(column: str, workspace: str | None) -> tuple[str, list[Any]]:
    return ("", []) if workspace is None else (f"WHERE {column} = ?", [workspace])


def _paged(params: list[Any], limit: int | None, offset: int) -> list[Any]:
    return [*params, limit, offset] if limit is not None else [*params, offset]


def select_sessions(
    db: Db, workspace: str | None, limit: int | None, offset: int
) -> list[SessionRow]:
    """Sessions (of ``workspace``, or all), most recently updated first."""
    where, params = _filter("workspace", workspace)
    rows = db.all(
        f"SELECT {SESSION_COLUMNS} FROM sessions {where} {NEWEST_FIRST} {_page(db, limit)}",
        _paged(params, limit, offset),
    )
    return [_session_row(row) for row in rows]


def count_sessions(db: Db, workspace: str | None) -> int:
    where, params = _filter("workspace", workspace)
    row = db.one(f"SELECT count(*) FROM sessions {where}", params)
    assert row is not None
    return int(row[0])


def select_conversations(
    db: Db, workspace: str | None, limit: int | None, offset: int
) -> list[ConversationRow]:
    """One row per lineage (its head, depth and size; ``workspace`` filters on the head's),
    most recently active first: one row read per conversation shown."""
    where, params = _filter("l.workspace", workspace)
    rows = db.all(
        f"SELECT {S_COLUMNS}, l.root_id, s.depth, l.sessions, l.updated_at "
        f"FROM lineages l JOIN sessions s ON s.id = l.head_id {where} "
        f"ORDER BY l.updated_at DESC, l.root_id DESC {_page(db, limit)}",
        _paged(params, limit, offset),
    )
    return [
        ConversationRow(_session_row(row), row[10], int(row[11]), int(row[12]), dt(row[13]))
        for row in rows
    ]


def count_conversations(db: Db, workspace: str | None) -> int:
    where, params = _filter("workspace", workspace)
    row = db.one(f"SELECT count(*) FROM lineages {where}", params)
    assert row is not None
    return int(row[0])


def check_page(limit: object, offset: object) -> None:
    """A listing's ``limit`` (an int >= 0 or None) and ``offset`` (an int >= 0), checked
    before any transaction."""
    for name, value in (("limit", limit), ("offset", offset)):
        if name == "limit" and value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, not {value!r}")


def _session(row: SessionRow) -> Session:
    from ._types import Session

    # The listing's rows were validated on the way in: no re-validation.
    return Session.model_construct(
        id=row.id,
        parent_id=row.parent_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        model=row.model,
        title=row.title,
        workspace=row.workspace,
        status=row.status,
        message_count=row.message_count,
        metadata=row.metadata,
    )


def _conversation(row: ConversationRow) -> Conversation:
    from ._types import Conversation

    return Conversation.model_construct(
        head=_session(row.head),
        root_id=row.root_id,
        generations=row.generations,
        sessions=row.sessions,
        updated_at=row.updated_at,
    )


class ListingMethods(SqlStoreBase[SqlTransactionBase]):
    """The store's listing calls."""

    def list_sessions(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[Session]:
        """Sessions, most recently updated first (then most recently created); ``limit=None``
        for all of them."""
        check_page(limit, offset)
        with self._transaction(write=False) as tx:
            rows = select_sessions(tx.db, workspace, limit, offset)
        return [_session(row) for row in rows]

    def count_sessions(self, *, workspace: str | None = None) -> int:
        """How many sessions (in ``workspace``, or in all)."""
        with self._transaction(write=False) as tx:
            return count_sessions(tx.db, workspace)

    def list_conversations(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[Conversation]:
        """One :class:`Conversation` per lineage, most recently active first: its head (the
        newest descendant, where resuming continues), depth and size. ``workspace`` filters on
        the head's workspace. Reads one row per conversation shown."""
        check_page(limit, offset)
        with self._transaction(write=False) as tx:
            rows = select_conversations(tx.db, workspace, limit, offset)
        return [_conversation(row) for row in rows]

    def count_conversations(self, *, workspace: str | None = None) -> int:
        """How many lineages (whose head is in ``workspace``, or in all)."""
        with self._transaction(write=False) as tx:
            return count_conversations(tx.db, workspace)
