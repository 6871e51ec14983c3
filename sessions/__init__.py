"""sessions: a durable store of conversations with lineage and compaction history.

It knows nothing about LLMs beyond the shape of Messages API content blocks. A compacted
conversation continues in a child session; the parent keeps every original message.

Names are imported on first use: ``from sessions import pair_safe_cut`` loads neither sqlite3,
pydantic nor the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessions._compaction import CompactionStrategy
    from sessions._cut import pair_safe_cut
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
    from sessions._ids import new_session_id, short_id, validate_session_id, validate_session_ref
    from sessions._paths import default_store_path, workspace_key
    from sessions._sqlite import SqliteSessionStore, open_store
    from sessions._store import UNSET, SessionStore
    from sessions._types import (
        CompactionEntry,
        CompactionRecord,
        NewMessage,
        Role,
        Session,
        SessionStatus,
        StoredMessage,
    )

_EXPORTS: dict[str, str] = {
    "UNSET": "sessions._store",
    "AmbiguousSessionIdError": "sessions._errors",
    "CompactionEntry": "sessions._types",
    "CompactionError": "sessions._errors",
    "CompactionRecord": "sessions._types",
    "CompactionStrategy": "sessions._compaction",
    "InvalidSessionIdError": "sessions._errors",
    "NewMessage": "sessions._types",
    "Role": "sessions._types",
    "Session": "sessions._types",
    "SessionCompactedError": "sessions._errors",
    "SessionError": "sessions._errors",
    "SessionNotFoundError": "sessions._errors",
    "SessionStatus": "sessions._types",
    "SessionStore": "sessions._store",
    "SqliteSessionStore": "sessions._sqlite",
    "StoreBusyError": "sessions._errors",
    "StoreCorruptError": "sessions._errors",
    "StoreError": "sessions._errors",
    "StoredMessage": "sessions._types",
    "default_store_path": "sessions._paths",
    "new_session_id": "sessions._ids",
    "open_store": "sessions._sqlite",
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
        value = getattr(importlib.import_module(module), name)
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
    "InvalidSessionIdError",
    "NewMessage",
    "Role",
    "Session",
    "SessionCompactedError",
    "SessionError",
    "SessionNotFoundError",
    "SessionStatus",
    "SessionStore",
    "SqliteSessionStore",
    "StoreBusyError",
    "StoreCorruptError",
    "StoreError",
    "StoredMessage",
    "default_store_path",
    "new_session_id",
    "open_store",
    "pair_safe_cut",
    "short_id",
    "validate_session_id",
    "validate_session_ref",
    "workspace_key",
]
