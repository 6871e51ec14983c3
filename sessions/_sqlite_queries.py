"""The SQLite store's queries: ids and prefixes, lineage walks, messages, the transition.

A :class:`SqliteTransaction` is one open transaction on the store's connection. The store runs
every public call through one, and the seed compaction layer (:mod:`sessions._compaction`) runs
in one as its :class:`~sessions._compaction.LineageTransaction`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessions._checks import dumps, merge_metadata
from sessions._errors import (
    AmbiguousSessionIdError,
    InvalidSessionIdError,
    SessionCompactedError,
    SessionNotFoundError,
)
from sessions._ids import ID_LENGTH, SHORT_LENGTH, new_session_id, validate_session_ref
from sessions._types import CompactionEntry, NewMessage, Session, SessionStatus, StoredMessage

_CANDIDATES_SHOWN = 5
_MAX_DEPTH = 100_000  # guards lineage walks against a hand-edited cycle
# The session itself and every descendant, as a CTE named ``down`` (one ``?``: the session id).
_DESCENDANTS = f"""WITH RECURSIVE down(id, depth) AS (
                SELECT ?, 0
                UNION
                SELECT s.id, down.depth + 1 FROM sessions s JOIN down ON s.parent_id = down.id
                WHERE down.depth < {_MAX_DEPTH}
            )"""

_SESSION_COLUMNS = (
    "id, parent_id, created_at, updated_at, model, title, workspace, status, message_count, "
    "metadata"
)
_S_COLUMNS = ", ".join(f"s.{c.strip()}" for c in _SESSION_COLUMNS.split(","))
_MESSAGE_COLUMNS = "session_id, seq, role, content, token_estimate, usage, metadata, created_at"
_COMPACTION_COLUMNS = (
    "parent_id, child_id, created_at, strategy, messages_before, messages_after, "
    "tokens_before, tokens_after, summary"
)
_NEWEST_FIRST = "ORDER BY updated_at DESC, created_at DESC, id DESC"


def _ts(moment: datetime) -> str:
    # Fixed width, always UTC: the text sorts like the time.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _dt(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _session(row: Sequence[Any]) -> Session:
    # Rows were validated on the way in; constructing without re-validation keeps `list` cheap.
    return Session.model_construct(
        id=row[0],
        parent_id=row[1],
        created_at=_dt(row[2]),
        updated_at=_dt(row[3]),
        model=row[4],
        title=row[5],
        workspace=row[6],
        status=row[7],
        message_count=row[8],
        metadata=json.loads(row[9]),
    )


def _stored(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage.model_construct(
        session_id=row[0],
        seq=row[1],
        role=row[2],
        content=json.loads(row[3]),
        token_estimate=row[4],
        usage=json.loads(row[5]) if row[5] is not None else None,
        metadata=json.loads(row[6]),
        created_at=_dt(row[7]),
    )


def _entry(row: Sequence[Any]) -> CompactionEntry:
    return CompactionEntry.model_construct(
        parent_id=row[0],
        child_id=row[1],
        created_at=_dt(row[2]),
        strategy=row[3],
        messages_before=row[4],
        messages_after=row[5],
        tokens_before=row[6],
        tokens_after=row[7],
        summary=row[8],
    )


class SqliteTransaction:
    """The queries of one open transaction; ``now`` is read from the clock once, on first use."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Callable[[], datetime]) -> None:
        self.conn = conn
        self._path = path
        self._clock = clock
        self._now: datetime | None = None

    @property
    def now(self) -> datetime:
        if self._now is None:
            self._now = self._clock().astimezone(UTC)
        return self._now

    # ------------------------------------------------------------------ ids

    def resolve(self, ref: str) -> str:
        """The full id of the one session matching ``ref`` (an id or unique prefix)."""
        normalized = validate_session_ref(ref)
        if len(normalized) == ID_LENGTH:
            if self.exists(normalized):
                return normalized
            raise SessionNotFoundError(f"no session {ref!r} in {self._path}", ref=ref)
        # A range scan on the primary key: '~' sorts after every id character.
        rows = self.conn.execute(
            "SELECT id FROM sessions WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            (normalized, normalized + "~", _CANDIDATES_SHOWN + 1),
        ).fetchall()
        if not rows:
            raise SessionNotFoundError(f"no session matches {ref!r} in {self._path}", ref=ref)
        if len(rows) == 1:
            return str(rows[0][0])
        ids = [str(row[0]) for row in rows[:_CANDIDATES_SHOWN]]
        shown = distinct_prefixes(ids)
        more = ", ..." if len(rows) > _CANDIDATES_SHOWN else ""
        raise AmbiguousSessionIdError(
            f"session id prefix {ref!r} is ambiguous; it matches {', '.join(shown)}{more}",
            ref=ref,
            candidates=ids,
        )

    def exists(self, session_id: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def refuse_taken(self, session_id: str) -> None:
        if self.exists(session_id):
            raise InvalidSessionIdError(
                f"cannot create session {session_id}: the id is taken", ref=session_id
            )

    # ------------------------------------------------------------------ reads

    def get(self, session_id: str) -> Session:
        row = self.conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in {self._path}", ref=session_id)
        return _session(row)

    def messages(self, session_id: str) -> list[StoredMessage]:
        rows = self.conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        return [_stored(row) for row in rows]

    def list_sessions(self, workspace: str | None, limit: int | None, offset: int) -> list[Session]:
        where = "WHERE workspace = ?" if workspace is not None else ""
        params: tuple[Any, ...] = (workspace,) if workspace is not None else ()
        rows = self.conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions {where} {_NEWEST_FIRST} LIMIT ? OFFSET ?",
            (*params, -1 if limit is None else limit, offset),
        ).fetchall()
        return [_session(row) for row in rows]

    def count_sessions(self, workspace: str | None) -> int:
        if workspace is None:
            row = self.conn.execute("SELECT count(*) FROM sessions").fetchone()
        else:
            row = self.conn.execute(
                "SELECT count(*) FROM sessions WHERE workspace = ?", (workspace,)
            ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ lineage

    def children(self, session_id: str) -> list[Session]:
        rows = self.conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE parent_id = ? ORDER BY created_at, id",
            (session_id,),
        ).fetchall()
        return [_session(row) for row in rows]

    def descendants(self, session_id: str) -> list[Session]:
        rows = self.conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_S_COLUMNS} FROM sessions s JOIN down ON s.id = down.id
            """,
            (session_id,),
        ).fetchall()
        return [_session(row) for row in rows]

    def ancestors(self, session_id: str) -> list[Session]:
        rows = self.conn.execute(
            f"""
            WITH RECURSIVE up(id, depth) AS (
                SELECT parent_id, 1 FROM sessions WHERE id = ?
                UNION
                SELECT s.parent_id, up.depth + 1 FROM sessions s JOIN up ON s.id = up.id
                WHERE up.depth < {_MAX_DEPTH}
            )
            SELECT {_S_COLUMNS} FROM sessions s JOIN up ON s.id = up.id ORDER BY up.depth
            """,
            (session_id,),
        ).fetchall()
        return [_session(row) for row in rows]

    def newest_descendant(self, session_id: str) -> Session:
        row = self.conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_S_COLUMNS} FROM sessions s JOIN down ON s.id = down.id
            WHERE NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = s.id)
            ORDER BY s.updated_at DESC, s.created_at DESC, s.id DESC LIMIT 1
            """,
            (session_id,),
        ).fetchone()
        if row is None:  # only reachable through a cycle in a hand-edited store
            return self.get(session_id)
        return _session(row)

    def root(self, session_id: str) -> str:
        ancestors = self.ancestors(session_id)
        return ancestors[-1].id if ancestors else session_id

    def lineage(self, session_id: str) -> list[Session]:
        return depth_first(self.descendants(self.root(session_id)))

    def history(self, session_id: str) -> list[CompactionEntry]:
        rows = self.conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_COMPACTION_COLUMNS} FROM compactions
            WHERE parent_id IN (SELECT id FROM down) ORDER BY created_at, id
            """,
            (self.root(session_id),),
        ).fetchall()
        return [_entry(row) for row in rows]

    # ------------------------------------------------------------------ writes

    def insert_session(
        self,
        *,
        session_id: str,
        parent_id: str | None,
        model: str,
        workspace: str,
        title: str | None,
        metadata: Mapping[str, Any],
        message_count: int,
    ) -> None:
        now = _ts(self.now)
        self.conn.execute(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
            (
                session_id,
                parent_id,
                now,
                now,
                model,
                title,
                workspace,
                message_count,
                dumps(dict(metadata)),
            ),
        )

    def insert_messages(
        self, session_id: str, first_seq: int, messages: Sequence[NewMessage]
    ) -> list[StoredMessage]:
        stored: list[StoredMessage] = []
        rows = []
        for offset, message in enumerate(messages):
            created = message.created_at or self.now
            rows.append(
                (
                    session_id,
                    first_seq + offset,
                    message.role,
                    dumps(message.content),
                    message.token_estimate,
                    dumps(message.usage) if message.usage is not None else None,
                    dumps(message.metadata),
                    _ts(created),
                )
            )
            stored.append(
                StoredMessage.model_construct(
                    session_id=session_id,
                    seq=first_seq + offset,
                    role=message.role,
                    content=message.content,
                    token_estimate=message.token_estimate,
                    usage=message.usage,
                    metadata=message.metadata,
                    created_at=created.astimezone(UTC),
                )
            )
        self.conn.executemany(
            f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )
        return stored

    def append(self, session_id: str, messages: Sequence[NewMessage]) -> list[StoredMessage]:
        """Append after the last message; the count on the session row gives the next seq."""
        status, count = self.conn.execute(
            "SELECT status, message_count FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if status == "compacted":
            head = self.newest_descendant(session_id)
            raise SessionCompactedError(
                f"session {session_id[:SHORT_LENGTH]} was compacted and continues in "
                f"{head.id[:SHORT_LENGTH]}; append there instead",
                session_id=session_id,
                continue_in=head.id,
            )
        if not messages:
            return []
        stored = self.insert_messages(session_id, count, messages)
        self.conn.execute(
            "UPDATE sessions SET message_count = ?, updated_at = ? WHERE id = ?",
            (count + len(messages), _ts(self.now), session_id),
        )
        return stored

    def update(
        self,
        session: Session,
        *,
        title: str | None,
        status: SessionStatus,
        metadata: Mapping[str, Any],
    ) -> None:
        self.conn.execute(
            "UPDATE sessions SET title = ?, status = ?, metadata = ?, updated_at = ? WHERE id = ?",
            (title, status, dumps(dict(metadata)), _ts(self.now), session.id),
        )

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
        self.conn.execute(
            f"INSERT INTO compactions ({_COMPACTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                parent_id,
                child_id,
                _ts(self.now),
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
    ) -> Session:
        """The one transition primitive: child created, parent compacted, entry recorded."""
        if child_id is None:
            child_id = new_session_id(self.now)
        else:
            self.refuse_taken(child_id)
        self.insert_session(
            session_id=child_id,
            parent_id=parent.id,
            model=parent.model,
            workspace=parent.workspace,
            title=parent.title,
            metadata=merge_metadata(parent.metadata, metadata or {}),
            message_count=len(messages),
        )
        self.insert_messages(child_id, 0, messages)
        self.conn.execute(
            "UPDATE sessions SET status = 'compacted', updated_at = ? WHERE id = ?",
            (_ts(self.now), parent.id),
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
        return self.get(child_id)

    def record_unchanged(
        self,
        session: Session,
        *,
        strategy: str,
        message_count: int,
        tokens: int | None,
        summary: str | None,
    ) -> None:
        """Record a compaction that created no child; it counts as activity on the session."""
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
        self.conn.execute(
            "UPDATE sessions SET updated_at = ? WHERE id = ?", (_ts(self.now), session.id)
        )


def distinct_prefixes(ids: Sequence[str]) -> list[str]:
    """The shortest prefixes (at least the UI's 8 characters) that tell ``ids`` apart."""
    for length in range(SHORT_LENGTH, ID_LENGTH + 1):
        if len({i[:length] for i in ids}) == len(ids):
            return [i[:length] for i in ids]
    return list(ids)


def depth_first(sessions: Sequence[Session]) -> list[Session]:
    """Each parent before its children, siblings oldest first."""
    by_parent: dict[str | None, list[Session]] = {}
    ids = {s.id for s in sessions}
    roots = []
    for session in sessions:
        if session.parent_id is None or session.parent_id not in ids:
            roots.append(session)
        else:
            by_parent.setdefault(session.parent_id, []).append(session)
    ordered: list[Session] = []
    seen: set[str] = set()
    stack = sorted(roots, key=lambda s: (s.created_at, s.id), reverse=True)
    while stack:
        session = stack.pop()
        if session.id in seen:
            continue
        seen.add(session.id)
        ordered.append(session)
        kids = sorted(by_parent.get(session.id, []), key=lambda s: (s.created_at, s.id))
        stack.extend(reversed(kids))
    return ordered
