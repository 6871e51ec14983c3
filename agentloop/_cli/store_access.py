"""The command line's way into the session store: choosing it (``--store``, ``AGENTLOOP_STORE``),
opening it read-only for the commands that only read, where ``--continue`` goes, and the
session lease (one writer per session).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    from agentloop._sessions import Conversation, Session, SessionStore
    from agentloop._sessions import Lease as StoreLease

LEASE_TTL = 30.0
"""Seconds a session lease lasts unless renewed (renewed every third of it)."""


class NoStoreYet(AgentloopError):
    """A read-only command found no store: nothing was ever saved (nothing is created)."""

    def __init__(self) -> None:
        super().__init__("no sessions yet")


class SessionBusyError(AgentloopError):
    """Another agentloop process holds the session (one writer per session)."""


def open_cli_store(location: str | None = None, *, read_only: bool = False) -> SessionStore:
    """The store at ``location`` (a path, ``sqlite:///…`` or ``postgresql://…``; None:
    ``$AGENTLOOP_STORE`` or the default file). ``read_only`` never creates one: it raises
    :class:`NoStoreYet` when there is none."""
    from agentloop._sessions import StoreMissingError, open_store

    try:
        return open_store(location, read_only=read_only)
    except StoreMissingError:
        raise NoStoreYet() from None


def list_conversations(
    store: SessionStore, *, workspace: str | None, limit: int | None, offset: int = 0
) -> list[Conversation]:
    """Conversations (one row per lineage), the most recently active first."""
    return store.list_conversations(workspace=workspace, limit=limit, offset=offset)


def latest_conversation(store: SessionStore, workspace: str) -> Session | None:
    """Where ``--continue`` goes: the newest conversation here that holds a message."""
    offset = 0
    while True:
        page = list_conversations(store, workspace=workspace, limit=20, offset=offset)
        for conversation in page:
            if conversation.head.message_count > 0:
                return conversation.head
        if len(page) < 20:
            return None
        offset += 20


# ---------------------------------------------------------------------------- leases


def _busy(session_id: str, holder: str | None) -> SessionBusyError:
    by = f" ({holder})" if holder else ""
    return SessionBusyError(
        f"session {session_id[:8]} is in use by another agentloop process{by}; "
        "continue it in a new branch with --fork-session, or start a new session"
    )


class LeaseHolder(Protocol):
    """A writer that carries a session lease on its writes (:class:`CodingAgent`)."""

    @property
    def lease(self) -> StoreLease | None: ...

    @lease.setter
    def lease(self, lease: StoreLease | None) -> None: ...

    @property
    def lease_owner(self) -> str | None: ...

    @lease_owner.setter
    def lease_owner(self, owner: str | None) -> None: ...


_LOCAL_OWNER = re.compile(r"pid (\d+) on (.+)")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's
    return True


class SessionLeaseKeeper:
    """The session lease: taken at start or resume, renewed in a daemon thread every ttl/3,
    moved along when the conversation continues in another session, released at exit.

    Writes must carry the lease (a write without it is refused while it is live), so it is
    only taken once :meth:`attach` gave it to the agent that writes; until then this is a
    no-op.
    """

    def __init__(self, store: SessionStore, *, ttl: float = LEASE_TTL) -> None:
        self.store = store
        self.ttl = ttl
        self.owner = f"pid {os.getpid()} on {socket.gethostname()}"
        self.supported = False
        self._holder: LeaseHolder | None = None
        """The writer the lease is given to (see :meth:`attach`)."""
        self._held: StoreLease | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()

    def attach(self, holder: LeaseHolder) -> None:
        """Give the lease to ``holder`` (the agent: its writes carry it) from now on; a session
        the holder creates is leased to this owner on its first write."""
        self.supported = True
        self._holder = holder
        holder.lease_owner = self.owner

    @property
    def held(self) -> StoreLease | None:
        """The store's lease (``session_id``, ``token``...), None when none is held."""
        return self._held

    @held.setter
    def held(self, lease: StoreLease | None) -> None:
        self._held = lease
        if self._holder is not None:
            self._holder.lease = lease

    @property
    def session_id(self) -> str | None:
        return None if self._held is None else self._held.session_id

    def check(self, session_id: str) -> None:
        """:class:`SessionBusyError` if another writer holds ``session_id`` now."""
        live = self.store.get_lease(session_id)
        busy = live is not None and live.owner != self.owner
        if busy and live is not None and not self._take_from_the_dead(session_id):
            raise _busy(session_id, live.owner)

    def _take_from_the_dead(self, session_id: str) -> bool:
        """Release a lease whose holder was a process of this machine that no longer runs (a
        crash, kill -9): it would otherwise block the session until it expires."""
        live = self.store.get_lease(session_id)
        if live is None:
            return True
        match = _LOCAL_OWNER.fullmatch(live.owner)
        if match is None or match.group(2) != socket.gethostname():
            return False  # another machine's process: only its expiry can tell
        if _running(int(match.group(1))):
            return False
        self.store.release_lease(live)
        return True

    def acquire(self, session_id: str) -> None:
        """Hold ``session_id``; :class:`SessionBusyError` if another process holds it."""
        if not self.supported:
            return
        from agentloop._sessions import SessionLeasedError

        with self._lock:
            try:
                lease = self.store.acquire_lease(session_id, owner=self.owner, ttl=self.ttl)
            except SessionLeasedError as error:
                if not self._take_from_the_dead(session_id):
                    raise _busy(session_id, error.owner) from None
                lease = self.store.acquire_lease(session_id, owner=self.owner, ttl=self.ttl)
            if self._held is not None and self.session_id != session_id:
                self._release_held()
            self.held = lease

    def follow(self, session_id: str | None) -> None:
        """Hold ``session_id`` once it exists (a new session, after its first message). A
        compaction already moved the held lease to the child: renewing finds it there."""
        if session_id is None or session_id == self.session_id or not self.supported:
            return
        with self._lock:
            if self._held is None and self._holder is not None:
                self._held = self._holder.lease  # taken by the loop with the session's creation
            if self._held is not None:
                with contextlib.suppress(Exception):
                    self.held = self.store.renew_lease(self._held)
                if self.session_id == session_id:
                    return
        with contextlib.suppress(AgentloopError):
            self.acquire(session_id)

    def keep(self, current: Callable[[], str | None]) -> None:
        """Renew the lease every ttl/3 while the program runs; follow ``current()`` (the
        session the conversation is in now, None while it is not stored)."""
        if not self.supported or self._thread is not None:
            return

        def renew() -> None:
            while not self._stop.wait(self.ttl / 3):
                try:
                    with self._lock:
                        if self._held is not None:
                            self.held = self.store.renew_lease(self._held)
                    self.follow(current())
                except Exception:  # a failed renewal must not end the session: tried again
                    continue

        self._thread = threading.Thread(target=renew, name="agentloop-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and give the lease up (the one the loop took with a new session too)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._held is None and self._holder is not None:
                self._held = self._holder.lease
            self._release_held()

    def _release_held(self) -> None:
        if self._held is not None:
            with contextlib.suppress(Exception):  # it expires on its own
                self.store.release_lease(self._held)
            self.held = None
