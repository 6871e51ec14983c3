"""The check of a whole store file before a process writes to it: a damaged store is left
untouched, even when the damage is in a page that opening it did not read.

SQLite finds damage only in the pages it reads, and opening a store reads few of them. So when a
store is opened for writing, ``PRAGMA quick_check`` reads every page in the background, on a
read-only connection of its own (SQLite works without Python's lock: nothing else waits). A
write that carries data waits for its verdict (on a 1 GB store about a second and a half with
the file in the page cache: by the time a model has answered, long done); only the small lease
writes that one-writer-per-session needs at start-up may come before it. Once the check found
damage, every write is refused.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ._store_errors import StoreCorruptError

__all__ = ["IntegrityCheck"]


class IntegrityCheck:
    """``PRAGMA quick_check`` of the file at ``path``, running in a thread from creation."""

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self._done = threading.Event()
        self._problem: str | None = None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sessions-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                uri = f"{self.path.as_uri()}?mode=ro"
                self._conn = sqlite3.connect(
                    uri, uri=True, timeout=self._busy_timeout, check_same_thread=False
                )
            rows = self._conn.execute("PRAGMA quick_check").fetchall()
            problems = [str(row[0]) for row in rows if row and row[0] != "ok"]
            self._problem = problems[0] if problems else None
        except sqlite3.DatabaseError as error:
            # Interrupted (closed), busy, or the file itself unreadable: damage only when
            # SQLite says so; anything else is no verdict, and writes go on as before.
            if _says_damaged(error):
                self._problem = str(error)
        finally:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
            self._done.set()

    def require_sound(self, *, wait: bool) -> None:
        """:class:`StoreCorruptError` if the check found damage; with ``wait``, wait for the
        verdict first (without, a write that comes before it goes on)."""
        if wait:
            self._done.wait()
        if self._done.is_set() and self._problem is not None:
            raise StoreCorruptError(
                f"session store {self.path} is damaged ({self._problem}); it was left "
                "untouched — move it away or pass another store path",
                path=self.path,
            )

    def close(self) -> None:
        """Stop the check (if it still runs) and wait for its thread."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.interrupt()
        self._thread.join()


def _says_damaged(error: sqlite3.DatabaseError) -> bool:
    text = str(error).lower()
    return "malformed" in text or "corrupt" in text or "not a database" in text
