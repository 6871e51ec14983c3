"""Errors the sessions store raises on purpose; ``str(error)`` is one line fit to show a user."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path


class SessionError(Exception):
    """Base class of every error the sessions package raises on purpose."""


class StoreError(SessionError):
    """The store could not be opened or used (I/O error, read-only file system, ...).

    ``path`` is the SQLite file (None for a server store); ``location`` names the store either
    way (a server URL without its password).
    """

    def __init__(
        self, message: str, *, path: Path | str | None = None, location: str | None = None
    ) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None
        self.location = location if location is not None else (str(path) if path else None)


class StoreCorruptError(StoreError):
    """The file (or database schema) is not an agentloop session store, or is damaged.

    It is left untouched: nothing is written to it.
    """


class StoreBusyError(StoreError):
    """Another process held the store's write lock for longer than the busy timeout."""


class InvalidSessionIdError(SessionError, ValueError):
    """A session reference that is not a well-formed id or an id prefix of >= 4 characters."""

    def __init__(self, message: str, *, ref: str) -> None:
        super().__init__(message)
        self.ref = ref


class SessionNotFoundError(SessionError, LookupError):
    """No session has this id (or starts with this prefix)."""

    def __init__(self, message: str, *, ref: str) -> None:
        super().__init__(message)
        self.ref = ref


class AmbiguousSessionIdError(SessionError, LookupError):
    """A prefix that matches more than one session; ``candidates`` holds (some of) their ids."""

    def __init__(self, message: str, *, ref: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.ref = ref
        self.candidates = list(candidates)


class SessionCompactedError(SessionError):
    """Appending to a session that was already continued by a child session.

    ``continue_in`` is the newest descendant: the session where the conversation goes on.
    """

    def __init__(self, message: str, *, session_id: str, continue_in: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.continue_in = continue_in


class CompactionError(SessionError, ValueError):
    """A compaction that cannot be done as asked (e.g. ``Summarize`` without a summary)."""


class StoreMissingError(StoreError):
    """A store opened read-only does not exist (yet): nothing was created."""


class StoreVersionError(StoreError):
    """The store's schema is newer than this code (or older, where it cannot be upgraded now).

    A newer store is never written: open it with ``read_only=True`` to read it.
    """


class StoreConnectionError(StoreError):
    """The database server did not answer, refused the credentials, or dropped the connection."""


class SessionLeasedError(SessionError):
    """Another live writer holds the session's lease: the session is in use.

    ``owner`` describes the holder (e.g. ``"pid 1234 on host x"``); ``expires_at`` is when its
    lease runs out unless renewed (None when the lease was lost rather than held by another).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        owner: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.owner = owner
        self.expires_at = expires_at


class SearchQueryError(SessionError, ValueError):
    """A search query with nothing to search for (no word or number in it)."""
