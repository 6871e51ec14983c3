"""The coding tool set assembled by agentloop._agent.tools: complete, stable, never raising."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentloop import Tool
from agentloop._agent.tools import TodoList, always_allow, coding_tools, never_allow
from agentloop._core.values.tool import tool_definition

# --------------------------------------------------------------------------------- the set


def test_coding_tools_are_complete_and_byte_stable(ws: Path) -> None:
    tools = coding_tools(ws, approve=always_allow, todos=TodoList())
    assert [tool.name for tool in tools] == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "run_command",
        "todo_write",
    ]
    again = coding_tools(ws, approve=never_allow, todos=TodoList())
    dump = json.dumps([tool_definition(t) for t in tools])
    assert dump == json.dumps([tool_definition(t) for t in again])
    for tool in tools:
        assert isinstance(tool, Tool)
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert 0 < len(tool.description) < 600


@pytest.mark.parametrize("bad_input", [None, [], "path", 3])
def test_no_tool_raises_on_malformed_input(ws: Path, bad_input: Any) -> None:
    for tool in coding_tools(ws, approve=always_allow, todos=TodoList()):
        result = tool.run(bad_input)
        assert result.is_error, tool.name
