"""Sessions and their lineage, for both SQL backends: finding a session (an id or a prefix;
in a write transaction, finding it locks its lineage), reading, creating and updating one,
walking the lineage (children, ancestors, newest descendant), and the upkeep of each lineage's
row (its head, last activity and size) that every write does.

:class:`SqlLineage` is the transaction's part, :class:`LineageMethods` the store's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._checks import dumps, merge_metadata, require_str
from ._ids import (
    ID_LENGTH,
    SHORT_LENGTH,
    new_session_id,
    validate_session_id,
    validate_session_ref,
)
from ._protocol import UNSET, _Unset
from ._sql_db import SESSION_COLUMNS, SqlStoreBase, SqlTransactionBase, dt
from ._store_errors import (
    AmbiguousSessionIdError,
    InvalidSessionIdError,
    SessionNotFoundError,
)

if TYPE_CHECKING:
    from ._types import Session, SessionStatus

_CANDIDATES_SHOWN = 5

Key = tuple[datetime, datetime, str]
"""How leaves compete to be the newest descendant: updated, then created, then id."""

UPKEEP_COLUMNS = (
    "l.head_id, l.updated_at, h.updated_at, h.created_at, h.workspace, "
    "EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = h.id), "
    "t.created_at, t.workspace, EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = t.id)"
)
"""The lineage row and head, and the session ``t`` just written: what ``upkeep`` decides on."""


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


class SqlLineage(SqlTransactionBase):
    """Sessions and lineages in one open transaction.

    In a write transaction, :meth:`resolve` also locks the lineage of the session it finds
    (with row locks): every write then holds its lineage until it ends, and since a write
    transaction locks one lineage only (or several in root id order), writers never deadlock.
    """

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

    # ------------------------------------------------------------------ one session

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

    def root(self, session_id: str) -> str:
        return self.place(session_id)[0]

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
        model: str | None = None,
    ) -> None:
        self.db.run(
            "UPDATE sessions SET title = ?, status = ?, metadata = ?, model = ?, updated_at = ? "
            "WHERE id = ?",
            (title, status, dumps(dict(metadata)), model or session.model, self.now, session.id),
        )
        self.upkeep(self.root(session.id), session.id)

    # ------------------------------------------------------------------ walks

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

    def lineage(self, session_id: str) -> list[Session]:
        return depth_first(self.lineage_rows(self.root(session_id)))

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
        ``state``: the :data:`UPKEEP_COLUMNS` read earlier in this transaction (they do not
        change with the write that follows), saving a query.
        """
        if state is None:
            state = self.db.one(
                f"SELECT {UPKEEP_COLUMNS} FROM lineages l JOIN sessions h ON h.id = l.head_id "
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


class LineageMethods(SqlStoreBase[SqlLineage]):
    """The store's calls on sessions and their lineage."""

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
        model: str | _Unset = UNSET,
    ) -> Session:
        """Change the given fields. ``metadata`` is merged into the existing mapping (top level;
        a key set to None is removed); ``model`` is the model the session now runs on."""
        validate_session_ref(session_id)
        if not isinstance(model, _Unset):
            require_str("model", model)
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
                model=None if isinstance(model, _Unset) else model,
            )
            return tx.get(current.id)

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
