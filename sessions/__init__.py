"""sessions: a durable store of conversations with lineage and compaction history.

It knows nothing about LLMs beyond the shape of Messages API content blocks. A compacted
conversation continues in a child session; the parent keeps every original message.

Stores: :func:`open_store` opens SQLite (a path, the default) or PostgreSQL (a
``postgresql://`` URL; ``pip install "agentloop[postgres]"``) behind one :class:`SessionStore`
contract; :func:`copy_store` moves everything between them.

Names are imported on first use: ``from sessions import pair_safe_cut`` loads neither sqlite3,
pydantic, psycopg nor the store; psycopg is loaded only to open a PostgreSQL store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._compaction import CompactionStrategy
    from ._copy import copy_store
    from ._cut import pair_safe_cut
    from ._ids import new_session_id, short_id, validate_session_id, validate_session_ref
    from ._open import open_store
    from ._paths import default_store_path, workspace_key
    from ._postgres import PostgresSessionStore
    from ._protocol import UNSET, SessionStore, default_lease_owner
    from ._sqlite import SqliteSessionStore
    from ._store_errors import (
        AmbiguousSessionIdError,
        CompactionError,
        InvalidSessionIdError,
        SearchQueryError,
        SessionCompactedError,
        SessionError,
        SessionLeasedError,
        SessionNotFoundError,
        StoreBusyError,
        StoreConnectionError,
        StoreCorruptError,
        StoreError,
        StoreMissingError,
        StoreVersionError,
    )
    from ._types import (
        CompactionEntry,
        CompactionRecord,
        Conversation,
        CopyReport,
        Lease,
        LineageExport,
        NewMessage,
        Role,
        SearchHit,
        Session,
        SessionStatus,
        StoredMessage,
    )

_EXPORTS: dict[str, str] = {
    "UNSET": "sessions._protocol",
    "AmbiguousSessionIdError": "sessions._store_errors",
    "CompactionEntry": "sessions._types",
    "CompactionError": "sessions._store_errors",
    "CompactionRecord": "sessions._types",
    "CompactionStrategy": "sessions._compaction",
    "Conversation": "sessions._types",
    "CopyReport": "sessions._types",
    "InvalidSessionIdError": "sessions._store_errors",
    "Lease": "sessions._types",
    "LineageExport": "sessions._types",
    "NewMessage": "sessions._types",
    "PostgresSessionStore": "sessions._postgres",
    "Role": "sessions._types",
    "SearchHit": "sessions._types",
    "SearchQueryError": "sessions._store_errors",
    "Session": "sessions._types",
    "SessionCompactedError": "sessions._store_errors",
    "SessionError": "sessions._store_errors",
    "SessionLeasedError": "sessions._store_errors",
    "SessionNotFoundError": "sessions._store_errors",
    "SessionStatus": "sessions._types",
    "SessionStore": "sessions._protocol",
    "SqliteSessionStore": "sessions._sqlite",
    "StoreBusyError": "sessions._store_errors",
    "StoreConnectionError": "sessions._store_errors",
    "StoreCorruptError": "sessions._store_errors",
    "StoreError": "sessions._store_errors",
    "StoreMissingError": "sessions._store_errors",
    "StoreVersionError": "sessions._store_errors",
    "StoredMessage": "sessions._types",
    "copy_store": "sessions._copy",
    "default_lease_owner": "sessions._protocol",
    "default_store_path": "sessions._paths",
    "new_session_id": "sessions._ids",
    "open_store": "sessions._open",
    "pair_safe_cut": "sessions._cut",
    "short_id": "sessions._ids",
    "validate_session_id": "sessions._ids",
    "validate_session_ref": "sessions._ids",
    "workspace_key": "sessions._paths",
}


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name stays an error for them

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'sessions' has no attribute {name!r}")
        # Relative to this package's own name: agentloop may load it under another one
        # (agentloop/_sessions.py), when a user's module has the name ``sessions``.
        value = getattr(importlib.import_module(module[len("sessions") :], __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "UNSET",
    "AmbiguousSessionIdError",
    "CompactionEntry",
    "CompactionError",
    "CompactionRecord",
    "CompactionStrategy",
    "Conversation",
    "CopyReport",
    "InvalidSessionIdError",
    "Lease",
    "LineageExport",
    "NewMessage",
    "PostgresSessionStore",
    "Role",
    "SearchHit",
    "SearchQueryError",
    "Session",
    "SessionCompactedError",
    "SessionError",
    "SessionLeasedError",
    "SessionNotFoundError",
    "SessionStatus",
    "SessionStore",
    "SqliteSessionStore",
    "StoreBusyError",
    "StoreConnectionError",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreVersionError",
    "StoredMessage",
    "copy_store",
    "default_lease_owner",
    "default_store_path",
    "new_session_id",
    "open_store",
    "pair_safe_cut",
    "short_id",
    "validate_session_id",
    "validate_session_ref",
    "workspace_key",
]
