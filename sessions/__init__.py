"""sessions: a durable store of conversations with lineage and compaction history.

It knows nothing about LLMs beyond the shape of Messages API content blocks. A compacted
conversation continues in a child session; the parent keeps every original message.
"""

from sessions._compaction import CompactionStrategy
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
    "short_id",
    "validate_session_id",
    "validate_session_ref",
    "workspace_key",
]
