"""Undoing a compaction in the store: a new branch from the uncompacted parent that keeps what
was said after the compaction (the compacted session and the parent stay as they are)."""

from __future__ import annotations

from agentloop._adapters.records import (
    COUNTED,
    USAGE_ESTIMATED,
    fork_session,
    from_record,
    to_record,
)
from agentloop._core.cutting.cut_and_prune import unbound_thinking
from agentloop._errors import AgentloopError
from agentloop._sessions import NewMessage, SessionStore


class NothingToUndoError(AgentloopError):
    """The session did not come from a compaction (or was never saved): nothing to undo."""


def undo_branch(store: SessionStore, session_id: str) -> tuple[str, int]:
    """Undo the compaction that created ``session_id``: a new branch holding the parent's
    messages, then the messages ``session_id`` gained after the compaction (the turn that
    compaction interrupted, and any since). Returns the branch's id and how many messages it
    carried over. :class:`AgentloopError` (one line) when ``session_id`` did not come from a
    compaction."""
    entry = next(
        (e for e in reversed(store.compaction_history(session_id)) if e.child_id == session_id),
        None,
    )
    if entry is None:
        raise NothingToUndoError(
            f"nothing to undo: session {session_id[:8]} did not come from a compaction"
        )
    since = store.get_messages(session_id)[entry.messages_after :]
    branch = fork_session(store, entry.parent_id)
    if since:
        # Their API figures measured the compacted context, not this one: dropped, so the
        # branch is measured from the parent's figures (billing goes by where a message was
        # first written, and stays with the compacted session). Their thinking was bound to
        # the compacted context: it goes too (the API would refuse it after the parent).
        carried, _ = unbound_thinking((), [from_record(message) for message in since])
        store.append_messages(branch, [_unmeasured(to_record(message)) for message in carried])
    return branch, len(since)


def _unmeasured(message: NewMessage) -> NewMessage:
    metadata = {k: v for k, v in message.metadata.items() if k not in (COUNTED, USAGE_ESTIMATED)}
    return message.model_copy(update={"usage": None, "metadata": metadata})
