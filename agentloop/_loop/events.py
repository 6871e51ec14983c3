"""What a loop tells its caller: :class:`TurnResult` for a turn, :class:`LoopEvents` as it goes."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.model import ModelResponse
from agentloop._core.values.tool import ToolResult

__all__ = ["EventFanOut", "LoopEvents", "TurnResult"]


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

    def on_thinking(self, delta: str) -> None:
        """A streamed piece of the model's thinking (summarized display); a newline opens each
        thinking block after the first of a reply."""

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


class EventFanOut(LoopEvents):
    """Every subscriber hears every event, in the order they subscribed (a loop's events: the
    agent keeps its books first, then the face shows what happened). With no subscriber, a
    warning is still raised as :class:`UserWarning`."""

    def __init__(self, listeners: list[LoopEvents] | None = None) -> None:
        self._listeners: list[LoopEvents] = list(listeners or [])

    def subscribe(self, listener: LoopEvents) -> Callable[[], None]:
        """Add ``listener``; returns what removes it again."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_text(self, delta: str) -> None:
        for listener in self._listeners:
            listener.on_text(delta)

    def on_thinking(self, delta: str) -> None:
        for listener in self._listeners:
            listener.on_thinking(delta)

    def on_usage(self, decision: CompactionDecision) -> None:
        for listener in self._listeners:
            listener.on_usage(decision)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        for listener in self._listeners:
            listener.on_compaction_start(decision)

    def on_transition(self, transition: CompactionTransition) -> None:
        for listener in self._listeners:
            listener.on_transition(transition)

    def on_compaction_skipped(self, reason: str) -> None:
        for listener in self._listeners:
            listener.on_compaction_skipped(reason)

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        for listener in self._listeners:
            listener.on_tool_call(name, tool_input)

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        for listener in self._listeners:
            listener.on_tool_result(name, tool_input, result)

    def on_reply(self, response: ModelResponse) -> None:
        for listener in self._listeners:
            listener.on_reply(response)

    def on_reply_incomplete(self, reason: str) -> None:
        for listener in self._listeners:
            listener.on_reply_incomplete(reason)

    def on_warning(self, message: str) -> None:
        if not self._listeners:
            warnings.warn(message, UserWarning, stacklevel=2)
        for listener in self._listeners:
            listener.on_warning(message)
