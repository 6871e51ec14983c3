"""The agent's todo list and the todo_write tool that lets the model replace it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from agentloop._adapters.own_tool_facts import todo_write_facts
from agentloop._agent.base import CodingTool, InputError, ToolStateError
from agentloop._core.values.shorten import one_line
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall, ToolFact

__all__ = ["TodoItem", "TodoList", "TodoStatus", "TodoWriteTool", "ToolStateError"]

TODO_MAX_ITEMS = 100

TodoStatus = Literal["pending", "in_progress", "completed"]


class TodoItem(BaseModel):
    """One todo: what to do, its status, and an optional id the model may use."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    content: str
    status: TodoStatus
    id: str | None = None

    @field_validator("content")
    @classmethod
    def _content_on_one_line(cls, value: str) -> str:
        # Rendered as one markdown list item, so newlines would break the list.
        text = one_line(value)
        if not text:
            raise ValueError("must not be empty")
        return text

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # models often number their todos
        return value


def _parse_todos(raw: object, where: str) -> list[TodoItem]:
    if not isinstance(raw, list):
        raise ToolStateError(f"{where} must be a list of todo items")
    if len(raw) > TODO_MAX_ITEMS:
        raise ToolStateError(f"{where} has {len(raw)} items; at most {TODO_MAX_ITEMS}")
    items: list[TodoItem] = []
    problems: list[str] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            problems.append(f"{where}[{index}]: must be an object with content and status")
            continue
        try:
            items.append(TodoItem.model_validate(dict(entry)))
        except ValidationError as error:
            for detail in error.errors():
                field = ".".join(str(part) for part in detail["loc"])
                problems.append(f"{where}[{index}].{field}: {detail['msg']}")
    ids = [item.id for item in items if item.id is not None]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"{where}: duplicate ids {', '.join(duplicates)}")
    if problems:
        raise ToolStateError("invalid todo list: " + "; ".join(problems))
    return items


class TodoList:
    """The agent's todo list; the model replaces it whole, the loop preserves and saves it."""

    def __init__(self, items: Sequence[TodoItem] = ()) -> None:
        self._items: tuple[TodoItem, ...] = tuple(items)

    @property
    def items(self) -> tuple[TodoItem, ...]:
        return self._items

    def replace(self, items: Sequence[TodoItem]) -> None:
        """Replace the whole list."""
        self._items = tuple(items)

    def render_markdown(self) -> str:
        """The list as markdown for preserved state, or ``No todos.`` when empty."""
        if not self._items:
            return "No todos."
        lines = ["## Todo list"]
        for item in self._items:
            if item.status == "completed":
                lines.append(f"- [x] {item.content}")
            elif item.status == "in_progress":
                lines.append(f"- [ ] (in progress) {item.content}")
            else:
                lines.append(f"- [ ] {item.content}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state for session metadata."""
        return {"todos": [item.model_dump(exclude_none=True) for item in self._items]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TodoList:
        """The list saved by :meth:`to_dict`; raises :class:`ToolStateError` if malformed."""
        if not isinstance(data, Mapping) or "todos" not in data:
            raise ToolStateError("saved todo state must be an object with a 'todos' list")
        return cls(_parse_todos(data["todos"], "todos"))


_TODO_DESCRIPTION = (
    "Replace your todo list with the given items (send the complete list every time). Use it "
    "to plan and track multi-step work: keep one item in_progress, mark items completed as soon "
    "as they are done. The list is kept when the conversation is compacted."
)
_TODO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The complete new todo list.",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "What to do."},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    "id": {"type": "string", "description": "Optional stable id."},
                },
                "required": ["content", "status"],
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


class TodoWriteTool(CodingTool):
    def __init__(self, todos: TodoList) -> None:
        super().__init__("todo_write", _TODO_DESCRIPTION, _TODO_SCHEMA)
        self._todos = todos

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return todo_write_facts(call)

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        if "todos" not in tool_input:
            raise InputError("missing required parameter 'todos'")
        self._todos.replace(_parse_todos(tool_input["todos"], "todos"))
        return ToolResult(self._todos.render_markdown())
