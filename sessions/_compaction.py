"""Seed compaction strategies and the rules they follow; storage-independent.

A compaction never rewrites a session: the conversation continues in a child session that holds
the kept messages, and the parent keeps all of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from sessions._errors import CompactionError

StrategyKind = Literal["none", "sliding_window", "summarize"]


@dataclass(frozen=True, slots=True)
class CompactionStrategy:
    """How :meth:`SessionStore.compact` shortens a conversation.

    - ``CompactionStrategy.NONE``: keeps everything and creates no child; the call is recorded.
    - ``CompactionStrategy.sliding_window(n)``: the child keeps the last ``n`` messages, with the
      cut moved forward to the first user message that carries no tool_result, so no tool_result
      loses its tool_use and the kept list starts with the user.
    - ``CompactionStrategy.SUMMARIZE``: the child starts with one *user* message holding the
      summary passed to ``compact`` (required).
    """

    kind: StrategyKind
    max_messages: int | None = None

    NONE: ClassVar[CompactionStrategy]
    SUMMARIZE: ClassVar[CompactionStrategy]

    def __post_init__(self) -> None:
        if self.kind not in ("none", "sliding_window", "summarize"):
            raise CompactionError(f"unknown compaction strategy {self.kind!r}")
        if self.kind == "sliding_window":
            if (
                not isinstance(self.max_messages, int)
                or isinstance(self.max_messages, bool)
                or self.max_messages < 1
            ):
                raise CompactionError(
                    f"sliding_window needs max_messages >= 1, not {self.max_messages!r}"
                )
        elif self.max_messages is not None:
            raise CompactionError(f"{self.kind} takes no max_messages")

    @classmethod
    def sliding_window(cls, max_messages: int) -> CompactionStrategy:
        """Keep the last ``max_messages`` messages (fewer if the cut must move forward)."""
        return cls("sliding_window", max_messages)

    def __str__(self) -> str:
        if self.kind == "sliding_window":
            return f"sliding_window({self.max_messages})"
        return self.kind


CompactionStrategy.NONE = CompactionStrategy("none")
CompactionStrategy.SUMMARIZE = CompactionStrategy("summarize")


class _MessageLike(Protocol):
    @property
    def role(self) -> str: ...

    @property
    def content(self) -> Sequence[Mapping[str, Any]]: ...


def has_tool_result(message: _MessageLike) -> bool:
    return any(block.get("type") == "tool_result" for block in message.content)


def has_pending_tool_use(messages: Sequence[_MessageLike]) -> bool:
    """True when the last message is an assistant turn whose tool_use still awaits results."""
    if not messages or messages[-1].role != "assistant":
        return False
    return any(block.get("type") == "tool_use" for block in messages[-1].content)


def sliding_window_start(messages: Sequence[_MessageLike], max_messages: int) -> int:
    """Index of the first message a sliding window of ``max_messages`` keeps.

    When a cut is needed it lands on a user message without tool_result blocks: starting on a
    tool_result would orphan it (its tool_use sits in the dropped assistant turn), and the
    Messages API wants the user first. Returns ``len(messages)`` when the window holds no such
    message.
    """
    start = max(0, len(messages) - max_messages)
    if start == 0:
        return 0
    for index in range(start, len(messages)):
        message = messages[index]
        if message.role == "user" and not has_tool_result(message):
            return index
    return len(messages)


def total_tokens(messages: Sequence[Any]) -> int | None:
    """Sum of cached token estimates, or None if any message has none."""
    total = 0
    for message in messages:
        estimate = message.token_estimate
        if estimate is None:
            return None
        total += estimate
    return total
