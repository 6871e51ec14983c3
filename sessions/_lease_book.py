"""The leases one store handle acquired, remembered so that the handle writes under them."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._types import Lease


class LeaseBook:
    """The leases one store handle acquired, by session: the handle writes under them when a
    call passes no lease (so a process that holds a session need not thread its lease
    through every call). Updated only after commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: dict[str, Lease] = {}

    def get(self, session_id: str) -> Lease | None:
        with self._lock:
            return self._by_session.get(session_id)

    def put(self, lease: Lease) -> None:
        with self._lock:
            self._drop(lease.token)
            self._by_session[lease.session_id] = lease

    def refresh(self, lease: Lease) -> None:
        """``lease`` renewed: kept if this handle holds it."""
        with self._lock:
            if any(held.token == lease.token for held in self._by_session.values()):
                self._drop(lease.token)
                self._by_session[lease.session_id] = lease

    def forget(self, token: str) -> None:
        with self._lock:
            self._drop(token)

    def move(self, token: str, session_id: str) -> None:
        """A transition moved the lease ``token`` to ``session_id`` (if this handle has it)."""
        with self._lock:
            mine = [lease for lease in self._by_session.values() if lease.token == token]
            self._drop(token)
            for lease in mine:
                self._by_session[session_id] = lease.model_copy(update={"session_id": session_id})

    def _drop(self, token: str) -> None:
        for session_id in [s for s, lease in self._by_session.items() if lease.token == token]:
            del self._by_session[session_id]
