"""The ``SessionStore`` protocol: what every backend (SQLite, PostgreSQL) provides.

Every method that takes a session id accepts a full id or a unique prefix of at least 4
characters and raises :class:`InvalidSessionIdError`, :class:`SessionNotFoundError` or
:class:`AmbiguousSessionIdError` accordingly.

A new backend implements the seed's ``compact`` and ``get_compaction_record`` by delegating to
:func:`sessions._compaction.compact` / :func:`sessions._compaction.get_compaction_record` with a
factory of its write (read) transactions seen as a ``LineageTransaction``; its behaviour is
pinned by the contract suite in ``tests/test_store_contract*.py``.

Durability: every write method is ONE transaction, committed (made durable: one WAL flush)
before it returns; ``append_messages`` with a turn's messages costs one flush, not one per
message.

Leases (one writer per session): a writer takes :meth:`SessionStore.acquire_lease` on the
session it continues, renews it while it works and releases it at the end. A write is refused
with :class:`SessionLeasedError` while someone else's lease on that session is live; the holder
writes by passing its lease, or simply through the store handle that acquired it (the handle
remembers its leases). A transition made under the lease moves it to the child, same token. An
expired lease (its holder crashed) is taken over.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from ._compaction import CompactionStrategy
from ._types import (
    CompactionEntry,
    CompactionRecord,
    Conversation,
    CopyReport,
    Lease,
    LineageExport,
    NewMessage,
    SearchHit,
    Session,
    SessionStatus,
    StoredMessage,
)


class _Unset:
    """Marker for "argument not given" where None is a meaningful value."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


@runtime_checkable
class SessionStore(Protocol):
    """Durable sessions with lineage (parent -> child continuations) and compaction history."""

    def create_session(
        self,
        *,
        model: str,
        workspace: str,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create an active session; ``parent_id`` forks from an existing session.

        ``session_id`` (a full id) lets the caller allocate the id first and create the row
        lazily; :class:`InvalidSessionIdError` if it is malformed or already taken.
        """
        ...

    def get_session(self, session_id: str) -> Session:
        """The session with this id or unique prefix."""
        ...

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the one session matching ``id_or_prefix``."""
        ...

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage], *, lease: Lease | None = None
    ) -> list[StoredMessage]:
        """Append in ONE short transaction (one durable commit for the whole list, e.g. a
        turn) whose cost does not depend on the session's length.

        Raises :class:`SessionCompactedError` if a child already continues the session and
        :class:`SessionLeasedError` if another writer's lease on it is live.
        """
        ...

    def get_messages(self, session_id: str) -> list[StoredMessage]:
        """All messages of the session, in order."""
        ...

    def search_messages(
        self,
        query: str,
        *,
        session_id: str | None = None,
        workspace: str | None = None,
        limit: int = 10,
        excerpt_chars: int = 300,
        any_term: bool = False,
        exclude_tools: Collection[str] = (),
        redact: Callable[[str], str] | None = None,
    ) -> list[SearchHit]:
        """Full-text search, best match first, each hit an excerpt with where it was said: in
        the whole lineage of ``session_id``, else in the conversations of ``workspace``, else
        everywhere. A message matches when it holds every word (``any_term``: any).
        :class:`SearchQueryError` if ``query`` holds no word."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        title: str | _Unset | None = UNSET,
        status: SessionStatus | _Unset = UNSET,
        metadata: Mapping[str, Any] | _Unset = UNSET,
        model: str | _Unset = UNSET,
    ) -> Session:
        """Change the given fields; ``metadata`` is merged (a key set to None is removed);
        ``model``: the model the session now runs on (its children are created with it)."""
        ...

    def list_sessions(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[Session]:
        """Sessions, most recently updated first; ``limit=None`` for all."""
        ...

    def count_sessions(self, *, workspace: str | None = None) -> int:
        """How many sessions (in ``workspace``, or in all)."""
        ...

    def list_conversations(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[Conversation]:
        """One row per lineage, most recently active first; ``workspace`` filters on the
        head's workspace."""
        ...

    def count_conversations(self, *, workspace: str | None = None) -> int:
        """How many lineages (whose head is in ``workspace``, or in all)."""
        ...

    def children(self, session_id: str) -> list[Session]:
        """Direct children, oldest first."""
        ...

    def ancestors(self, session_id: str) -> list[Session]:
        """Parent, grandparent, ... up to the root (nearest first)."""
        ...

    def newest_descendant(self, session_id: str) -> Session:
        """Where resuming ``session_id`` continues.

        Among the session and all its descendants that have no children (the leaves), the one
        updated most recently (ties: created most recently). A session without children is its
        own newest descendant.
        """
        ...

    def lineage(self, session_id: str) -> list[Session]:
        """The root of the session's lineage and all of its descendants, depth-first, each
        parent before its children and siblings oldest first."""
        ...

    def transition(
        self,
        parent_id: str,
        *,
        messages: Sequence[NewMessage],
        strategy: str,
        messages_before: int | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
        summary: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        child_id: str | None = None,
        lease: Lease | None = None,
    ) -> Session:
        """In ONE transaction: create the child (same model, workspace and title; metadata is
        the parent's merged with ``metadata``) holding ``messages``, mark the parent
        ``compacted`` and record a :class:`CompactionEntry`. The parent's messages are never
        touched. ``messages_before`` defaults to the parent's message count. With ``lease``
        (the parent's), the same lease token holds the child afterwards."""
        ...

    def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        summary: str | None = None,
        *,
        lease: Lease | None = None,
    ) -> CompactionRecord:
        """Compact the conversation ``session_id`` belongs to, at its newest descendant.

        The read of the newest descendant's messages and the transition are one atomic unit:
        no other writer appends to that session or compacts the lineage in between."""
        ...

    def get_compaction_record(self, session_id: str) -> CompactionRecord:
        """Compaction state across the session's whole lineage."""
        ...

    def compaction_history(self, session_id: str) -> list[CompactionEntry]:
        """Every compaction in the session's lineage, oldest first."""
        ...

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, session_id: str, *, owner: str, ttl: float = 30.0) -> Lease:
        """Claim the session for ``owner`` (e.g. ``"pid 1234 on host x"``) for ``ttl`` seconds.

        :class:`SessionLeasedError` (naming the holder) if another owner's lease is live; an
        expired one is taken over; the same owner re-acquiring gets a fresh lease."""
        ...

    def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now; returns it with the session it now holds (a
        transition moves it to the child). :class:`SessionLeasedError` if it was lost."""
        ...

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up (nothing happens if it was already lost)."""
        ...

    def get_lease(self, session_id: str) -> Lease | None:
        """The live lease on the session, or None."""
        ...

    # ------------------------------------------------------------------ housekeeping

    def delete_session(self, session_id: str, *, lineage: bool = False) -> int:
        """Delete a leaf session (or, with ``lineage``, its whole lineage) with its messages and
        compaction entries; returns how many sessions went. A session with children is refused
        unless ``lineage``; a session (lineage) with a live lease is refused."""
        ...

    def prune(self, *, older_than: timedelta, workspace: str | None = None) -> int:
        """Delete whole lineages whose last activity is older than ``older_than`` (never one
        with a live lease); returns how many sessions went."""
        ...

    def export_lineages(
        self, *, after: str | None = None, upto: str | None = None, limit: int = 100
    ) -> list[LineageExport]:
        """Up to ``limit`` whole lineages whose root id is > ``after`` and <= ``upto`` (None:
        unbounded), in root id order; read in one snapshot."""
        ...

    def import_lineages(self, lineages: Sequence[LineageExport]) -> CopyReport:
        """Store these lineages as they are (ids, times, statuses) in ONE transaction; what the
        store already holds is kept and counted as present. A session that exists here with
        another parent, or with more messages than the import, is refused (one line)."""
        ...

    def close(self) -> None:
        """Release the store; further calls fail."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def default_lease_owner() -> str:
    """Who this process is, as a lease owner: ``"pid 1234 on host x"``."""
    return f"pid {os.getpid()} on {socket.gethostname()}"
