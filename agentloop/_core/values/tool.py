"""What a tool is to the agent loop: a name, a JSON schema, and a function from input to result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentloop._core.values.tool_facts import Recognizer


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns; ``is_error`` results are sent back with ``is_error: true``."""

    content: str
    is_error: bool = False
    blocks: tuple[dict[str, Any], ...] = ()
    """Content blocks sent instead of ``content`` when given (text, images, documents)."""
    whole: str | None = None
    """The complete output when ``content`` is a shortened form of it: the session stores the
    whole (``search_history`` finds it) and the model gets ``content``."""


@runtime_checkable
class Tool(Protocol):
    """A tool the model may call: its name, what it does, its JSON schema, and how it runs."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def input_schema(self) -> dict[str, Any]: ...

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        """Run with the model's input; a failure is an ``is_error`` result, not an exception."""
        ...


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A tool backed by a plain function; exceptions become error results for the model.
    ``facts``: what a call did (see :class:`~agentloop.ToolFacts`); a loop given this tool
    registers it, so a compaction carries those facts."""

    name: str
    description: str
    input_schema: dict[str, Any]
    function: Callable[[Mapping[str, Any]], str | ToolResult]
    facts: Recognizer | None = None

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        try:
            result = self.function(tool_input)
        except Exception as error:  # a tool's failure is information for the model, not a crash
            return ToolResult(f"{type(error).__name__}: {error}", is_error=True)
        return result if isinstance(result, ToolResult) else ToolResult(str(result))


def tool_definition(tool: Tool) -> dict[str, Any]:
    """The tool as the Messages API's ``tools=`` entry."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
