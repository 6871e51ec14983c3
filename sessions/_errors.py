"""Errors the sessions store raises on purpose; ``str(error)`` is one line fit to show a user."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class SessionError(Exception):
    """Base class of every error the sessions package raises on purpose."""


class StoreError(SessionError):
    """The store could not be opened or used (I/O error, read-only file system, ...)."""

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class StoreCorruptError(StoreError):
    """The file at the store path is not an agentloop session store (or is damaged).

    The file is left untouched: nothing is written to it.
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
