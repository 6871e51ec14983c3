"""Tools that let the model see its own context and ask for a compaction.

``context_status`` answers with the measured usage, the window, where compaction triggers and
the last compaction. ``compact_context`` only *requests* a compaction: the loop runs it at the
next safe boundary (after the tool round, before the next model call), never in the middle of
one, and not at all when the user turned compaction off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.measuring.figures import percent_figure, token_figure
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall, ToolFact
from agentloop._loop.conversation_compacter import ConversationCompacter


class ContextOwner(Protocol):
    """What the tools need of the loop (``AgentLoop`` is one)."""

    @property
    def compacter(self) -> ConversationCompacter | None: ...

    @property
    def last_transition(self) -> CompactionTransition | None: ...

    def context(self) -> CompactionDecision | None: ...

    def request_compaction(self, instructions: str | None = None) -> None: ...


STATUS_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
COMPACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "instructions": {
            "type": "string",
            "description": "What the summary must keep (optional).",
        }
    },
}


@dataclass
class ContextStatusTool:
    """Reports the context usage to the model."""

    loop: ContextOwner
    name: str = "context_status"
    description: str = (
        "How full your context window is: tokens used, the window, where automatic compaction "
        "triggers, and the last compaction. Use it before large reads to decide whether to "
        "compact first."
    )
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(STATUS_SCHEMA))

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return ()  # it reads the context: nothing to carry

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        decision = self.loop.context()
        if decision is None:
            return ToolResult("context measurement is not available (no compacter)")
        usage = decision.usage
        measured = {
            "api": "as the API counted it",
            "api+estimate": "partly estimated",
        }.get(usage.source, "estimated")
        lines = [
            f"used: {token_figure(usage.tokens, usage.source)} tokens ({measured})",
            f"window: {usage.window:,} tokens "
            f"({percent_figure(usage.fraction, usage.source)} used)",
            f"compaction triggers at: {decision.trigger_tokens:,} tokens",
        ]
        if self.loop.compacter is not None and not self.loop.compacter.settings.enabled:
            lines.append("automatic compaction: off (the user disabled it)")
        last = self.loop.last_transition
        if last is None:
            lines.append("last compaction: none in this session")
        else:
            summary = last.summary
            lines.append(
                f"last compaction: {summary.original_message_count} → "
                f"{summary.compacted_message_count} messages, "
                f"{token_figure(summary.tokens_before, summary.tokens_before_source)} → "
                f"{token_figure(summary.tokens_after, summary.tokens_after_source)} tokens "
                f"({summary.strategy})"
            )
        return ToolResult("\n".join(lines))


@dataclass
class CompactContextTool:
    """Lets the model ask for a compaction at the next safe boundary."""

    loop: ContextOwner
    name: str = "compact_context"
    description: str = (
        "Ask for your conversation to be compacted (summarized) at the next safe point, after "
        "this tool round. Give instructions for what the summary must keep. Use it when the "
        "context is nearly full or old detail is no longer needed."
    )
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(COMPACT_SCHEMA))

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return ()  # the compaction it asks for is the carried fact

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        compacter = self.loop.compacter
        if compacter is None or not compacter.settings.enabled:
            return ToolResult("compaction is turned off for this session; nothing was requested")
        instructions = tool_input.get("instructions")
        self.loop.request_compaction(str(instructions) if instructions else None)
        return ToolResult(
            "compaction requested: it runs after this tool round, before your next turn"
        )


def context_tools(loop: ContextOwner) -> list[ContextStatusTool | CompactContextTool]:
    """Both tools, bound to ``loop``."""
    return [ContextStatusTool(loop), CompactContextTool(loop)]
