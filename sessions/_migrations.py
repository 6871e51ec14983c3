"""The SQLite schema, built and upgraded by named migrations recorded in ``_migrations``.

A migration is applied once, inside the caller's write transaction, and its name recorded with
the time it ran; ``PRAGMA user_version`` then holds how many migrations the schema has. New
migrations are appended to :data:`MIGRATIONS`; existing ones never change.

A store whose schema is newer than this code (a greater ``user_version``, or a migration name
this code does not know) is never written: it may only be opened read-only. A store whose schema
is older is upgraded when opened for writing; opened read-only, the migrations' read-only
shims (:data:`READ_ONLY_SHIMS`) build in the connection's TEMP schema what the queries need, and
nothing is written. A new migration that changes what the queries read adds its shim.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

MIGRATIONS_TABLE = "_migrations"
APPLICATION_ID = 0x41474C50  # "AGLP": lets `file` and other tools recognize the store.

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []
READ_ONLY_SHIMS: dict[str, Migration] = {}


def migration(function: Migration) -> Migration:
    MIGRATIONS.append((function.__name__, function))
    return function


def _run(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the caller's transaction; run statement by statement instead.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY NOT NULL,
            parent_id TEXT REFERENCES sessions(id),
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            model TEXT NOT NULL,
            title TEXT,
            workspace TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'compacted')),
            message_count INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        -- `sessions list` (per workspace and across all), newest first, without sorting.
        CREATE INDEX sessions_by_workspace
            ON sessions (workspace, updated_at, created_at, id);
        CREATE INDEX sessions_by_updated ON sessions (updated_at, created_at, id);
        -- Lineage walks go from parent to children.
        CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at);

        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL,
            token_estimate INTEGER,
            usage TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            UNIQUE (session_id, seq)
        );

        CREATE TABLE compactions (
            id INTEGER PRIMARY KEY,
            parent_id TEXT NOT NULL REFERENCES sessions(id),
            child_id TEXT UNIQUE REFERENCES sessions(id),
            created_at TEXT NOT NULL,
            strategy TEXT NOT NULL,
            messages_before INTEGER NOT NULL,
            messages_after INTEGER NOT NULL,
            tokens_before INTEGER,
            tokens_after INTEGER,
            summary TEXT
        );
        CREATE INDEX compactions_by_parent ON compactions (parent_id, created_at)
        """,
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


LINEAGE_TABLES = """
    CREATE TABLE {schema}lineages (
        root_id TEXT PRIMARY KEY NOT NULL,
        head_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        workspace TEXT NOT NULL,
        sessions INTEGER NOT NULL
    );
    -- `sessions list` by conversation (per workspace and across all), newest first.
    CREATE INDEX {schema}lineages_by_updated ON lineages (updated_at, root_id);
    CREATE INDEX {schema}lineages_by_workspace ON lineages (workspace, updated_at, root_id);
    CREATE TABLE {schema}leases (
        session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions(id),
        owner TEXT NOT NULL,
        token TEXT NOT NULL UNIQUE,
        expires_at TEXT NOT NULL,
        ttl REAL NOT NULL,
        acquired_at TEXT NOT NULL
    )
"""


@migration
def m002_lineages_and_leases(conn: sqlite3.Connection) -> None:
    """Each session row gets its lineage's root and its depth; each lineage a row (head, last
    activity, size); sessions get leases (one writer per session)."""
    _run(
        conn,
        "ALTER TABLE sessions ADD COLUMN root_id TEXT;"
        "ALTER TABLE sessions ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;"
        + LINEAGE_TABLES.format(schema=""),
    )
    backfill_lineages(conn, "main")
    conn.execute("CREATE INDEX sessions_by_root ON sessions (root_id)")


def _m002_read_only(conn: sqlite3.Connection) -> None:
    # TEMP tables shadow main's of the same name for unqualified queries.
    conn.execute(
        "CREATE TEMP TABLE sessions AS SELECT *, NULL AS root_id, 0 AS depth FROM main.sessions"
    )
    _run(
        conn,
        """
        CREATE UNIQUE INDEX temp.t_sessions_id ON sessions (id);
        CREATE INDEX temp.t_sessions_by_parent ON sessions (parent_id, created_at);
        CREATE INDEX temp.t_sessions_by_updated ON sessions (updated_at, created_at, id);
        CREATE INDEX temp.t_sessions_by_workspace
            ON sessions (workspace, updated_at, created_at, id)
        """,
    )
    _run(conn, LINEAGE_TABLES.replace("REFERENCES sessions(id)", "").format(schema="temp."))
    backfill_lineages(conn, "temp")
    conn.execute("CREATE INDEX temp.t_sessions_by_root ON sessions (root_id)")


READ_ONLY_SHIMS["m002_lineages_and_leases"] = _m002_read_only


def backfill_lineages(conn: sqlite3.Connection, schema: str) -> None:
    """Fill ``root_id``/``depth`` and the lineage rows of sessions written before them."""
    rows = conn.execute(
        f"SELECT id, parent_id, updated_at, created_at, workspace FROM {schema}.sessions"
    ).fetchall()
    parent = {row[0]: row[1] for row in rows}
    place: dict[str, tuple[str, int]] = {}
    for session_id in parent:
        path = [session_id]
        # Walk up to a known place or the root; a hand-edited cycle ends the walk too.
        while (up := parent[path[-1]]) is not None and up in parent and up not in place:
            if up in path:
                break
            path.append(up)
        top = path[-1]
        up = parent[top]
        root, depth = place[up] if up is not None and up in place else (top, -1)
        for offset, member in enumerate(reversed(path)):
            place[member] = (root, depth + 1 + offset)
    conn.executemany(
        f"UPDATE {schema}.sessions SET root_id = ?, depth = ? WHERE id = ?",
        [(root, depth, session_id) for session_id, (root, depth) in place.items()],
    )
    parents = {row[1] for row in rows}
    lineages: dict[str, list[tuple[str, str, str, str]]] = {}
    newest: dict[str, str] = {}
    for session_id, _, updated, created, workspace in rows:
        root = place[session_id][0]
        lineages.setdefault(root, []).append((updated, created, session_id, workspace))
        newest[root] = max(newest.get(root, updated), updated)
    values = []
    for root, members in lineages.items():
        leaves = [member for member in members if member[2] not in parents] or members
        head = max(leaves)
        values.append((root, head[2], newest[root], head[3], len(members)))
    conn.executemany(
        f"INSERT INTO {schema}.lineages (root_id, head_id, updated_at, workspace, sessions) "
        "VALUES (?, ?, ?, ?, ?)",
        values,
    )


@migration
def m003_search_index(conn: sqlite3.Connection) -> None:
    """Full-text search over messages (:mod:`sessions._sql_search`): an FTS5 table whose rowid
    is the message's, emptied of a message by a trigger whenever the message is deleted, and
    filled with every message already stored."""
    from ._sql_search import SQLITE_SEARCH, backfill

    conn.execute(
        "CREATE VIRTUAL TABLE message_search USING fts5"
        "(body, root, tokenize = 'unicode61 remove_diacritics 0')"
    )
    conn.execute(
        "CREATE TRIGGER messages_unindex AFTER DELETE ON messages "
        "BEGIN DELETE FROM message_search WHERE rowid = old.id; END"
    )
    backfill(lambda sql, params: conn.execute(sql, params).fetchall(), conn.execute, SQLITE_SEARCH)


# Read-only, nothing else reads the index; a search says it needs the upgrade.
READ_ONLY_SHIMS["m003_search_index"] = lambda conn: None


@migration
def m004_search_in_batches(conn: sqlite3.Connection) -> None:
    """The index written in batches (:func:`sessions._sql_search.catch_up`): the id of the
    newest message indexed (every one so far: the index was written with them), lowered by a
    trigger when the newest messages are deleted, so that an id SQLite reuses is indexed."""
    newest = "coalesce((SELECT max(id) FROM messages), 0)"
    conn.execute("CREATE TABLE search_state (upto INTEGER NOT NULL)")
    conn.execute(f"INSERT INTO search_state (upto) SELECT {newest}")
    conn.execute(
        "CREATE TRIGGER messages_search_upto AFTER DELETE ON messages "
        f"WHEN old.id > {newest} BEGIN "
        f"UPDATE search_state SET upto = {newest} WHERE upto > {newest}; END"
    )


def _m004_read_only(conn: sqlite3.Connection) -> None:
    # Written by a version that indexed every message with its append: none waits.
    conn.execute(
        "CREATE TEMP TABLE search_state AS "
        "SELECT coalesce((SELECT max(id) FROM main.messages), 0) AS upto"
    )


READ_ONLY_SHIMS["m004_search_in_batches"] = _m004_read_only


def ensure_migrations_table(conn: sqlite3.Connection) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
        "(name TEXT PRIMARY KEY NOT NULL, applied_at TEXT NOT NULL)"
    )


def applied_migrations(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")}


def pending_migrations(conn: sqlite3.Connection) -> list[tuple[str, Migration]]:
    done = applied_migrations(conn)
    return [(name, function) for name, function in MIGRATIONS if name not in done]


def newer_schema(conn: sqlite3.Connection) -> str | None:
    """Why the schema is newer than this code (None: it is not)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    unknown = sorted(applied_migrations(conn) - {name for name, _ in MIGRATIONS})
    if version > len(MIGRATIONS):
        return f"schema version {version}; this version of agentloop knows {len(MIGRATIONS)}"
    if unknown:
        return f"unknown migration {unknown[0]}"
    return None


def apply_pending(conn: sqlite3.Connection) -> list[str]:
    """Apply what is missing; the caller holds a write transaction. Returns the names applied."""
    ensure_migrations_table(conn)
    names = []
    for name, function in pending_migrations(conn):
        function(conn)
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
            (name, datetime.now(UTC).isoformat(timespec="microseconds")),
        )
        names.append(name)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
    return names


def shim_pending(conn: sqlite3.Connection) -> str | None:
    """Read-only: make an older schema readable in TEMP; the first migration without a shim
    (None: every pending migration was shimmed)."""
    for name, _ in pending_migrations(conn):
        shim = READ_ONLY_SHIMS.get(name)
        if shim is None:
            return name
        shim(conn)
    return None
