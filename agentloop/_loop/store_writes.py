"""``StoreWrites``: what a loop kept and has not stored yet, and whether its session exists.

A loop keeps each message as it comes and stores them with the next reply, in one
transaction; the session is created in the store on its first write. A write the store
refuses keeps everything for the next one (the conversation in memory stays whole), and the
loop sends nothing before it succeeds.
"""

from __future__ import annotations

from agentloop._core.compaction.effects import AppendMessages, CreateSession, Steps, perform
from agentloop._core.values.messages import Message
from agentloop._errors import StoreWriteError
from agentloop._sessions import SessionError


class StoreWrites:
    """The messages kept since the last write, the session's existence in the store, and
    whether the last write failed (held by :class:`~agentloop.AgentLoop`)."""

    def __init__(self, *, stored: bool) -> None:
        self.pending: list[Message] = []
        """Kept in memory, not yet stored: written with the next reply, in one transaction."""
        self.stored = stored
        """Whether the session exists in the store (a new one is created on its first write)."""
        self.unsaved = False
        """A write of :attr:`pending` failed: it is retried before anything else is sent."""

    def keep(self, message: Message) -> None:
        """Store ``message`` with the next write."""
        self.pending.append(message)

    def moved(self, *, stored: bool) -> None:
        """The loop goes on in another session (``stored``: one the store holds already):
        nothing of it waits to be written."""
        self.pending = []
        self.unsaved = False
        self.stored = stored

    def flush(self, session: CreateSession, what: str) -> Steps[None]:
        """Store what was kept since the last write in ``session.session_id``, creating it
        (``session``) on its first. A write the store refuses keeps it all for the next write
        and raises :class:`StoreWriteError` (``what``: the message's start)."""
        if not self.pending:
            self.unsaved = False
            return
        pending, self.pending = tuple(self.pending), []
        try:
            if not self.stored:
                yield from perform(session)
                self.stored = True
            yield from perform(AppendMessages(session.session_id, pending))
        except SessionError as error:
            self.pending[:0] = pending
            self.unsaved = True
            raise StoreWriteError(f"{what}: {error}") from error
        self.unsaved = False
