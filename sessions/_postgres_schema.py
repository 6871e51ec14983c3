"""The PostgreSQL store's location and schema: URL options, named migrations, refusing a foreign
or newer schema, and one-line errors for a server that does not answer.

The store lives in one schema of the database (default ``agentloop``; ``?schema=name`` in the
URL chooses another), recorded by the ``agentloop_migrations`` table like SQLite's
``_migrations``. A schema that holds tables but not that one is foreign and left untouched.
Opening for writing creates the schema if missing (under an advisory lock, so that two first
openers do not race); opening read-only never creates anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from ._sql_search import POSTGRES_SEARCH, backfill
from ._store_errors import (
    StoreConnectionError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
)

DEFAULT_SCHEMA = "agentloop"
MIGRATIONS_TABLE = "agentloop_migrations"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_M001 = """
CREATE TABLE sessions (
    id text COLLATE "C" PRIMARY KEY,
    parent_id text COLLATE "C" REFERENCES sessions (id),
    root_id text COLLATE "C" NOT NULL,
    depth integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    model text NOT NULL,
    title text,
    workspace text NOT NULL,
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'compacted')),
    message_count integer NOT NULL DEFAULT 0,
    metadata text NOT NULL DEFAULT '{}'
);
CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at, created_at, id);
CREATE INDEX sessions_by_updated ON sessions (updated_at, created_at, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at);
CREATE INDEX sessions_by_root ON sessions (root_id);

CREATE TABLE messages (
    session_id text COLLATE "C" NOT NULL REFERENCES sessions (id),
    seq integer NOT NULL,
    role text NOT NULL CHECK (role IN ('user', 'assistant')),
    content text NOT NULL,
    token_estimate integer,
    usage text,
    metadata text NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE compactions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_id text COLLATE "C" NOT NULL REFERENCES sessions (id),
    child_id text COLLATE "C" UNIQUE REFERENCES sessions (id),
    created_at timestamptz NOT NULL,
    strategy text NOT NULL,
    messages_before integer NOT NULL,
    messages_after integer NOT NULL,
    tokens_before integer,
    tokens_after integer,
    summary text
);
CREATE INDEX compactions_by_parent ON compactions (parent_id, created_at);

CREATE TABLE lineages (
    root_id text COLLATE "C" PRIMARY KEY,
    head_id text COLLATE "C" NOT NULL,
    updated_at timestamptz NOT NULL,
    workspace text NOT NULL,
    sessions integer NOT NULL
);
CREATE INDEX lineages_by_updated ON lineages (updated_at, root_id);
CREATE INDEX lineages_by_workspace ON lineages (workspace, updated_at, root_id);

CREATE TABLE leases (
    session_id text COLLATE "C" PRIMARY KEY REFERENCES sessions (id),
    owner text NOT NULL,
    token text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,
    ttl double precision NOT NULL,
    acquired_at timestamptz NOT NULL
)
"""

_M002 = """
CREATE TABLE message_search (
    session_id text COLLATE "C" NOT NULL,
    seq integer NOT NULL,
    root_id text COLLATE "C" NOT NULL,
    terms tsvector NOT NULL,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, seq) REFERENCES messages (session_id, seq) ON DELETE CASCADE
);
CREATE INDEX message_search_terms ON message_search USING gin (terms)
"""


def _m002_search_index(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Full-text search over messages (:mod:`sessions._sql_search`), filled with every message
    already stored; a deleted message takes its row with it (the foreign key cascades)."""
    _script(conn, _M002)
    backfill(
        lambda statement, params: conn.execute(_placeholders(statement), params).fetchall(),
        lambda statement, params: conn.execute(_placeholders(statement), params),
        POSTGRES_SEARCH,
    )


_M003 = """
CREATE TABLE search_waiting (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL,
    first_seq integer NOT NULL,
    last_seq integer NOT NULL
)
"""
"""Messages waiting for the search index (:func:`sessions._sql_search.catch_up`): a row per
append. No foreign key and no index but the key (oldest first; a table that logical replication
publishes needs one), so that queueing is one small insert; a batch takes rows ``FOR UPDATE
SKIP LOCKED``. Empty when created: every message of an older store was indexed with its
append."""


def _placeholders(statement: str) -> sql.SQL:
    return sql.SQL(statement.replace("%", "%%").replace("?", "%s"))


Migration = str | Callable[[psycopg.Connection[tuple[object, ...]]], None]
MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial", _M001),
    ("m002_search_index", _m002_search_index),
    ("m003_search_queue", _M003),
]
"""Name -> SQL (or a function running it), applied in order; new ones are appended, existing
ones never change."""
READ_COMPATIBLE = frozenset({"m002_search_index", "m003_search_queue"})
"""Migrations a read-only open may do without: nothing but a search reads what they add (and a
search on a store without them says it needs the upgrade)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a PostgreSQL store is: libpq's URL (our options removed), schema, pool size."""

    conninfo: str
    schema: str
    pool_size: int
    display: str
    """The URL as messages show it: no password, no other query parameters."""


def parse_url(url: str) -> Target:
    """Split ``url`` into libpq's part and this store's options (``schema``, ``pool_size``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in ("schema", "pool_size")}
    rest = [(key, value) for key, value in query if key not in ours]
    schema = ours.get("schema", DEFAULT_SCHEMA)
    if not _IDENTIFIER.fullmatch(schema):
        raise StoreError(
            f"invalid schema {schema!r} in the store URL: use lowercase letters, digits and _"
        )
    try:
        pool_size = int(ours.get("pool_size", "1"))
    except ValueError:
        pool_size = 0
    if not 1 <= pool_size <= 1000:
        raise StoreError(f"invalid pool_size {ours['pool_size']!r} in the store URL")
    user, _, hostport = parts.netloc.rpartition("@")
    user = user.partition(":")[0]
    shown = f"{parts.scheme}://{user + '@' if user else ''}{hostport}{parts.path}"
    if schema != DEFAULT_SCHEMA:
        shown += f"?schema={schema}"
    return Target(
        conninfo=urlunsplit(parts._replace(query=urlencode(rest))),
        schema=schema,
        pool_size=pool_size,
        display=shown,
    )


def first_line(error: BaseException) -> str:
    """The part of a server or libpq message worth one line."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = text.rpartition(" failed: ")[2] if " failed: " in text else text
    return text.removeprefix("FATAL:").strip().removeprefix("connection failed:").strip()


def connect_error(error: psycopg.Error, display: str) -> StoreConnectionError:
    """The one line a user sees when connecting fails (no password: ``display`` has none)."""
    reason = first_line(error)
    lowered = reason.lower()
    if "password" in lowered or "authentication" in lowered or "role" in lowered:
        return StoreConnectionError(
            f"PostgreSQL at {display} refused the credentials: {reason}", location=display
        )
    if "refused" in lowered:
        reason += " (is the server running?)"
    return StoreConnectionError(f"cannot connect to {display}: {reason}", location=display)


def _tables(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> set[str] | None:
    """The schema's tables; None if the schema does not exist."""
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
        return None
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
    return {str(row[0]) for row in rows.fetchall()}


def _applied(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
    query = sql.SQL("SELECT name FROM {}.{} ORDER BY name").format(
        sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
    )
    return [str(row[0]) for row in conn.execute(query).fetchall()]


def _newer(applied: list[str]) -> str | None:
    unknown = sorted(set(applied) - {name for name, _ in MIGRATIONS})
    return f"unknown migration {unknown[0]}" if unknown else None


def _refuse_foreign(tables: set[str] | None, target: Target) -> None:
    if tables and MIGRATIONS_TABLE not in tables:
        raise StoreCorruptError(
            f"schema {target.schema} of {target.display} holds tables but is not an agentloop "
            "session store; it was left untouched — choose another with ?schema=name",
            location=target.display,
        )


def newer_error(target: Target, why: str) -> StoreVersionError:
    return StoreVersionError(
        f"session store {target.display} was written by a newer version of agentloop ({why}); "
        "it is not written to — upgrade agentloop, or open it read-only",
        location=target.display,
    )


def prepare(conn: psycopg.Connection[tuple[object, ...]], target: Target, read_only: bool) -> None:
    """Check the schema on an autocommit connection; create or upgrade it unless
    ``read_only``. Raises the one-line errors; writes nothing it refuses."""
    tables = _tables(conn, target.schema)
    _refuse_foreign(tables, target)
    if read_only:
        if not tables:
            raise StoreMissingError(
                f"no session store at {target.display} yet", location=target.display
            )
        applied = _applied(conn, target.schema)
        pending = [
            name for name, _ in MIGRATIONS if name not in applied and name not in READ_COMPATIBLE
        ]
        if pending and _newer(applied) is None:
            raise StoreVersionError(
                f"session store {target.display} needs an upgrade ({pending[0]}) that cannot "
                "be done read-only; open it once for writing",
                location=target.display,
            )
        return
    if tables:
        applied = _applied(conn, target.schema)
        why = _newer(applied)
        if why is not None:
            raise newer_error(target, why)
        if all(name in applied for name, _ in MIGRATIONS):
            return  # the common case: nothing to write
    _migrate(conn, target)


def _migrate(conn: psycopg.Connection[tuple[object, ...]], target: Target) -> None:
    schema = sql.Identifier(target.schema)
    with conn.transaction():
        # Two first openers must not both create the schema: the second waits, then sees it.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agentloop:{target.schema}",))
        tables = _tables(conn, target.schema)
        _refuse_foreign(tables, target)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, applied_at timestamptz "
                "NOT NULL DEFAULT clock_timestamp())"
            ).format(sql.Identifier(MIGRATIONS_TABLE))
        )
        applied = _applied(conn, target.schema)
        why = _newer(applied)
        if why is not None:
            raise newer_error(target, why)
        for name, script in MIGRATIONS:
            if name in applied:
                continue
            if isinstance(script, str):
                _script(conn, script)
            else:
                script(conn)
            conn.execute(
                sql.SQL("INSERT INTO {} (name) VALUES (%s)").format(
                    sql.Identifier(MIGRATIONS_TABLE)
                ),
                (name,),
            )


def _script(conn: psycopg.Connection[tuple[object, ...]], script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(sql.SQL(statement))
