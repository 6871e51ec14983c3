"""The SQL both backends run, part one: the seam to a connection, ids and prefixes, reads.

SQLite and PostgreSQL run the same statements (written with ``?`` placeholders; a backend's
:class:`Db` translates them) over the same tables. Where the two differ (row locks, "no
limit"), the :class:`Dialect` says so. Timestamps go in as ``datetime`` and come back as text
(SQLite) or ``datetime`` (PostgreSQL); :func:`dt` reads either. JSON is stored as text in both,
so content round-trips byte for byte.

Every lineage has one row in ``lineages`` (root id, head = newest descendant, last activity,
the head's workspace, session count), and every session row carries its ``root_id`` and
``depth``: lineage walks are one indexed query, listing by conversation reads one row per
lineage, and a write transaction locks its lineage by locking that one row.

The store values are pydantic models, imported when one is first built: the listing
(:mod:`sessions._sql_listing`) reads through this module without loading pydantic.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ._ids import ID_LENGTH, SHORT_LENGTH, validate_session_ref
from ._store_errors import (
    AmbiguousSessionIdError,
    InvalidSessionIdError,
    SessionNotFoundError,
)

if TYPE_CHECKING:
    from ._types import CompactionEntry, Lease, Session, StoredMessage

_CANDIDATES_SHOWN = 5

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

Key = tuple[datetime, datetime, str]
"""How leaves compete to be the newest descendant: updated, then created, then id."""


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


def session_from(row: Sequence[Any]) -> Session:
    """A session row (:data:`SESSION_COLUMNS`) as a :class:`Session`."""
    from ._types import Session

    # Rows were validated on the way in; constructing without re-validation keeps reads cheap.
    return Session.model_construct(
        id=row[0],
        parent_id=row[1],
        created_at=dt(row[2]),
        updated_at=dt(row[3]),
        model=row[4],
        title=row[5],
        workspace=row[6],
        status=row[7],
        message_count=row[8],
        metadata=json.loads(row[9]),
    )


def message_from(row: Sequence[Any]) -> StoredMessage:
    from ._types import StoredMessage

    return StoredMessage.model_construct(
        session_id=row[0],
        seq=row[1],
        role=row[2],
        content=json.loads(row[3]),
        token_estimate=row[4],
        usage=json.loads(row[5]) if row[5] is not None else None,
        metadata=json.loads(row[6]),
        created_at=dt(row[7]),
    )


def entry_from(row: Sequence[Any]) -> CompactionEntry:
    from ._types import CompactionEntry

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


def lease_from(row: Sequence[Any]) -> Lease:
    """(session_id, owner, token, expires_at, ttl)"""
    from ._types import Lease

    return Lease.model_construct(
        session_id=row[0], owner=row[1], token=row[2], expires_at=dt(row[3]), ttl=float(row[4])
    )


@dataclass(frozen=True, slots=True)
class Node:
    """A session's place in its lineage, without its payload."""

    id: str
    parent_id: str | None
    key: Key


def subtree(nodes: Sequence[Node], top: str) -> list[Node]:
    """``top`` and every node below it (``nodes`` is one whole lineage)."""
    below: dict[str | None, list[Node]] = {}
    for node in nodes:
        below.setdefault(node.parent_id, []).append(node)
    found = [node for node in nodes if node.id == top]
    seen = {top}
    index = 0
    while index < len(found):
        for child in below.get(found[index].id, []):
            if child.id not in seen:  # a hand-edited cycle must not loop forever
                seen.add(child.id)
                found.append(child)
        index += 1
    return found


def newest_leaf(nodes: Sequence[Node]) -> Node | None:
    """Among ``nodes`` without a child in ``nodes``, the one with the greatest key."""
    parents = {node.parent_id for node in nodes}
    leaves = [node for node in nodes if node.id not in parents]
    return max(leaves, key=lambda node: node.key, default=None)


class LeaseBook:
    """The leases one store handle acquired, by session: the handle writes under them when a
    call passes no lease (so a process that holds a session need not thread its lease
    through every call). Updated only after commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: dict[str, Lease] = {}

    def get(self, session_id: str) -> Lease | None:
        with self._lock:
            return self._by_session.get(session_id)

    def put(self, lease: Lease) -> None:
        with self._lock:
            self._drop(lease.token)
            self._by_session[lease.session_id] = lease

    def refresh(self, lease: Lease) -> None:
        """``lease`` renewed: kept if this handle holds it."""
        with self._lock:
            if any(held.token == lease.token for held in self._by_session.values()):
                self._drop(lease.token)
                self._by_session[lease.session_id] = lease

    def forget(self, token: str) -> None:
        with self._lock:
            self._drop(token)

    def move(self, token: str, session_id: str) -> None:
        """A transition moved the lease ``token`` to ``session_id`` (if this handle has it)."""
        with self._lock:
            mine = [lease for lease in self._by_session.values() if lease.token == token]
            self._drop(token)
            for lease in mine:
                self._by_session[session_id] = lease.model_copy(update={"session_id": session_id})

    def _drop(self, token: str) -> None:
        for session_id in [s for s, lease in self._by_session.items() if lease.token == token]:
            del self._by_session[session_id]


class SqlReads:
    """One open transaction: ids, prefixes and every read. ``now`` is read once, on first use.

    In a write transaction, :meth:`resolve` also locks the lineage of the session it finds
    (with row locks): every write then holds its lineage until it ends, and since a write
    transaction locks one lineage only (or several in root id order), writers never deadlock.
    """

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

    # ------------------------------------------------------------------ ids

    def resolve(self, ref: str) -> str:
        """The full id of the one session matching ``ref`` (an id or unique prefix); in a
        write transaction its lineage is locked from here on."""
        normalized = validate_session_ref(ref)
        locking = self.write and self.db.dialect.row_locks
        if len(normalized) == ID_LENGTH:
            session_id = normalized
            if not locking and not self.exists(session_id):  # (locking checks it anyway)
                raise SessionNotFoundError(f"no session {ref!r} in {self.location}", ref=ref)
        else:
            session_id = self._resolve_prefix(ref, normalized)
        if locking:
            self.lock_lineage_of(session_id, ref)
        return session_id

    def _resolve_prefix(self, ref: str, prefix: str) -> str:
        # A range scan on the primary key: '~' sorts after every id character.
        rows = self.db.all(
            "SELECT id FROM sessions WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            (prefix, prefix + "~", _CANDIDATES_SHOWN + 1),
        )
        if not rows:
            raise SessionNotFoundError(f"no session matches {ref!r} in {self.location}", ref=ref)
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

    def lock_lineage_of(self, session_id: str, ref: str | None = None) -> str:
        """Lock the lineage row of ``session_id`` (waits for the lineage's current writer);
        its root. Every statement after it sees what that writer committed (READ COMMITTED),
        so a session it deleted is found missing by the caller's next read of it."""
        row = self.db.one(
            "SELECT l.root_id FROM lineages l JOIN sessions s ON s.root_id = l.root_id "
            f"WHERE s.id = ?{self.db.dialect.lock_of('l')}",
            (session_id,),
        )
        if row is None:
            shown = ref if ref is not None else session_id
            raise SessionNotFoundError(f"no session {shown!r} in {self.location}", ref=shown)
        return str(row[0])

    def lock_lineage(self, root_id: str) -> bool:
        """Lock the lineage rooted at ``root_id``; False if there is none."""
        row = self.db.one(
            f"SELECT l.root_id FROM lineages l WHERE l.root_id = ?{self.db.dialect.lock_of('l')}",
            (root_id,),
        )
        return row is not None

    def exists(self, session_id: str) -> bool:
        return self.db.one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is not None

    def refuse_taken(self, session_id: str) -> None:
        if self.exists(session_id):
            raise InvalidSessionIdError(
                f"cannot create session {session_id}: the id is taken", ref=session_id
            )

    # ------------------------------------------------------------------ reads

    def get(self, session_id: str) -> Session:
        row = self.db.one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.location}", ref=session_id
            )
        return session_from(row)

    def place(self, session_id: str) -> tuple[str, int]:
        """The session's root id and depth."""
        row = self.db.one("SELECT root_id, depth FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.location}", ref=session_id
            )
        return str(row[0]), int(row[1])

    def messages(self, session_id: str) -> list[StoredMessage]:
        rows = self.db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [message_from(row) for row in rows]

    # ------------------------------------------------------------------ lineage

    def children(self, session_id: str) -> list[Session]:
        rows = self.db.all(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_id = ? ORDER BY created_at, id",
            (session_id,),
        )
        return [session_from(row) for row in rows]

    def nodes(self, root_id: str) -> list[Node]:
        rows = self.db.all(
            "SELECT id, parent_id, updated_at, created_at FROM sessions WHERE root_id = ?",
            (root_id,),
        )
        return [Node(row[0], row[1], (dt(row[2]), dt(row[3]), row[0])) for row in rows]

    def lineage_rows(self, root_id: str) -> list[Session]:
        rows = self.db.all(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE root_id = ?", (root_id,))
        return [session_from(row) for row in rows]

    def descendants(self, session_id: str) -> list[Session]:
        """The session and all its descendants (in no particular order)."""
        root_id, _ = self.place(session_id)
        sessions = self.lineage_rows(root_id)
        by_id = {session.id: session for session in sessions}
        nodes = [Node(s.id, s.parent_id, (s.updated_at, s.created_at, s.id)) for s in sessions]
        return [by_id[node.id] for node in subtree(nodes, session_id)]

    def ancestors(self, session_id: str) -> list[Session]:
        root_id, _ = self.place(session_id)
        by_id = {session.id: session for session in self.lineage_rows(root_id)}
        found: list[Session] = []
        parent = by_id[session_id].parent_id
        while parent is not None and parent in by_id and len(found) < len(by_id):
            found.append(by_id[parent])
            parent = by_id[parent].parent_id
        return found

    def newest_descendant(self, session_id: str) -> Session:
        row = self.db.one(
            "SELECT s.root_id, l.head_id FROM sessions s "
            "JOIN lineages l ON l.root_id = s.root_id WHERE s.id = ?",
            (session_id,),
        )
        if row is None:
            return self.get(session_id)  # raises: no such session
        root_id, head_id = str(row[0]), str(row[1])
        if session_id == root_id:
            return self.get(head_id)  # the lineage row keeps the root's newest descendant
        newest = newest_leaf(subtree(self.nodes(root_id), session_id))
        return self.get(newest.id if newest is not None else session_id)

    def root(self, session_id: str) -> str:
        return self.place(session_id)[0]

    def lineage(self, session_id: str) -> list[Session]:
        return depth_first(self.lineage_rows(self.root(session_id)))

    def history(self, session_id: str) -> list[CompactionEntry]:
        rows = self.db.all(
            f"SELECT {C_COLUMNS} FROM compactions c JOIN sessions s ON s.id = c.parent_id "
            "WHERE s.root_id = ? ORDER BY c.created_at, c.id",
            (self.root(session_id),),
        )
        return [entry_from(row) for row in rows]

    def lease_row(self, session_id: str) -> Lease | None:
        """The session's lease as stored, live or expired."""
        row = self.db.one(
            "SELECT session_id, owner, token, expires_at, ttl FROM leases WHERE session_id = ?",
            (session_id,),
        )
        return lease_from(row) if row is not None else None


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
