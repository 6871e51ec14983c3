"""What a loop tells its caller: :class:`TurnResult` for a turn, :class:`LoopEvents` as it goes."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from agentloop._core.context import CompactionDecision
from agentloop._core.model import ModelResponse
from agentloop._core.results import CompactionTransition
from agentloop._core.tool import ToolResult

__all__ = ["LoopEvents", "TurnResult"]


@dataclass
class TurnResult:
    """What one user turn produced."""

    text: str
    session_id: str
    tool_calls: int = 0
    transitions: list[CompactionTransition] = field(default_factory=list)
    stop_reason: str | None = None


class LoopEvents:
    """Subscribe to what the loop does; override the methods you care about."""

    def on_text(self, delta: str) -> None:
        """A streamed piece of the assistant's reply."""

    def on_usage(self, decision: CompactionDecision) -> None:
        """Context usage measured at a safe boundary, with the compaction decision."""

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        """Compaction begins (a UI may show a spinner until on_transition)."""

    def on_transition(self, transition: CompactionTransition) -> None:
        """The conversation continues under a child session with the compacted history."""

    def on_compaction_skipped(self, reason: str) -> None:
        """A compaction was attempted but not applied (nothing to cut, or no savings)."""

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None: ...

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None: ...

    def on_reply(self, response: ModelResponse) -> None:
        """A complete assistant reply (after streaming), already stored."""

    def on_reply_incomplete(self, reason: str) -> None:
        """The streamed reply broke off: what was shown is not an answer; it is retried once."""

    def on_warning(self, message: str) -> None:
        """Something the user should know that stops nothing (server-side compaction is not
        available and the loop compacts locally instead). Default: ``warnings.warn``."""
        warnings.warn(message, UserWarning, stacklevel=2)
