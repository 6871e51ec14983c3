"""Deleting, for both SQL backends: a leaf session or a whole lineage with everything stored
with it, and pruning the lineages idle for too long; never what a live lease holds.

:class:`SqlDeletion` is the transaction's part, :class:`DeletionMethods` the store's.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ._ids import SHORT_LENGTH, validate_session_ref
from ._sql_db import SqlStoreBase, dt
from ._sql_leases import LE_COLUMNS, lease_from, leased_error
from ._sql_lineage import SqlLineage
from ._store_errors import SessionError, SessionLeasedError


class SqlDeletion(SqlLineage):
    """The deletions of one open transaction."""

    def _refuse_live_leases(self, root_id: str, session_id: str | None = None) -> None:
        """Refuse to delete while a live lease is held in the lineage (or on ``session_id``)."""
        where = "le.session_id = ?" if session_id is not None else "s.root_id = ?"
        row = self.db.one(
            f"SELECT {LE_COLUMNS} FROM leases le "
            f"JOIN sessions s ON s.id = le.session_id WHERE {where} AND le.expires_at > ? "
            "ORDER BY le.expires_at DESC LIMIT 1",
            (session_id if session_id is not None else root_id, self.now),
        )
        if row is not None:
            held = lease_from(row)
            raise SessionLeasedError(
                f"cannot delete: {leased_error(held.session_id, held)}",
                session_id=held.session_id,
                owner=held.owner,
                expires_at=held.expires_at,
            )

    def delete_session(self, session_id: str, *, lineage: bool) -> int:
        """``session_id`` is resolved (its lineage locked)."""
        root_id, _ = self.place(session_id)
        if lineage:
            self._refuse_live_leases(root_id)
            return self.delete_lineage(root_id)
        children = self.db.one("SELECT count(*) FROM sessions WHERE parent_id = ?", (session_id,))
        assert children is not None
        if children[0]:
            count = int(children[0])
            raise SessionError(
                f"session {session_id[:SHORT_LENGTH]} has {count} child session"
                f"{'s' if count != 1 else ''}; delete a leaf, or the whole lineage"
            )
        self._refuse_live_leases(root_id, session_id)
        parent_row = self.db.one("SELECT parent_id FROM sessions WHERE id = ?", (session_id,))
        parent_id = parent_row[0] if parent_row is not None else None
        self.db.run("DELETE FROM leases WHERE session_id = ?", (session_id,))
        self.db.run("DELETE FROM messages WHERE session_id = ?", (session_id,))
        self.db.run(
            "DELETE FROM compactions WHERE parent_id = ? OR child_id = ?", (session_id, session_id)
        )
        self.db.run("DELETE FROM sessions WHERE id = ?", (session_id,))
        if parent_id is not None:
            # The parent is continued by nothing any more: it can take messages again.
            self.db.run(
                "UPDATE sessions SET status = 'active' WHERE id = ? AND status = 'compacted' "
                "AND NOT EXISTS (SELECT 1 FROM compactions WHERE parent_id = ? "
                "AND child_id IS NOT NULL)",
                (parent_id, parent_id),
            )
        self.rebuild_lineage(root_id)
        return 1

    def delete_lineage(self, root_id: str) -> int:
        """Every session of the lineage and everything stored with them; the caller holds its
        lock and checked leases."""
        inside = "IN (SELECT id FROM sessions WHERE root_id = ?)"
        self.db.run(f"DELETE FROM leases WHERE session_id {inside}", (root_id,))
        self.db.run(f"DELETE FROM messages WHERE session_id {inside}", (root_id,))
        self.db.run(f"DELETE FROM compactions WHERE parent_id {inside}", (root_id,))
        self.db.run("DELETE FROM lineages WHERE root_id = ?", (root_id,))
        return self.db.run("DELETE FROM sessions WHERE root_id = ?", (root_id,))

    def prunable(self, cutoff: datetime, workspace: str | None) -> list[str]:
        """Roots of lineages idle since before ``cutoff`` (checked again, locked, when deleted)."""
        where = " AND workspace = ?" if workspace is not None else ""
        params = (cutoff, workspace) if workspace is not None else (cutoff,)
        rows = self.db.all(
            f"SELECT root_id FROM lineages WHERE updated_at < ?{where} ORDER BY root_id", params
        )
        return [str(row[0]) for row in rows]

    def prune_lineage(self, root_id: str, cutoff: datetime) -> int:
        """Delete the lineage if it is still idle since before ``cutoff`` and not leased."""
        if not self.lock_lineage(root_id):
            return 0
        row = self.db.one("SELECT updated_at FROM lineages WHERE root_id = ?", (root_id,))
        if row is None or not dt(row[0]) < cutoff:
            return 0
        try:
            self._refuse_live_leases(root_id)
        except SessionLeasedError:
            return 0
        return self.delete_lineage(root_id)


class DeletionMethods(SqlStoreBase[SqlDeletion]):
    """The store's calls that delete."""

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
