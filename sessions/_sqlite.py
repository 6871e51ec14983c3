"""The default store: one SQLite file (stdlib ``sqlite3``, WAL mode), private to the user.

Durability: WAL with ``synchronous=FULL``, so a committed append survives a crash of the process
and of the machine. Every write is one short ``BEGIN IMMEDIATE`` transaction; readers never wait
for writers. The file itself (creation, checks, migrations, errors) is :mod:`sessions._sqlite_file`;
the SQL is :mod:`sessions._sqlite_queries`; the seed's ``compact`` is :mod:`sessions._compaction`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sessions import _compaction
from sessions._checks import as_new_message, dumps, merge_metadata, require_int, require_str
from sessions._compaction import CompactionStrategy
from sessions._errors import StoreError
from sessions._ids import new_session_id, validate_session_id, validate_session_ref
from sessions._paths import default_store_path
from sessions._sqlite_file import map_error, open_connection
from sessions._sqlite_queries import SqliteTransaction
from sessions._store import UNSET, _Unset
from sessions._types import (
    CompactionEntry,
    CompactionRecord,
    NewMessage,
    Session,
    SessionStatus,
    StoredMessage,
)

DEFAULT_BUSY_TIMEOUT = 5.0


class SqliteSessionStore:
    """:class:`SessionStore` on one SQLite file. Thread-safe; use one per process."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path).expanduser().absolute() if path is not None else default_store_path()
        self.busy_timeout = busy_timeout
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._conn = open_connection(self.path, busy_timeout)

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[SqliteTransaction]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"session store {self.path} is closed", path=self.path)
            try:
                # IMMEDIATE takes the write lock up front, so two writers queue on the busy
                # timeout instead of failing mid-transaction; DEFERRED gives readers a snapshot.
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield SqliteTransaction(conn, self.path, self._clock)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise map_error(error, self.path, self.busy_timeout) from None

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
            parent = tx.resolve(parent_id) if parent_id is not None else None
            if session_id is None:
                session_id = new_session_id(tx.now)
            else:
                tx.refuse_taken(session_id)
            tx.insert_session(
                session_id=session_id,
                parent_id=parent,
                model=model,
                workspace=workspace,
                title=title,
                metadata=metadata_json,
                message_count=0,
            )
            return tx.get(session_id)

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
        if limit is not None:
            require_int("limit", limit, minimum=0)
        require_int("offset", offset, minimum=0)
        with self._transaction(write=False) as tx:
            return tx.list_sessions(workspace, limit, offset)

    def count_sessions(self, *, workspace: str | None = None) -> int:
        """How many sessions (in ``workspace``, or in all)."""
        with self._transaction(write=False) as tx:
            return tx.count_sessions(workspace)

    # ------------------------------------------------------------------ messages

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage | Mapping[str, Any]]
    ) -> list[StoredMessage]:
        """Append ``messages`` after the session's last one, in one short transaction.

        The cost does not depend on the session's length: the next position and the count live
        on the session row. Appending to a session that a child already continues raises
        :class:`SessionCompactedError` naming the session to continue instead.
        """
        validate_session_ref(session_id)
        checked = [as_new_message(message) for message in messages]
        for message in checked:  # serialize before taking the write lock
            dumps(message.metadata)
        with self._transaction(write=True) as tx:
            return tx.append(tx.resolve(session_id), checked)

    def get_messages(self, session_id: str) -> list[StoredMessage]:
        """All messages of the session, in order."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.messages(tx.resolve(session_id))

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
    ) -> Session:
        """Continue ``parent_id`` in a new child, in ONE transaction.

        Creates the child (same model, workspace and title as the parent; metadata is the
        parent's merged with ``metadata``) holding ``messages``, marks the parent
        ``compacted`` and records a :class:`CompactionEntry`. The parent's messages are never
        touched. ``messages_before`` defaults to the parent's message count. Calling it on an
        already compacted parent forks a second child.
        """
        validate_session_ref(parent_id)
        require_str("strategy", strategy)
        if not strategy:
            raise ValueError("strategy must name the compaction strategy")
        if child_id is not None:
            child_id = validate_session_id(child_id)
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
            )

    def compact(
        self, session_id: str, strategy: CompactionStrategy, summary: str | None = None
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
        and the transition happen in one write transaction.
        """
        return _compaction.compact(
            partial(self._transaction, write=True), session_id, strategy, summary
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

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the connection (idempotent); further calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"


def open_store(
    path: str | Path | None = None,
    *,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    clock: Callable[[], datetime] | None = None,
) -> SqliteSessionStore:
    """Open (creating if needed) the store at ``path``, ``$AGENTLOOP_HOME/sessions.db`` or
    ``<user data dir>/sessions.db``: the directory is created 0700 and the files are 0600.

    Raises :class:`StoreCorruptError` (file left untouched) if the file is not a store.
    """
    return SqliteSessionStore(path, busy_timeout=busy_timeout, clock=clock)
