"""The SQL both backends run, part two: creating, appending, updating, the transition, and the
upkeep of each lineage's row (its head, last activity and size) that every write does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ._checks import dumps, merge_metadata
from ._ids import SHORT_LENGTH, new_session_id
from ._sql_reads import (
    COMPACTION_COLUMNS,
    MESSAGE_COLUMNS,
    SqlReads,
    dt,
    lease_from,
    newest_leaf,
)
from ._sql_search import index_messages
from ._store_errors import SessionCompactedError, SessionLeasedError, SessionNotFoundError
from ._types import Lease, NewMessage, Session, SessionStatus, StoredMessage

_UPKEEP_COLUMNS = (
    "l.head_id, l.updated_at, h.updated_at, h.created_at, h.workspace, "
    "EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = h.id), "
    "t.created_at, t.workspace, EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = t.id)"
)
"""The lineage row and head, and the session ``t`` just written: what ``upkeep`` decides on."""


def leased_error(session_id: str, holder: Lease) -> SessionLeasedError:
    until = holder.expires_at.strftime("%Y-%m-%d %H:%M:%S")
    return SessionLeasedError(
        f"session {session_id[:SHORT_LENGTH]} is in use by {holder.owner} "
        f"(its lease runs until {until} UTC unless renewed)",
        session_id=session_id,
        owner=holder.owner,
        expires_at=holder.expires_at,
    )


class SqlWrites(SqlReads):
    """The writes of one open transaction (the caller resolved, and so locked, the lineage)."""

    # ------------------------------------------------------------------ leases, checked

    def check_lease(self, session_id: str, held: Lease | None, lease: Lease | None) -> None:
        """Refuse a write to ``session_id`` unless no live lease is held on it by another."""
        if held is None or (lease is not None and held.token == lease.token):
            return
        if held.expires_at <= self.now:
            return  # stale: its holder is gone
        raise leased_error(session_id, held)

    # ------------------------------------------------------------------ sessions

    def insert_session(
        self,
        *,
        session_id: str,
        parent_id: str | None,
        root_id: str,
        depth: int,
        model: str,
        workspace: str,
        title: str | None,
        metadata: Mapping[str, Any],
        message_count: int,
    ) -> None:
        self.db.run(
            "INSERT INTO sessions (id, parent_id, root_id, depth, created_at, updated_at, model, "
            "title, workspace, status, message_count, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
            (
                session_id,
                parent_id,
                root_id,
                depth,
                self.now,
                self.now,
                model,
                title,
                workspace,
                message_count,
                dumps(dict(metadata)),
            ),
        )

    def create_session(
        self,
        *,
        session_id: str | None,
        parent_ref: str | None,
        model: str,
        workspace: str,
        title: str | None,
        metadata: Mapping[str, Any],
    ) -> Session:
        parent = self.resolve(parent_ref) if parent_ref is not None else None
        if session_id is None:
            session_id = new_session_id(self.now)
        else:
            self.refuse_taken(session_id)
        if parent is None:
            root_id, depth = session_id, 0
        else:
            root_id, parent_depth = self.place(parent)
            depth = parent_depth + 1
        self.insert_session(
            session_id=session_id,
            parent_id=parent,
            root_id=root_id,
            depth=depth,
            model=model,
            workspace=workspace,
            title=title,
            metadata=metadata,
            message_count=0,
        )
        if parent is None:
            self.db.run(
                "INSERT INTO lineages (root_id, head_id, updated_at, workspace, sessions) "
                "VALUES (?, ?, ?, ?, 1)",
                (session_id, session_id, self.now, workspace),
            )
        else:
            self.upkeep(root_id, session_id, added=1)
        return self.get(session_id)

    def update(
        self,
        session: Session,
        *,
        title: str | None,
        status: SessionStatus,
        metadata: Mapping[str, Any],
    ) -> None:
        self.db.run(
            "UPDATE sessions SET title = ?, status = ?, metadata = ?, updated_at = ? WHERE id = ?",
            (title, status, dumps(dict(metadata)), self.now, session.id),
        )
        self.upkeep(self.root(session.id), session.id)

    # ------------------------------------------------------------------ messages

    def insert_messages(
        self,
        session_id: str,
        first_seq: int,
        messages: Sequence[NewMessage],
        *,
        root_id: str,
        returning: bool = True,
    ) -> list[StoredMessage]:
        """Insert ``messages`` from position ``first_seq`` (and index them for search, in the
        lineage of ``root_id``); the stored values when ``returning`` (a transition's child
        needs none)."""
        stored: list[StoredMessage] = []
        rows = []
        now = self.now.astimezone(UTC)
        for offset, message in enumerate(messages):
            created = now if message.created_at is None else message.created_at.astimezone(UTC)
            rows.append(
                (
                    session_id,
                    first_seq + offset,
                    message.role,
                    dumps(message.content),
                    message.token_estimate,
                    dumps(message.usage) if message.usage is not None else None,
                    dumps(message.metadata) if message.metadata else "{}",
                    created,
                )
            )
            if not returning:
                continue
            stored.append(
                StoredMessage.model_construct(
                    session_id=session_id,
                    seq=first_seq + offset,
                    role=message.role,
                    content=message.content,
                    token_estimate=message.token_estimate,
                    usage=message.usage,
                    metadata=message.metadata,
                    created_at=created,
                )
            )
        if rows:
            self.db.many(
                f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            index_messages(
                self.db,
                root_id,
                [(session_id, first_seq + n, m.content) for n, m in enumerate(messages)],
            )
        return stored

    def append(
        self, session_id: str, messages: Sequence[NewMessage], lease: Lease | None
    ) -> list[StoredMessage]:
        """Append after the last message; the count on the session row gives the next seq, so
        nothing here reads or counts the session's existing messages. One read gathers the
        session, its lease and its lineage row; then the inserts and two updates."""
        row = self.db.one(
            "SELECT t.status, t.message_count, t.root_id, "
            f"le.session_id, le.owner, le.token, le.expires_at, le.ttl, {_UPKEEP_COLUMNS} "
            "FROM sessions t LEFT JOIN leases le ON le.session_id = t.id "
            "LEFT JOIN lineages l ON l.root_id = t.root_id "
            "LEFT JOIN sessions h ON h.id = l.head_id WHERE t.id = ?",
            (session_id,),
        )
        if row is None:  # deleted since it was resolved (only without row locks)
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.location}", ref=session_id
            )
        status, count, root_id = row[0], int(row[1]), str(row[2])
        if status == "compacted":
            head = self.newest_descendant(session_id)
            raise SessionCompactedError(
                f"session {session_id[:SHORT_LENGTH]} was compacted and continues in "
                f"{head.id[:SHORT_LENGTH]}; append there instead",
                session_id=session_id,
                continue_in=head.id,
            )
        held = lease_from(row[3:8]) if row[3] is not None else None
        self.check_lease(session_id, held, lease or self.book.get(session_id))
        if not messages:
            return []
        stored = self.insert_messages(session_id, count, messages, root_id=root_id)
        self.db.run(
            "UPDATE sessions SET message_count = ?, updated_at = ? WHERE id = ?",
            (count + len(messages), self.now, session_id),
        )
        self.upkeep(root_id, session_id, state=row[8:] if row[8] is not None else None)
        return stored

    # ------------------------------------------------------------------ compactions

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
            self._move_lease(lease, held, child_id)
            token, child = lease.token, child_id
            self.on_commit.append(lambda: self.book.move(token, child))
        self.upkeep(root_id, child_id, added=1)
        return self.get(child_id)

    def _move_lease(self, lease: Lease, held: Lease | None, child_id: str) -> None:
        mine = held if held is not None and held.token == lease.token else lease
        self.db.run("DELETE FROM leases WHERE token = ?", (lease.token,))
        self.db.run(
            "INSERT INTO leases (session_id, owner, token, expires_at, ttl, acquired_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (child_id, mine.owner, mine.token, mine.expires_at, mine.ttl, self.now),
        )

    def record_unchanged(
        self,
        session: Session,
        *,
        strategy: str,
        message_count: int,
        tokens: int | None,
        summary: str | None,
        lease: Lease | None = None,
    ) -> None:
        """Record a compaction that created no child; it counts as activity on the session."""
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

    # ------------------------------------------------------------------ the lineage row

    def upkeep(
        self,
        root_id: str,
        touched: str,
        *,
        added: int = 0,
        state: Sequence[Any] | None = None,
    ) -> None:
        """Keep the lineage row true after ``touched`` was stamped ``now`` (written or added).

        The head stays the newest leaf: ``touched`` replaces it when it is a leaf with a newer
        key; the head is recomputed when it gained a child (a transition or fork from it).
        ``state``: the :data:`_UPKEEP_COLUMNS` read earlier in this transaction (they do not
        change with the write that follows), saving a query.
        """
        if state is None:
            state = self.db.one(
                f"SELECT {_UPKEEP_COLUMNS} FROM lineages l JOIN sessions h ON h.id = l.head_id "
                "JOIN sessions t ON t.id = ? WHERE l.root_id = ?",
                (touched, root_id),
            )
        if state is None:  # no lineage row (or its head is gone): rebuild it
            self.rebuild_lineage(root_id)
            return
        head_id, workspace = str(state[0]), str(state[4])
        head_key = (dt(state[2]), dt(state[3]), head_id)
        touched_key = (self.now, dt(state[6]), touched)
        if bool(state[5]):
            head_id, workspace = self._newest_leaf(root_id)
        elif not bool(state[8]) and touched_key > head_key:
            head_id, workspace = touched, str(state[7])
        updated = max(dt(state[1]), self.now)
        self.db.run(
            "UPDATE lineages SET head_id = ?, updated_at = ?, workspace = ?, "
            "sessions = sessions + ? WHERE root_id = ?",
            (head_id, updated, workspace, added, root_id),
        )

    def _newest_leaf(self, root_id: str) -> tuple[str, str]:
        newest = newest_leaf(self.nodes(root_id))
        head_id = newest.id if newest is not None else root_id
        row = self.db.one("SELECT workspace FROM sessions WHERE id = ?", (head_id,))
        assert row is not None
        return head_id, str(row[0])

    def rebuild_lineage(self, root_id: str) -> None:
        """Recompute the lineage row from the sessions (after an import or a deletion)."""
        row = self.db.one(
            "SELECT count(*), max(updated_at) FROM sessions WHERE root_id = ?", (root_id,)
        )
        self.db.run("DELETE FROM lineages WHERE root_id = ?", (root_id,))
        if row is None or not row[0]:
            return
        head_id, workspace = self._newest_leaf(root_id)
        self.db.run(
            "INSERT INTO lineages (root_id, head_id, updated_at, workspace, sessions) "
            "VALUES (?, ?, ?, ?, ?)",
            (root_id, head_id, dt(row[1]), workspace, int(row[0])),
        )


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
