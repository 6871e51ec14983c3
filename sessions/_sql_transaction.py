"""The SQL both backends run, part three: leases, deletion and pruning, export and import.

:class:`SqlTransaction` is one open transaction with every query; the stores run each public
call through one, and the seed compaction layer runs in one as its ``LineageTransaction``.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ._checks import dumps
from ._ids import SHORT_LENGTH
from ._sql_reads import (
    C_COLUMNS,
    COMPACTION_COLUMNS,
    M_COLUMNS,
    S_COLUMNS,
    Node,
    dt,
    entry_from,
    lease_from,
    message_from,
    newest_leaf,
    session_from,
)
from ._sql_search import index_messages
from ._sql_writes import SqlWrites, leased_error
from ._store_errors import SessionError, SessionLeasedError, StoreError
from ._types import (
    CompactionEntry,
    CopyReport,
    Lease,
    LineageExport,
    Session,
    StoredMessage,
)

_LEASE_COLUMNS = "session_id, owner, token, expires_at, ttl, acquired_at"


def _entry_key(entry: CompactionEntry) -> tuple[Any, ...]:
    return (
        entry.parent_id,
        entry.child_id,
        entry.created_at,
        entry.strategy,
        entry.messages_before,
        entry.messages_after,
    )


class SqlTransaction(SqlWrites):
    """Every query of one open transaction."""

    # ------------------------------------------------------------------ leases

    def acquire_lease(self, session_id: str, owner: str, ttl: float) -> Lease:
        """``session_id`` is resolved (its lineage locked): no other writer runs meanwhile."""
        self.place(session_id)  # still there after the lock (raises if it was deleted)
        held = self.lease_row(session_id)
        if held is not None and held.owner != owner and held.expires_at > self.now:
            raise leased_error(session_id, held)
        lease = Lease.model_construct(
            session_id=session_id,
            owner=owner,
            token=secrets.token_hex(16),
            expires_at=self.now + timedelta(seconds=ttl),
            ttl=ttl,
        )
        self.db.run("DELETE FROM leases WHERE session_id = ?", (session_id,))
        self.db.run(
            f"INSERT INTO leases ({_LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, owner, lease.token, lease.expires_at, ttl, self.now),
        )
        self.on_commit.append(lambda: self.book.put(lease))
        return lease

    def renew_lease(self, lease: Lease) -> Lease:
        row = self.db.one(
            "UPDATE leases SET expires_at = ? WHERE token = ? RETURNING session_id, owner",
            (self.now + timedelta(seconds=lease.ttl), lease.token),
        )
        if row is None:
            held = self.lease_row(lease.session_id) if self.exists(lease.session_id) else None
            if held is not None and held.expires_at > self.now:
                raise leased_error(lease.session_id, held)
            raise SessionLeasedError(
                f"the lease on session {lease.session_id[:SHORT_LENGTH]} was lost "
                "(released, or taken over after it expired); acquire it again",
                session_id=lease.session_id,
            )
        renewed = Lease.model_construct(
            session_id=str(row[0]),
            owner=str(row[1]),
            token=lease.token,
            expires_at=self.now + timedelta(seconds=lease.ttl),
            ttl=lease.ttl,
        )
        self.on_commit.append(lambda: self.book.refresh(renewed))
        return renewed

    def release_lease(self, lease: Lease) -> None:
        self.db.run("DELETE FROM leases WHERE token = ?", (lease.token,))
        self.on_commit.append(lambda: self.book.forget(lease.token))

    def live_lease(self, session_id: str) -> Lease | None:
        held = self.lease_row(session_id)
        return held if held is not None and held.expires_at > self.now else None

    def _refuse_live_leases(self, root_id: str, session_id: str | None = None) -> None:
        """Refuse to delete while a live lease is held in the lineage (or on ``session_id``)."""
        where = "le.session_id = ?" if session_id is not None else "s.root_id = ?"
        row = self.db.one(
            "SELECT le.session_id, le.owner, le.token, le.expires_at, le.ttl FROM leases le "
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

    # ------------------------------------------------------------------ deletion

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

    # ------------------------------------------------------------------ export

    def export_lineages(
        self, after: str | None, upto: str | None, limit: int
    ) -> list[LineageExport]:
        low, high = after if after is not None else "", upto if upto is not None else "~"
        roots = [
            str(row[0])
            for row in self.db.all(
                "SELECT root_id FROM lineages WHERE root_id > ? AND root_id <= ? "
                "ORDER BY root_id LIMIT ?",
                (low, high, limit),
            )
        ]
        if not roots:
            return []
        span = (low, roots[-1])
        sessions = [
            (str(row[10]), session_from(row))
            for row in self.db.all(
                f"SELECT {S_COLUMNS}, s.root_id FROM sessions s "
                "WHERE s.root_id > ? AND s.root_id <= ? ORDER BY s.depth, s.created_at, s.id",
                span,
            )
        ]
        messages: dict[str, list[StoredMessage]] = {}
        for row in self.db.all(
            f"SELECT {M_COLUMNS} FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE s.root_id > ? AND s.root_id <= ? ORDER BY m.session_id, m.seq",
            span,
        ):
            messages.setdefault(str(row[0]), []).append(message_from(row))
        entries: dict[str, list[CompactionEntry]] = {}
        for row in self.db.all(
            f"SELECT {C_COLUMNS}, s.root_id FROM compactions c "
            "JOIN sessions s ON s.id = c.parent_id WHERE s.root_id > ? AND s.root_id <= ? "
            "ORDER BY c.created_at, c.id",
            span,
        ):
            entries.setdefault(str(row[9]), []).append(entry_from(row))
        by_root: dict[str, LineageExport] = {
            root: LineageExport.model_construct(
                root_id=root, sessions=[], messages={}, compactions=entries.get(root, [])
            )
            for root in roots
        }
        for root, session in sessions:
            if root in by_root:
                by_root[root].sessions.append(session)
                by_root[root].messages[session.id] = messages.get(session.id, [])
        return [by_root[root] for root in roots]

    # ------------------------------------------------------------------ import

    def import_lineages(self, lineages: Sequence[LineageExport]) -> CopyReport:
        """Lineages none of whose sessions are here go in by bulk inserts; the others one by
        one, merging with what is here (:meth:`import_lineage`)."""
        ordered = sorted((data for data in lineages if data.sessions), key=lambda d: d.root_id)
        ids = [session.id for data in ordered for session in data.sessions]
        here: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.db.all(
                f"SELECT id FROM sessions WHERE id IN ({', '.join('?' for _ in chunk)})", chunk
            )
            here.update(str(row[0]) for row in rows)
        new = [data for data in ordered if not any(s.id in here for s in data.sessions)]
        report = self._import_new(new)
        for data in ordered:
            if any(s.id in here for s in data.sessions):
                report = report + self.import_lineage(data)
        return report

    def _import_new(self, lineages: Sequence[LineageExport]) -> CopyReport:
        sessions: list[tuple[Any, ...]] = []
        messages: list[StoredMessage] = []
        heads: list[tuple[Any, ...]] = []
        entries: list[CompactionEntry] = []
        for data in lineages:
            depth: dict[str, int] = {}
            for session in data.sessions:  # parents first
                depth[session.id] = depth.get(session.parent_id or "", -1) + 1
                sessions.append(_exported_row(session, data.root_id, depth[session.id]))
                messages += data.messages.get(session.id, [])
            nodes = [
                Node(s.id, s.parent_id, (s.updated_at, s.created_at, s.id)) for s in data.sessions
            ]
            head = newest_leaf(nodes) or nodes[0]
            workspace = next(s.workspace for s in data.sessions if s.id == head.id)
            latest = max(s.updated_at for s in data.sessions)
            heads.append((data.root_id, head.id, latest, workspace, len(data.sessions)))
            entries += data.compactions
        if sessions:
            self.db.many(_INSERT_SESSION, sessions)
            self._insert_stored(messages)
            for data in lineages:
                self._index_stored(data.root_id, data.messages.values())
            self._insert_entries(entries)
            self.db.many(
                "INSERT INTO lineages (root_id, head_id, updated_at, workspace, sessions) "
                "VALUES (?, ?, ?, ?, ?)",
                heads,
            )
        return CopyReport.model_construct(
            lineages=len(lineages),
            sessions_copied=len(sessions),
            messages_copied=len(messages),
            compactions_copied=len(entries),
        )

    def import_lineage(self, data: LineageExport) -> CopyReport:
        """Store one exported lineage; what is already here is kept (see ``import_lineages``)."""
        if not data.sessions:
            return CopyReport.model_construct()
        self.lock_lineage(data.root_id)
        # A session id held by another lineage fails the insert below (primary key).
        present = {
            str(row[0]): (row[1], int(row[2]))
            for row in self.db.all(
                "SELECT id, parent_id, message_count FROM sessions WHERE root_id = ?",
                (data.root_id,),
            )
        }
        depth: dict[str, int] = {}
        sessions_copied = messages_copied = messages_present = 0
        for session in data.sessions:
            depth[session.id] = depth.get(session.parent_id or "", -1) + 1
            stored = data.messages.get(session.id, [])
            here = present.get(session.id)
            if here is None:
                self._insert_exported(session, data.root_id, depth[session.id])
                first = 0
                sessions_copied += 1
            else:
                parent_id, count = here
                if parent_id != session.parent_id:
                    raise StoreError(
                        f"cannot import session {session.id[:SHORT_LENGTH]}: {self.location} "
                        "holds it with another parent",
                        location=self.location,
                    )
                if count > len(stored):
                    raise StoreError(
                        f"cannot import session {session.id[:SHORT_LENGTH]}: {self.location} "
                        f"holds {count} messages of it, the import only {len(stored)}",
                        location=self.location,
                    )
                first = count
                messages_present += count
                self._refresh_exported(session)
            self._insert_stored(stored[first:])
            self._index_stored(data.root_id, [stored[first:]])
            messages_copied += len(stored) - first
        copied, kept = self._import_entries(data)
        self.rebuild_lineage(data.root_id)
        return CopyReport.model_construct(
            lineages=1,
            sessions_copied=sessions_copied,
            sessions_present=len(data.sessions) - sessions_copied,
            messages_copied=messages_copied,
            messages_present=messages_present,
            compactions_copied=copied,
            compactions_present=kept,
        )

    def _insert_exported(self, session: Session, root_id: str, depth: int) -> None:
        self.db.run(_INSERT_SESSION, _exported_row(session, root_id, depth))

    def _refresh_exported(self, session: Session) -> None:
        """The import's fields win where it is at least as new as what is here."""
        self.db.run(
            "UPDATE sessions SET updated_at = ?, title = ?, status = ?, message_count = ?, "
            "metadata = ? WHERE id = ? AND updated_at <= ?",
            (
                session.updated_at,
                session.title,
                session.status,
                session.message_count,
                dumps(session.metadata),
                session.id,
                session.updated_at,
            ),
        )

    def _insert_stored(self, messages: Sequence[StoredMessage]) -> None:
        if not messages:
            return
        self.db.many(
            "INSERT INTO messages (session_id, seq, role, content, token_estimate, usage, "
            "metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.session_id,
                    m.seq,
                    m.role,
                    dumps(m.content),
                    m.token_estimate,
                    dumps(m.usage) if m.usage is not None else None,
                    dumps(m.metadata),
                    m.created_at,
                )
                for m in messages
            ],
        )

    def _index_stored(self, root_id: str, groups: Iterable[Sequence[StoredMessage]]) -> None:
        rows = [(m.session_id, m.seq, m.content) for ms in groups for m in ms]
        index_messages(self.db, root_id, rows, stored=True)

    def _import_entries(self, data: LineageExport) -> tuple[int, int]:
        """Insert the entries the target lacks (matched as a multiset); (copied, present)."""
        here = Counter(_entry_key(entry) for entry in self.history(data.root_id))
        missing: list[CompactionEntry] = []
        for entry in data.compactions:
            key = _entry_key(entry)
            if here[key] > 0:
                here[key] -= 1
            else:
                missing.append(entry)
        self._insert_entries(missing)
        return len(missing), len(data.compactions) - len(missing)

    def _insert_entries(self, entries: Sequence[CompactionEntry]) -> None:
        if not entries:
            return
        self.db.many(
            f"INSERT INTO compactions ({COMPACTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    e.parent_id,
                    e.child_id,
                    e.created_at,
                    e.strategy,
                    e.messages_before,
                    e.messages_after,
                    e.tokens_before,
                    e.tokens_after,
                    e.summary,
                )
                for e in entries
            ],
        )


_INSERT_SESSION = (
    "INSERT INTO sessions (id, parent_id, root_id, depth, created_at, updated_at, model, "
    "title, workspace, status, message_count, metadata) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _exported_row(session: Session, root_id: str, depth: int) -> tuple[Any, ...]:
    return (
        session.id,
        session.parent_id,
        root_id,
        depth,
        session.created_at,
        session.updated_at,
        session.model,
        session.title,
        session.workspace,
        session.status,
        session.message_count,
        dumps(session.metadata),
    )
