"""Transitions and compaction entries, for both SQL backends: a parent continued in a child
(the child created with its messages, the parent marked compacted, a :class:`CompactionEntry`
recorded, the lease moved along), a compaction recorded without a child, and the lineage's
compaction history. The seed's ``compact`` (:mod:`sessions._compaction`) runs on top of these
in one write transaction.

:class:`SqlTransitions` is the transaction's part, :class:`TransitionMethods` the store's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from . import _compaction
from ._checks import as_new_message, merge_metadata, require_str
from ._compaction import CompactionStrategy
from ._ids import new_session_id, validate_session_id, validate_session_ref
from ._sql_db import C_COLUMNS, COMPACTION_COLUMNS, SqlStoreBase, dt
from ._sql_leases import require_lease
from ._sql_messages import SqlMessages
from ._types import CompactionEntry, CompactionRecord, Lease, NewMessage, Session


def entry_from(row: Sequence[Any]) -> CompactionEntry:
    """A compaction row (:data:`COMPACTION_COLUMNS`) as a :class:`CompactionEntry`."""
    return CompactionEntry.model_construct(
        parent_id=row[0],
        child_id=row[1],
        created_at=dt(row[2]),
        strategy=row[3],
        messages_before=row[4],
        messages_after=row[5],
        tokens_before=row[6],
        tokens_after=row[7],
        summary=row[8],
    )


class SqlTransitions(SqlMessages):
    """The transitions of one open transaction (the caller resolved, and so locked, the
    lineage); what :class:`sessions._compaction.LineageTransaction` asks for."""

    def compaction_history(self, session_id: str) -> list[CompactionEntry]:
        """Every compaction entry of the session's lineage, oldest first."""
        rows = self.db.all(
            f"SELECT {C_COLUMNS} FROM compactions c JOIN sessions s ON s.id = c.parent_id "
            "WHERE s.root_id = ? ORDER BY c.created_at, c.id",
            (self.root(session_id),),
        )
        return [entry_from(row) for row in rows]

    def _insert_entry(
        self,
        parent_id: str,
        child_id: str | None,
        *,
        strategy: str,
        messages_before: int,
        messages_after: int,
        tokens_before: int | None,
        tokens_after: int | None,
        summary: str | None,
    ) -> None:
        self.db.run(
            f"INSERT INTO compactions ({COMPACTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                parent_id,
                child_id,
                self.now,
                strategy,
                messages_before,
                messages_after,
                tokens_before,
                tokens_after,
                summary,
            ),
        )

    def transition(
        self,
        parent: Session,
        *,
        messages: Sequence[NewMessage],
        strategy: str,
        messages_before: int | None,
        tokens_before: int | None,
        tokens_after: int | None,
        summary: str | None,
        metadata: Mapping[str, Any] | None,
        child_id: str | None,
        lease: Lease | None = None,
    ) -> Session:
        """The one transition primitive: child created, parent compacted, entry recorded (and
        ``lease``, if given, moved to the child: same token)."""
        lease = lease or self.book.get(parent.id)
        held = self.lease_row(parent.id)
        self.check_lease(parent.id, held, lease)
        root_id, depth = self.place(parent.id)
        if child_id is None:
            child_id = new_session_id(self.now)
        else:
            self.refuse_taken(child_id)
        self.insert_session(
            session_id=child_id,
            parent_id=parent.id,
            root_id=root_id,
            depth=depth + 1,
            model=parent.model,
            workspace=parent.workspace,
            title=parent.title,
            metadata=merge_metadata(parent.metadata, metadata or {}),
            message_count=len(messages),
        )
        self.insert_messages(child_id, 0, messages, root_id=root_id, returning=False)
        self.db.run(
            "UPDATE sessions SET status = 'compacted', updated_at = ? WHERE id = ?",
            (self.now, parent.id),
        )
        self._insert_entry(
            parent.id,
            child_id,
            strategy=strategy,
            messages_before=parent.message_count if messages_before is None else messages_before,
            messages_after=len(messages),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summary=summary,
        )
        if lease is not None:
            self.move_lease(lease, held, child_id)
        self.upkeep(root_id, child_id, added=1)
        return self.get(child_id)

    def record_without_child(
        self,
        session: Session,
        *,
        strategy: str,
        message_count: int,
        tokens: int | None,
        summary: str | None,
        lease: Lease | None = None,
    ) -> None:
        """Record a compaction entry that created no child (its messages and tokens before and
        after are the same); it counts as activity on the session."""
        self.check_lease(session.id, self.lease_row(session.id), lease or self.book.get(session.id))
        self._insert_entry(
            session.id,
            None,
            strategy=strategy,
            messages_before=message_count,
            messages_after=message_count,
            tokens_before=tokens,
            tokens_after=tokens,
            summary=summary,
        )
        self.db.run("UPDATE sessions SET updated_at = ? WHERE id = ?", (self.now, session.id))
        self.upkeep(self.root(session.id), session.id)


class TransitionMethods(SqlStoreBase[SqlTransitions]):
    """The store's calls on transitions and compactions."""

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
        require_lease(lease)
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
        require_lease(lease)
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
            return tx.compaction_history(tx.resolve(session_id))
