"""The receipt of the compaction that made a stored session: what of the span it replaced the
session's context does not hold (``agentloop._core.facts.receipt``), read from the store."""

from __future__ import annotations

from collections.abc import Sequence

from agentloop._adapters.records import from_record
from agentloop._adapters.tool_recognizers import default_tool_facts
from agentloop._core.facts.receipt import Receipt, receipt
from agentloop._core.values.messages import Message
from agentloop._core.values.tool_facts import ToolFacts
from agentloop._sessions import SessionStore

__all__ = ["replaced_span", "session_receipt"]


def replaced_span(parent: Sequence[Message], child: Sequence[Message]) -> int:
    """How many of ``parent``'s messages the compaction that made ``child`` replaced: what the
    prefix records, else where ``child``'s first kept message stands in ``parent`` (a context
    opened by the API's summary keeps its turns verbatim), else all of them."""
    if not child:
        return 0
    info = child[0].summary
    if info is not None and info.replaced_here:
        return min(info.replaced_here, len(parent))
    if len(child) > 1:
        kept = child[1]
        for index in range(len(parent) - 1, -1, -1):
            if parent[index].role == kept.role and parent[index].content == kept.content:
                return index
    return len(parent)


def session_receipt(
    store: SessionStore,
    session_id: str,
    context: Sequence[Message] | None = None,
    facts: ToolFacts | None = None,
) -> Receipt | None:
    """The receipt of the compaction that made ``session_id`` (None: no compaction made it);
    ``context``: the session's messages as the model sees them now (default: as stored);
    ``facts``: what each call did (default: the recognizers that ship)."""
    session = store.get_session(session_id)
    if session.parent_id is None:
        return None
    made = [e for e in store.compaction_history(session.id) if e.child_id == session.id]
    if not made:
        return None  # a fork: nothing was compacted
    parent = [from_record(r) for r in store.get_messages(session.parent_id)]
    child = (
        list(context)
        if context is not None
        else [from_record(r) for r in store.get_messages(session.id)]
    )
    registry = facts if facts is not None else default_tool_facts()
    return receipt(parent, replaced_span(parent, child), child, registry)
