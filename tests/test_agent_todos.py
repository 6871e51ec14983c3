"""The todo list: todo_write replaces and validates it; its saved state round-trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agent_tools import make_tools, run

from agentloop import ToolResult
from agentloop._agent.todos import TodoList, ToolStateError

# --------------------------------------------------------------------------------- todos


TODOS = [
    {"content": "read the code", "status": "completed", "id": "1"},
    {"content": "fix the bug", "status": "in_progress", "id": "2"},
    {"content": "run the tests", "status": "pending"},
]
RENDERED = "## Todo list\n- [x] read the code\n- [ ] (in progress) fix the bug\n- [ ] run the tests"


def test_todo_write_replaces_list_and_renders(ws: Path) -> None:
    todos = TodoList()
    tools = make_tools(ws, todos=todos)
    result = run(tools, "todo_write", todos=TODOS)
    assert result == ToolResult(RENDERED)
    assert todos.render_markdown() == RENDERED
    assert [item.status for item in todos.items] == ["completed", "in_progress", "pending"]
    run(tools, "todo_write", todos=[{"content": "only this", "status": "pending"}])
    assert todos.render_markdown() == "## Todo list\n- [ ] only this"
    assert run(tools, "todo_write", todos=[]).content == "No todos."
    assert todos.items == ()


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({}, "missing required parameter 'todos'"),
        ({"todos": "do it"}, "must be a list"),
        ({"todos": ["do it"]}, "todos[0]"),
        ({"todos": [{"status": "pending"}]}, "todos[0].content"),
        ({"todos": [{"content": "  ", "status": "pending"}]}, "must not be empty"),
        ({"todos": [{"content": "x", "status": "done"}]}, "todos[0].status"),
        ({"todos": [{"content": 5, "status": "pending"}]}, "todos[0].content"),
        (
            {"todos": [{"content": "a", "status": "pending", "id": "1"}] * 2},
            "duplicate ids 1",
        ),
    ],
)
def test_todo_write_validates(ws: Path, tool_input: dict[str, Any], message: str) -> None:
    todos = TodoList()
    tool = make_tools(ws, todos=todos)["todo_write"]
    tool.run({"todos": TODOS})
    result = tool.run(tool_input)
    assert result.is_error
    assert message in result.content
    assert todos.render_markdown() == RENDERED  # a rejected call leaves the list alone


def test_todo_write_is_lenient_where_harmless(ws: Path) -> None:
    todos = TodoList()
    result = run(
        make_tools(ws, todos=todos),
        "todo_write",
        todos=[{"content": "two\nlines", "status": "pending", "id": 7, "priority": "high"}],
    )
    assert result.content == "## Todo list\n- [ ] two lines"
    assert todos.items[0].id == "7"


def test_todo_state_round_trips_through_dict() -> None:
    todos = TodoList()
    make_tools(Path.cwd(), todos=todos)["todo_write"].run({"todos": TODOS})
    saved = json.loads(json.dumps(todos.to_dict()))
    assert saved == {"todos": TODOS}
    restored = TodoList.from_dict(saved)
    assert restored.items == todos.items
    assert restored.render_markdown() == RENDERED
    assert TodoList().render_markdown() == "No todos."
    assert TodoList.from_dict(TodoList().to_dict()).items == ()


@pytest.mark.parametrize("data", [{}, {"todos": {}}, {"todos": [{"content": "x"}]}, []])
def test_todo_from_dict_rejects_malformed_state(data: Any) -> None:
    with pytest.raises(ToolStateError):
        TodoList.from_dict(data)
