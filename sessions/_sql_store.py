"""The :class:`SessionStore` methods, written once for both SQL backends.

A backend (:class:`~sessions.SqliteSessionStore`, :class:`~sessions.PostgresSessionStore`)
provides :meth:`SqlSessionStore._transaction`: one transaction on its connection, seen as a
:class:`~sessions._sql_transaction.SqlTransaction`. Every public call is one transaction:
arguments are checked first (a bad call never waits for a lock), a write is committed, and so
durable, before the call returns.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from functools import partial
from types import TracebackType
from typing import Any, Self

from . import _compaction
from ._checks import as_new_message, dumps, merge_metadata, require_int, require_str
from ._compaction import CompactionStrategy
from ._ids import validate_session_id, validate_session_ref
from ._protocol import UNSET, _Unset
from ._sql_listing import (
    ConversationRow,
    SessionRow,
    check_page,
    count_conversations,
    count_sessions,
    select_conversations,
    select_sessions,
)
from ._sql_search import search
from ._sql_transaction import SqlTransaction
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


def _session(row: SessionRow) -> Session:
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
    return Conversation.model_construct(
        head=_session(row.head),
        root_id=row.root_id,
        generations=row.generations,
        sessions=row.sessions,
        updated_at=row.updated_at,
    )


def _require_lease(lease: object) -> None:
    if lease is not None and not isinstance(lease, Lease):
        raise TypeError(f"lease must be a Lease, not {type(lease).__name__}")


class SqlSessionStore(abc.ABC):
    """What both SQL backends share: every :class:`SessionStore` method."""

    location: str
    """The store's file path or server URL (never with a password), for messages."""

    @abc.abstractmethod
    def _transaction(
        self, *, write: bool, lease: bool = False
    ) -> AbstractContextManager[SqlTransaction]:
        """One transaction of the backend (a write transaction holds the write lock). ``lease``:
        a write of leases only, which need not wait for a check of the whole store."""

    # ------------------------------------------------------------------ sessions

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
        """Create an active session; ``parent_id`` makes it a child (a fork) of that session.

        ``session_id`` (a full id, e.g. from :func:`new_session_id`) lets a caller allocate the
        id before the row exists; :class:`InvalidSessionIdError` if it is malformed or taken.
        """
        require_str("model", model)
        require_str("workspace", workspace)
        if title is not None:
            require_str("title", title)
        metadata_json = dict(metadata or {})
        dumps(metadata_json)  # fail before the transaction if it is not JSON
        if parent_id is not None:
            validate_session_ref(parent_id)
        if session_id is not None:
            session_id = validate_session_id(session_id)
        with self._transaction(write=True) as tx:
            return tx.create_session(
                session_id=session_id,
                parent_ref=parent_id,
                model=model,
                workspace=workspace,
                title=title,
                metadata=metadata_json,
            )

    def get_session(self, session_id: str) -> Session:
        """The session with this id or unique prefix (>= 4 characters)."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.get(tx.resolve(session_id))

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the one session matching ``id_or_prefix``."""
        validate_session_ref(id_or_prefix)
        with self._transaction(write=False) as tx:
            return tx.resolve(id_or_prefix)

    def update_session(
        self,
        session_id: str,
        *,
        title: str | _Unset | None = UNSET,
        status: SessionStatus | _Unset = UNSET,
        metadata: Mapping[str, Any] | _Unset = UNSET,
    ) -> Session:
        """Change the given fields. ``metadata`` is merged into the existing mapping (top level;
        a key set to None is removed)."""
        validate_session_ref(session_id)
        if not isinstance(title, _Unset) and title is not None:
            require_str("title", title)
        if not isinstance(status, _Unset) and status not in ("active", "compacted"):
            raise ValueError(f"status must be 'active' or 'compacted', not {status!r}")
        with self._transaction(write=True) as tx:
            current = tx.get(tx.resolve(session_id))
            tx.update(
                current,
                title=current.title if isinstance(title, _Unset) else title,
                status=current.status if isinstance(status, _Unset) else status,
                metadata=(
                    current.metadata
                    if isinstance(metadata, _Unset)
                    else merge_metadata(current.metadata, metadata)
                ),
            )
            return tx.get(current.id)

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

    # ------------------------------------------------------------------ messages

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[NewMessage | Mapping[str, Any]],
        *,
        lease: Lease | None = None,
    ) -> list[StoredMessage]:
        """Append ``messages`` after the session's last one, in ONE short transaction: a turn's
        messages appended in one call cost one durable commit (one WAL flush), and are stored
        all or none.

        The cost does not depend on the session's length. :class:`SessionCompactedError` (naming
        the session to continue instead) if a child already continues the session;
        :class:`SessionLeasedError` if another writer's lease on it is live. A handle that
        acquired the session's lease writes under it when ``lease`` is not given.
        """
        validate_session_ref(session_id)
        _require_lease(lease)
        checked = [as_new_message(message) for message in messages]
        for message in checked:  # serialize before taking the write lock
            dumps(message.metadata)
        with self._transaction(write=True) as tx:
            return tx.append(tx.resolve(session_id), checked, lease)

    def get_messages(self, session_id: str) -> list[StoredMessage]:
        """All messages of the session, in order."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.messages(tx.resolve(session_id))

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
        """Full-text search of the stored messages, best match first, each as an excerpt.

        Scope: the whole lineage of ``session_id`` (every session of its conversation, the
        compacted ones included); without it, the conversations whose head is in
        ``workspace``; without either, every conversation. A message matches when it holds
        every word of ``query`` (``any_term``: any of them); ``word*`` matches a prefix.
        Text blocks, tool calls (name and input) and tool results are searched; a message
        copied into a later session is shown once. ``exclude_tools`` hides the calls of these
        tools and their results; ``redact`` is applied to a matching text before the excerpt is
        cut from it. :class:`SearchQueryError` if ``query`` holds no word.
        """
        require_str("query", query)
        require_int("limit", limit, minimum=1)
        require_int("excerpt_chars", excerpt_chars, minimum=20)
        if session_id is not None:
            validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            root_id = tx.root(tx.resolve(session_id)) if session_id is not None else None
            return search(
                tx.db,
                self.location,
                query,
                root_id=root_id,
                workspace=workspace,
                limit=limit,
                excerpt_chars=excerpt_chars,
                any_term=any_term,
                exclude_tools=frozenset(exclude_tools),
                redact=redact,
            )

    # ------------------------------------------------------------------ lineage

    def children(self, session_id: str) -> list[Session]:
        """Direct children, oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.children(tx.resolve(session_id))

    def ancestors(self, session_id: str) -> list[Session]:
        """Parent, grandparent, ... up to the root: nearest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.ancestors(tx.resolve(session_id))

    def newest_descendant(self, session_id: str) -> Session:
        """Where resuming ``session_id`` continues.

        Among the session and all its descendants that have no children (the leaves), the one
        updated most recently (ties: created most recently, then the greater id). A session
        without children is its own newest descendant. In a plain compaction chain this is the
        last child.
        """
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.newest_descendant(tx.resolve(session_id))

    def lineage(self, session_id: str) -> list[Session]:
        """The root of the session's lineage and all its descendants, depth-first: each parent
        before its children, siblings oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.lineage(tx.resolve(session_id))

    def transition(
        self,
        parent_id: str,
        *,
        messages: Sequence[NewMessage | Mapping[str, Any]],
        strategy: str,
        messages_before: int | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
        summary: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        child_id: str | None = None,
        lease: Lease | None = None,
    ) -> Session:
        """Continue ``parent_id`` in a new child, in ONE transaction.

        Creates the child (same model, workspace and title as the parent; metadata is the
        parent's merged with ``metadata``) holding ``messages``, marks the parent
        ``compacted`` and records a :class:`CompactionEntry`. The parent's messages are never
        touched. ``messages_before`` defaults to the parent's message count. Calling it on an
        already compacted parent forks a second child.

        ``lease``: the parent's lease (default: the one this handle acquired on it, if any);
        in the same transaction it moves to the child (the same token holds the child:
        ``renew_lease(lease)`` returns it with the child's id, ``get_lease(child.id)`` shows
        it). A live lease of another writer on the parent refuses the transition.
        """
        validate_session_ref(parent_id)
        require_str("strategy", strategy)
        if not strategy:
            raise ValueError("strategy must name the compaction strategy")
        if child_id is not None:
            child_id = validate_session_id(child_id)
        _require_lease(lease)
        checked = [as_new_message(message) for message in messages]
        with self._transaction(write=True) as tx:
            return tx.transition(
                tx.get(tx.resolve(parent_id)),
                messages=checked,
                strategy=strategy,
                messages_before=messages_before,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summary=summary,
                metadata=metadata,
                child_id=child_id,
                lease=lease,
            )

    def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy,
        summary: str | None = None,
        *,
        lease: Lease | None = None,
    ) -> CompactionRecord:
        """Compact the conversation ``session_id`` belongs to, at its newest descendant (the
        session a resume would continue), and return the lineage's :class:`CompactionRecord`.

        - ``NONE``: no child and no message change; the call is still recorded.
        - ``sliding_window(n)``: a child continues with the last ``n`` messages, the cut moved
          forward to a user message without tool_result (so no tool_result loses its tool_use).
          :class:`CompactionError` if the window holds no such message.
        - ``SUMMARIZE``: a child continues with one user message holding ``summary``
          (required); refused while a tool_use still awaits its tool_result.

        Every call increments ``compaction_count``, sets ``last_compacted_at``, keeps the summary
        (if given) and leaves the parent's messages readable. The read of the newest descendant
        and the transition happen in one write transaction holding the lineage.
        """
        _require_lease(lease)
        return _compaction.compact(
            partial(self._transaction, write=True), session_id, strategy, summary, lease=lease
        )

    def get_compaction_record(self, session_id: str) -> CompactionRecord:
        """Compaction state across the whole lineage of ``session_id``; ``session_id`` and
        ``message_count`` of the record describe its newest descendant."""
        return _compaction.get_compaction_record(
            partial(self._transaction, write=False), session_id
        )

    def compaction_history(self, session_id: str) -> list[CompactionEntry]:
        """Every compaction recorded in the session's lineage, oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.history(tx.resolve(session_id))

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, session_id: str, *, owner: str, ttl: float = 30.0) -> Lease:
        """Claim the session for ``owner`` (say who you are: ``default_lease_owner()`` gives
        ``"pid 1234 on host x"``) for ``ttl`` seconds; renew it well before it runs out.

        :class:`SessionLeasedError` (naming the holder) if another owner's lease is live. An
        expired lease (its holder crashed) is taken over; the same owner gets a fresh lease.
        Waits for a write in progress on the lineage, so what you read after acquiring is
        complete.
        """
        validate_session_ref(session_id)
        require_str("owner", owner)
        if not owner:
            raise ValueError("owner must describe the lease holder")
        _require_ttl(ttl)
        with self._transaction(write=True, lease=True) as tx:
            return tx.acquire_lease(tx.resolve(session_id), owner, float(ttl))

    def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now and return it as it stands: after a transition
        made with it, ``session_id`` is the child's. :class:`SessionLeasedError` if the lease
        was lost (released, or taken over after it expired)."""
        _require_lease(lease)
        with self._transaction(write=True, lease=True) as tx:
            return tx.renew_lease(lease)

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up; nothing happens if it was already lost."""
        _require_lease(lease)
        with self._transaction(write=True, lease=True) as tx:
            tx.release_lease(lease)

    def get_lease(self, session_id: str) -> Lease | None:
        """The live lease on the session, or None (none, or expired)."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.live_lease(tx.resolve(session_id))

    # ------------------------------------------------------------------ housekeeping

    def delete_session(self, session_id: str, *, lineage: bool = False) -> int:
        """Delete a session with its messages, compaction entries and lease; the count deleted.

        Without ``lineage`` only a leaf goes (a session with children is refused, one line
        saying how many); if it continued a compacted parent, the parent becomes active again.
        With ``lineage``, the whole lineage the session belongs to goes. A live lease on what
        would be deleted refuses the call (:class:`SessionLeasedError`).
        """
        validate_session_ref(session_id)
        with self._transaction(write=True) as tx:
            return tx.delete_session(tx.resolve(session_id), lineage=lineage)

    def prune(self, *, older_than: timedelta, workspace: str | None = None) -> int:
        """Delete whole lineages whose last activity is older than ``older_than`` (in
        ``workspace``: the head's), never one with a live lease; the count of sessions deleted.
        Each lineage goes in its own short transaction."""
        if not isinstance(older_than, timedelta) or older_than < timedelta(0):
            raise ValueError(f"older_than must be a timedelta >= 0, not {older_than!r}")
        with self._transaction(write=False) as tx:
            cutoff = tx.now - older_than
            roots = tx.prunable(cutoff, workspace)
        deleted = 0
        for root_id in roots:
            with self._transaction(write=True) as tx:
                deleted += tx.prune_lineage(root_id, cutoff)
        return deleted

    def export_lineages(
        self, *, after: str | None = None, upto: str | None = None, limit: int = 100
    ) -> list[LineageExport]:
        """Up to ``limit`` whole lineages (sessions, messages, compactions) whose root id is
        > ``after`` and <= ``upto`` (None: unbounded), in root id order, from one snapshot."""
        require_int("limit", limit, minimum=1)
        with self._transaction(write=False) as tx:
            return tx.export_lineages(after, upto, limit)

    def import_lineages(self, lineages: Sequence[LineageExport]) -> CopyReport:
        """Store exported lineages as they are (ids, times, statuses), in ONE transaction; what
        is here already is kept and counted as present, so importing twice copies nothing.

        A session that exists here with another parent, or with more messages than the
        import holds, is refused with a one-line :class:`StoreError` (nothing is written).
        """
        with self._transaction(write=True) as tx:  # (locks lineages in root id order)
            return tx.import_lineages(lineages)

    # ------------------------------------------------------------------ lifetime

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection(s); further calls fail."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _require_ttl(ttl: object) -> None:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ValueError(f"ttl must be a number of seconds > 0, not {ttl!r}")
