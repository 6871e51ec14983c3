"""The default store: one SQLite file (stdlib ``sqlite3``, WAL mode), private to the user.

Durability: WAL with ``synchronous=FULL``, so a committed append survives a crash of the process
and of the machine. Every write is one short ``BEGIN IMMEDIATE`` transaction; readers never wait
for writers. A file that is not an agentloop store is refused before SQLite may write to it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sessions import _migrations
from sessions._compaction import (
    CompactionStrategy,
    has_pending_tool_use,
    sliding_window_start,
    total_tokens,
)
from sessions._errors import (
    AmbiguousSessionIdError,
    CompactionError,
    InvalidSessionIdError,
    SessionCompactedError,
    SessionError,
    SessionNotFoundError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
)
from sessions._ids import (
    ID_LENGTH,
    SHORT_LENGTH,
    new_session_id,
    validate_session_id,
    validate_session_ref,
)
from sessions._paths import FILE_MODE, default_store_path, ensure_private_dir
from sessions._store import UNSET, _Unset
from sessions._types import (
    CompactionEntry,
    CompactionRecord,
    NewMessage,
    Session,
    SessionStatus,
    StoredMessage,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
DEFAULT_BUSY_TIMEOUT = 5.0
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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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


def _check_header(path: Path) -> None:
    """Refuse, without opening it with SQLite, a file that cannot be an intact SQLite database."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        size = path.stat().st_size
    except OSError as error:
        raise StoreError(f"cannot read session store {path}: {error.strerror}", path=path) from None
    problem = None
    if not header:
        problem = "the file is empty"
    elif not header.startswith(SQLITE_MAGIC):
        problem = "the file is not a SQLite database"
    elif len(header) < 100:
        problem = "the SQLite header is truncated"
    else:
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if (
            page_size < 512
            or page_size & (page_size - 1)
            or header[18] not in (1, 2)
            or header[19] not in (1, 2)
            or header[21:24] != b"\x40\x20\x20"
        ):
            problem = "the SQLite header is damaged"
        elif size % page_size:
            problem = "the file is truncated"
    if problem:
        raise StoreCorruptError(
            f"{path} is not a valid agentloop session store ({problem}); "
            "it was left untouched — move it away or pass another store path",
            path=path,
        )


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def _temporary_name(path: Path) -> str:
    return f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def _remove_stale_temporaries(path: Path) -> None:
    """Remove what a creator killed mid-way left behind (its process is gone)."""
    try:
        candidates = list(path.parent.glob(f".{path.name}.*.tmp*"))
    except OSError:
        return
    for candidate in candidates:
        parts = candidate.name[len(path.name) + 2 :].split(".")
        if not parts[0].isdigit() or int(parts[0]) == os.getpid():
            continue
        try:
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            with suppress(OSError):
                candidate.unlink()
        except OSError:
            continue  # alive under another user, or unknowable: leave it


def _create_store(path: Path) -> None:
    """Build a complete store beside ``path`` and link it into place.

    The store appears at ``path`` only once fully initialized, so a crash during creation never
    leaves a half-made file behind (and an empty file is never mistaken for a store).
    """
    temporary = path.with_name(_temporary_name(path))
    descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    os.close(descriptor)
    os.chmod(temporary, FILE_MODE)  # the umask may have narrowed it; never let it widen.
    try:
        conn = sqlite3.connect(str(temporary), isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            _migrations.apply_pending(conn)
            conn.execute("COMMIT")
        finally:
            conn.close()
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created the store first: use theirs.
        except OSError:
            # No hard links on this file system: a rename could replace a store created in
            # the meantime, so only rename onto a path that is still free.
            if not path.exists():
                os.replace(temporary, path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(FileNotFoundError):
                os.unlink(f"{temporary}{suffix}")


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
        self._conn = self._open()

    # ------------------------------------------------------------------ opening

    def _open(self) -> sqlite3.Connection:
        path = self.path
        try:
            if path.exists() or path.is_symlink():
                if not path.is_file():
                    raise StoreCorruptError(
                        f"{path} is not a valid agentloop session store (not a regular file)",
                        path=path,
                    )
                _check_header(path)
            else:
                ensure_private_dir(path.parent)
                _create_store(path)
            _remove_stale_temporaries(path)
        except OSError as error:
            raise StoreError(
                f"cannot create session store {path}: {error.strerror or error}", path=path
            ) from None
        sidecars = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
        existed = [sidecar.exists() for sidecar in sidecars]
        conn: sqlite3.Connection | None = None
        try:
            conn = _connect(path, self.busy_timeout)
            self._prepare(conn)
        except (sqlite3.Error, SessionError) as error:
            if conn is not None:
                conn.close()
            mapped = error if isinstance(error, SessionError) else self._map_error(error)
            if isinstance(mapped, StoreCorruptError):
                # Connecting may have created empty WAL/SHM files beside a foreign file.
                for sidecar, was_there in zip(sidecars, existed, strict=True):
                    if not was_there:
                        with suppress(OSError):
                            sidecar.unlink()
            raise mapped from None
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if tables and _migrations.MIGRATIONS_TABLE not in tables:
            raise StoreCorruptError(
                f"{self.path} is a SQLite database but not an agentloop session store; "
                "it was left untouched — pass another store path",
                path=self.path,
            )
        if tables and not _migrations.pending_migrations(conn):
            return  # the common case: nothing to write.
        if not tables:
            # An empty SQLite file becomes a store: make it as private as one created here.
            os.chmod(self.path, FILE_MODE)
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            _migrations.apply_pending(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------------ plumbing

    def _map_error(self, error: sqlite3.Error) -> SessionError:
        text = str(error)
        lowered = text.lower()
        if isinstance(error, sqlite3.OperationalError) and (
            "locked" in lowered or "busy" in lowered
        ):
            return StoreBusyError(
                f"session store {self.path} is busy: another process kept it locked for more "
                f"than {self.busy_timeout:g}s; try again",
                path=self.path,
            )
        if isinstance(error, sqlite3.ProgrammingError) and "closed" in lowered:
            return StoreError(f"session store {self.path} is closed", path=self.path)
        if isinstance(error, sqlite3.OperationalError | sqlite3.IntegrityError):
            return StoreError(f"session store {self.path}: {text}", path=self.path)
        return StoreCorruptError(
            f"{self.path} is not a valid agentloop session store ({text}); "
            "it was left untouched — move it away or pass another store path",
            path=self.path,
        )

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"session store {self.path} is closed", path=self.path)
            try:
                # IMMEDIATE takes the write lock up front, so two writers queue on the busy
                # timeout instead of failing mid-transaction; DEFERRED gives readers a snapshot.
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise self._map_error(error) from None

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    def _resolve(self, conn: sqlite3.Connection, ref: str) -> str:
        normalized = validate_session_ref(ref)
        if len(normalized) == ID_LENGTH:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (normalized,)).fetchone():
                return normalized
            raise SessionNotFoundError(f"no session {ref!r} in {self.path}", ref=ref)
        # A range scan on the primary key: '~' sorts after every id character.
        rows = conn.execute(
            "SELECT id FROM sessions WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            (normalized, normalized + "~", _CANDIDATES_SHOWN + 1),
        ).fetchall()
        if not rows:
            raise SessionNotFoundError(f"no session matches {ref!r} in {self.path}", ref=ref)
        if len(rows) == 1:
            return str(rows[0][0])
        ids = [str(row[0]) for row in rows[:_CANDIDATES_SHOWN]]
        shown = _distinct_prefixes(ids)
        more = ", ..." if len(rows) > _CANDIDATES_SHOWN else ""
        raise AmbiguousSessionIdError(
            f"session id prefix {ref!r} is ambiguous; it matches {', '.join(shown)}{more}",
            ref=ref,
            candidates=ids,
        )

    def _get(self, conn: sqlite3.Connection, session_id: str) -> Session:
        row = conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.path}", ref=session_id)
        return _session(row)

    def _descendants(self, conn: sqlite3.Connection, session_id: str) -> list[Session]:
        rows = conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_S_COLUMNS} FROM sessions s JOIN down ON s.id = down.id
            """,
            (session_id,),
        ).fetchall()
        return [_session(row) for row in rows]

    def _ancestors(self, conn: sqlite3.Connection, session_id: str) -> list[Session]:
        rows = conn.execute(
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

    def _newest_descendant(self, conn: sqlite3.Connection, session_id: str) -> Session:
        row = conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_S_COLUMNS} FROM sessions s JOIN down ON s.id = down.id
            WHERE NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = s.id)
            ORDER BY s.updated_at DESC, s.created_at DESC, s.id DESC LIMIT 1
            """,
            (session_id,),
        ).fetchone()
        if row is None:  # only reachable through a cycle in a hand-edited store
            return self._get(conn, session_id)
        return _session(row)

    def _root(self, conn: sqlite3.Connection, session_id: str) -> str:
        ancestors = self._ancestors(conn, session_id)
        return ancestors[-1].id if ancestors else session_id

    def _lineage(self, conn: sqlite3.Connection, session_id: str) -> list[Session]:
        return self._descendants(conn, self._root(conn, session_id))

    def _history(self, conn: sqlite3.Connection, session_id: str) -> list[CompactionEntry]:
        rows = conn.execute(
            f"""
            {_DESCENDANTS}
            SELECT {_COMPACTION_COLUMNS} FROM compactions
            WHERE parent_id IN (SELECT id FROM down) ORDER BY created_at, id
            """,
            (self._root(conn, session_id),),
        ).fetchall()
        return [_entry(row) for row in rows]

    def _insert_messages(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        first_seq: int,
        messages: Sequence[NewMessage],
        now: datetime,
    ) -> list[StoredMessage]:
        stored: list[StoredMessage] = []
        rows = []
        for offset, message in enumerate(messages):
            created = message.created_at or now
            rows.append(
                (
                    session_id,
                    first_seq + offset,
                    message.role,
                    _dumps(message.content),
                    message.token_estimate,
                    _dumps(message.usage) if message.usage is not None else None,
                    _dumps(message.metadata),
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
        conn.executemany(
            f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )
        return stored

    def _insert_session(
        self,
        conn: sqlite3.Connection,
        *,
        session_id: str,
        parent_id: str | None,
        model: str,
        workspace: str,
        title: str | None,
        metadata: Mapping[str, Any],
        message_count: int,
        now: datetime,
    ) -> None:
        conn.execute(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
            (
                session_id,
                parent_id,
                _ts(now),
                _ts(now),
                model,
                title,
                workspace,
                message_count,
                _dumps(dict(metadata)),
            ),
        )

    def _transition(
        self,
        conn: sqlite3.Connection,
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
        now: datetime,
    ) -> Session:
        if child_id is None:
            child_id = new_session_id(now)
        elif conn.execute("SELECT 1 FROM sessions WHERE id = ?", (child_id,)).fetchone():
            raise InvalidSessionIdError(
                f"cannot create session {child_id}: the id is taken", ref=child_id
            )
        child_metadata = _merge(parent.metadata, metadata or {})
        self._insert_session(
            conn,
            session_id=child_id,
            parent_id=parent.id,
            model=parent.model,
            workspace=parent.workspace,
            title=parent.title,
            metadata=child_metadata,
            message_count=len(messages),
            now=now,
        )
        self._insert_messages(conn, child_id, 0, messages, now)
        conn.execute(
            "UPDATE sessions SET status = 'compacted', updated_at = ? WHERE id = ?",
            (_ts(now), parent.id),
        )
        conn.execute(
            f"INSERT INTO compactions ({_COMPACTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                parent.id,
                child_id,
                _ts(now),
                strategy,
                parent.message_count if messages_before is None else messages_before,
                len(messages),
                tokens_before,
                tokens_after,
                summary,
            ),
        )
        return self._get(conn, child_id)

    def _record(self, conn: sqlite3.Connection, session_id: str) -> CompactionRecord:
        history = self._history(conn, session_id)
        head = self._newest_descendant(conn, session_id)
        summaries = [entry.summary for entry in history if entry.summary is not None]
        return CompactionRecord.model_construct(
            compaction_count=len(history),
            last_compacted_at=max((e.created_at for e in history), default=None),
            summary=summaries[-1] if summaries else None,
            session_id=head.id,
            message_count=head.message_count,
        )

    # ------------------------------------------------------------------ public API

    def create_session(
        self,
        *,
        model: str,
        workspace: str,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create an active session; ``parent_id`` makes it a child (a fork) of that session."""
        _require_str("model", model)
        _require_str("workspace", workspace)
        if title is not None:
            _require_str("title", title)
        metadata_json = dict(metadata or {})
        _dumps(metadata_json)  # fail before the transaction if it is not JSON
        if parent_id is not None:
            validate_session_ref(parent_id)
        with self._transaction(write=True) as conn:
            now = self._now()
            parent = self._resolve(conn, parent_id) if parent_id is not None else None
            session_id = new_session_id(now)
            self._insert_session(
                conn,
                session_id=session_id,
                parent_id=parent,
                model=model,
                workspace=workspace,
                title=title,
                metadata=metadata_json,
                message_count=0,
                now=now,
            )
            return self._get(conn, session_id)

    def get_session(self, session_id: str) -> Session:
        """The session with this id or unique prefix (>= 4 characters)."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            return self._get(conn, self._resolve(conn, session_id))

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the one session matching ``id_or_prefix``."""
        validate_session_ref(id_or_prefix)
        with self._transaction(write=False) as conn:
            return self._resolve(conn, id_or_prefix)

    def append_messages(
        self, session_id: str, messages: Sequence[NewMessage | Mapping[str, Any]]
    ) -> list[StoredMessage]:
        """Append ``messages`` after the session's last one, in one short transaction.

        The cost does not depend on the session's length: the next position and the count live
        on the session row. Appending to a session that a child already continues raises
        :class:`SessionCompactedError` naming the session to continue instead.
        """
        validate_session_ref(session_id)
        checked = [_as_new(message) for message in messages]
        for message in checked:  # serialize before taking the write lock
            _dumps(message.metadata)
        with self._transaction(write=True) as conn:
            sid = self._resolve(conn, session_id)
            status, count = conn.execute(
                "SELECT status, message_count FROM sessions WHERE id = ?", (sid,)
            ).fetchone()
            if status == "compacted":
                head = self._newest_descendant(conn, sid)
                raise SessionCompactedError(
                    f"session {sid[:SHORT_LENGTH]} was compacted and continues in "
                    f"{head.id[:SHORT_LENGTH]}; append there instead",
                    session_id=sid,
                    continue_in=head.id,
                )
            if not checked:
                return []
            now = self._now()
            stored = self._insert_messages(conn, sid, count, checked, now)
            conn.execute(
                "UPDATE sessions SET message_count = ?, updated_at = ? WHERE id = ?",
                (count + len(checked), _ts(now), sid),
            )
            return stored

    def get_messages(self, session_id: str) -> list[StoredMessage]:
        """All messages of the session, in order."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                (sid,),
            ).fetchall()
        return [_stored(row) for row in rows]

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
            _require_str("title", title)
        if not isinstance(status, _Unset) and status not in ("active", "compacted"):
            raise ValueError(f"status must be 'active' or 'compacted', not {status!r}")
        with self._transaction(write=True) as conn:
            sid = self._resolve(conn, session_id)
            current = self._get(conn, sid)
            new_title = current.title if isinstance(title, _Unset) else title
            new_status = current.status if isinstance(status, _Unset) else status
            new_metadata = (
                current.metadata
                if isinstance(metadata, _Unset)
                else _merge(current.metadata, metadata)
            )
            conn.execute(
                "UPDATE sessions SET title = ?, status = ?, metadata = ?, updated_at = ? "
                "WHERE id = ?",
                (new_title, new_status, _dumps(new_metadata), _ts(self._now()), sid),
            )
            return self._get(conn, sid)

    def list_sessions(
        self, *, workspace: str | None = None, limit: int | None = 50, offset: int = 0
    ) -> list[Session]:
        """Sessions, most recently updated first (then most recently created); ``limit=None``
        for all of them."""
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0 or None")
        if offset < 0:
            raise ValueError("offset must be >= 0")
        where = "WHERE workspace = ?" if workspace is not None else ""
        params: tuple[Any, ...] = (workspace,) if workspace is not None else ()
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions {where} {_NEWEST_FIRST} LIMIT ? OFFSET ?",
                (*params, -1 if limit is None else limit, offset),
            ).fetchall()
        return [_session(row) for row in rows]

    def count_sessions(self, *, workspace: str | None = None) -> int:
        """How many sessions (in ``workspace``, or in all)."""
        with self._transaction(write=False) as conn:
            if workspace is None:
                row = conn.execute("SELECT count(*) FROM sessions").fetchone()
            else:
                row = conn.execute(
                    "SELECT count(*) FROM sessions WHERE workspace = ?", (workspace,)
                ).fetchone()
        return int(row[0])

    def children(self, session_id: str) -> list[Session]:
        """Direct children, oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            sid = self._resolve(conn, session_id)
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE parent_id = ? "
                "ORDER BY created_at, id",
                (sid,),
            ).fetchall()
        return [_session(row) for row in rows]

    def ancestors(self, session_id: str) -> list[Session]:
        """Parent, grandparent, ... up to the root: nearest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            return self._ancestors(conn, self._resolve(conn, session_id))

    def newest_descendant(self, session_id: str) -> Session:
        """Where resuming ``session_id`` continues.

        Among the session and all its descendants that have no children (the leaves), the one
        updated most recently (ties: created most recently, then the greater id). A session
        without children is its own newest descendant. In a plain compaction chain this is the
        last child.
        """
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            return self._newest_descendant(conn, self._resolve(conn, session_id))

    def lineage(self, session_id: str) -> list[Session]:
        """The root of the session's lineage and all its descendants, depth-first: each parent
        before its children, siblings oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            sessions = self._lineage(conn, self._resolve(conn, session_id))
        return _depth_first(sessions)

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
        _require_str("strategy", strategy)
        if not strategy:
            raise ValueError("strategy must name the compaction strategy")
        if child_id is not None:
            child_id = validate_session_id(child_id)
        checked = [_as_new(message) for message in messages]
        with self._transaction(write=True) as conn:
            now = self._now()
            parent = self._get(conn, self._resolve(conn, parent_id))
            return self._transition(
                conn,
                parent,
                messages=checked,
                strategy=strategy,
                messages_before=messages_before,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summary=summary,
                metadata=metadata,
                child_id=child_id,
                now=now,
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
        (if given) and leaves the parent's messages readable.
        """
        if not isinstance(strategy, CompactionStrategy):
            raise CompactionError(
                f"strategy must be a CompactionStrategy, not {type(strategy).__name__}"
            )
        if summary is not None:
            _require_str("summary", summary)
        if strategy.kind == "summarize" and not (summary and summary.strip()):
            raise CompactionError(
                "the summarize strategy needs a summary: compact(session_id, "
                "CompactionStrategy.SUMMARIZE, summary='...')"
            )
        validate_session_ref(session_id)
        with self._transaction(write=True) as conn:
            now = self._now()
            sid = self._resolve(conn, session_id)
            head = self._newest_descendant(conn, sid)
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                (head.id,),
            ).fetchall()
            stored = [_stored(row) for row in rows]
            tokens_before = total_tokens(stored)
            if strategy.kind == "none":
                conn.execute(
                    f"INSERT INTO compactions ({_COMPACTION_COLUMNS}) "
                    "VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        head.id,
                        _ts(now),
                        str(strategy),
                        len(stored),
                        len(stored),
                        tokens_before,
                        tokens_before,
                        summary,
                    ),
                )
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (_ts(now), head.id))
                return self._record(conn, sid)
            if strategy.kind == "sliding_window":
                assert strategy.max_messages is not None
                start = sliding_window_start(stored, strategy.max_messages)
                if stored and start == len(stored):
                    raise CompactionError(
                        f"cannot keep the last {strategy.max_messages} messages of session "
                        f"{head.id[:SHORT_LENGTH]}: no user message without tool_result starts "
                        "a clean window; use a larger window or summarize"
                    )
                kept = [message.to_new() for message in stored[start:]]
                tokens_after = total_tokens(stored[start:])
            else:
                if has_pending_tool_use(stored):
                    raise CompactionError(
                        f"cannot summarize session {head.id[:SHORT_LENGTH]} now: its last "
                        "tool_use still awaits its tool_result"
                    )
                assert summary is not None
                kept = [
                    NewMessage(
                        role="user",
                        content=[{"type": "text", "text": summary}],
                        metadata={"kind": "summary"},
                    )
                ]
                tokens_after = None
            self._transition(
                conn,
                head,
                messages=kept,
                strategy=str(strategy),
                messages_before=len(stored),
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summary=summary,
                metadata=None,
                child_id=None,
                now=now,
            )
            return self._record(conn, sid)

    def get_compaction_record(self, session_id: str) -> CompactionRecord:
        """Compaction state across the whole lineage of ``session_id``; ``session_id`` and
        ``message_count`` of the record describe its newest descendant."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            return self._record(conn, self._resolve(conn, session_id))

    def compaction_history(self, session_id: str) -> list[CompactionEntry]:
        """Every compaction recorded in the session's lineage, oldest first."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as conn:
            return self._history(conn, self._resolve(conn, session_id))

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


def _as_new(message: NewMessage | Mapping[str, Any]) -> NewMessage:
    if isinstance(message, NewMessage):
        return message
    return NewMessage.model_validate(message)


def _require_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")


def _merge(current: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(current)
    for key, value in update.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    _dumps(merged)
    return merged


def _distinct_prefixes(ids: Sequence[str]) -> list[str]:
    """The shortest prefixes (at least the UI's 8 characters) that tell ``ids`` apart."""
    for length in range(SHORT_LENGTH, ID_LENGTH + 1):
        if len({i[:length] for i in ids}) == len(ids):
            return [i[:length] for i in ids]
    return list(ids)


def _depth_first(sessions: Sequence[Session]) -> list[Session]:
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
