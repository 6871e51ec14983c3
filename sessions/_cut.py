"""The one pair-safe cut rule shared by everything that cuts a conversation.

Dependency-free on purpose: agentloop's compaction core imports it without loading the store
(no sqlite3, no pydantic).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

__all__ = ["HasRoleAndContent", "has_tool_result", "pair_safe_cut"]


class HasRoleAndContent(Protocol):
    """Anything shaped like a Messages API message: agentloop's Message, sessions' messages."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> Sequence[Mapping[str, Any]]: ...


def has_tool_result(message: HasRoleAndContent) -> bool:
    """True when the message carries at least one tool_result block."""
    return any(block.get("type") == "tool_result" for block in message.content)


def pair_safe_cut(
    messages: Sequence[HasRoleAndContent],
    start: int,
    *,
    first_role: Literal["user", "assistant"],
) -> int | None:
    """The first index >= start at which messages may be cut so that no tool_result in
    messages[index:] loses its tool_use in messages[:index]: messages[index] has role
    first_role and carries no tool_result block. None when there is none.

    Why that is enough in a valid history: a tool_result answers the tool_use of the assistant
    turn right before it. A kept list that starts on a user message without tool_result, or on
    an assistant message (whose preceding user turn then stays with its own tool_use in the
    dropped part), never separates the two.
    """
    if first_role not in ("user", "assistant"):
        raise ValueError(f"first_role must be 'user' or 'assistant', not {first_role!r}")
    if start < 0:
        raise ValueError(f"start must be >= 0, not {start}")
    for index in range(start, len(messages)):
        message = messages[index]
        if message.role == first_role and not has_tool_result(message):
            return index
    return None
