"""Shared helpers and fixtures for the coding-tool tests (tests/test_agent_*.py,
test_coding_tools.py); registered as a plugin in conftest.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace holding a secret no tool may reach."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET + "\n")
    return directory
