"""The SQLite schema, built and upgraded by named migrations recorded in ``_migrations``.

A migration is applied once, inside the caller's write transaction, and its name recorded with
the time it ran. New migrations are appended to :data:`MIGRATIONS`; existing ones never change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

MIGRATIONS_TABLE = "_migrations"
APPLICATION_ID = 0x41474C50  # "AGLP": lets `file` and other tools recognize the store.

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


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
    return names
