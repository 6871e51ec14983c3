"""Shared helpers for the coding-tool tests (tests/test_agent_*.py, test_coding_tools.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloop import Tool, ToolResult
from agentloop._agent.shell import always_allow
from agentloop._agent.todos import TodoList
from agentloop._agent.tools import coding_tools

SECRET = "top-secret-outside-the-workspace"


def make_tools(
    root: Path, approve: Callable[[str], bool] = always_allow, todos: TodoList | None = None
) -> dict[str, Tool]:
    tools = coding_tools(root, approve=approve, todos=todos if todos is not None else TodoList())
    return {tool.name: tool for tool in tools}


def run(tools: dict[str, Tool], name: str, **tool_input: Any) -> ToolResult:
    return tools[name].run(tool_input)
