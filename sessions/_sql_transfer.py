"""Moving lineages between stores, for both SQL backends: exporting whole lineages (sessions,
messages, compaction entries) from one snapshot, and importing them as they are (ids, times,
statuses), merging with what the target holds already. :func:`sessions.copy_store` moves a
store this way.

:class:`SqlTransfer` is the transaction's part, :class:`TransferMethods` the store's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ._checks import dumps, require_int
from ._ids import SHORT_LENGTH
from ._sql_db import C_COLUMNS, COMPACTION_COLUMNS, M_COLUMNS, S_COLUMNS, SqlStoreBase
from ._sql_lineage import Node, newest_leaf, session_from
from ._sql_messages import message_from
from ._sql_search import index_messages
from ._sql_transitions import SqlTransitions, entry_from
from ._store_errors import StoreError
from ._types import CompactionEntry, CopyReport, LineageExport, Session, StoredMessage


def _entry_key(entry: CompactionEntry) -> tuple[Any, ...]:
    return (
        entry.parent_id,
        entry.child_id,
        entry.created_at,
        entry.strategy,
        entry.messages_before,
        entry.messages_after,
    )


class SqlTransfer(SqlTransitions):
    """The exports and imports of one open transaction."""

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
        here = Counter(_entry_key(entry) for entry in self.compaction_history(data.root_id))
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


class TransferMethods(SqlStoreBase[SqlTransfer]):
    """The store's calls that move lineages in and out."""

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
