"""The coding agent's tools: files, search, shell and a todo list, confined to one workspace.

Every tool satisfies :class:`agentloop.Tool`. A tool never raises out of ``run``: bad input, a
missing file, a path outside the workspace or a failing command come back as
``ToolResult(..., is_error=True)`` with a message written for the model.

This module assembles the set; each concern lives in its own module: :mod:`.workspace` (path
confinement and the race-free open), :mod:`.base` (the shared tool base and input checks),
:mod:`.files`, :mod:`.search`, :mod:`.shell` (run_command and consent policies),
:mod:`.secrets` (credentials kept out of commands and results), :mod:`.reaper` (no command
outlives the agent), :mod:`.todos` and :mod:`.history`. What survives a compaction besides:
:mod:`.instructions` (AGENTS.md and friends) and :mod:`.recent_files` (files brought back).
"""

from __future__ import annotations

from pathlib import Path

from agentloop._agent.base import ToolStateError
from agentloop._agent.files import Context, EditFileTool, ReadFileTool, WriteFileTool
from agentloop._agent.history import ToolCallRecord, ToolHistory
from agentloop._agent.search_tools import GrepTool, ListFilesTool
from agentloop._agent.shell import (
    COMMAND_MAX_OUTPUT_BYTES,
    Approve,
    RunCommandTool,
    always_allow,
    never_allow,
)
from agentloop._agent.todos import TodoItem, TodoList, TodoWriteTool
from agentloop._agent.workspace import Workspace, WorkspaceError
from agentloop._core.values.tool import Tool

__all__ = [
    "Approve",
    "TodoItem",
    "TodoList",
    "ToolCallRecord",
    "ToolHistory",
    "ToolStateError",
    "Workspace",
    "WorkspaceError",
    "always_allow",
    "coding_tools",
    "edit_file_tool",
    "grep_tool",
    "list_files_tool",
    "never_allow",
    "read_file_tool",
    "run_command_tool",
    "todo_write_tool",
    "write_file_tool",
]


def read_file_tool(workspace: Workspace, context: Context | None = None) -> Tool:
    """The read_file tool: numbered lines of a text file, capped; with ``context`` (what the
    model sees now), a re-read of unchanged lines still in it says so instead of resending."""
    return ReadFileTool(workspace, context)


def write_file_tool(workspace: Workspace) -> Tool:
    """The write_file tool: create or overwrite a file."""
    return WriteFileTool(workspace)


def edit_file_tool(workspace: Workspace) -> Tool:
    """The edit_file tool: exact string replacement in a file."""
    return EditFileTool(workspace)


def list_files_tool(workspace: Workspace) -> Tool:
    """The list_files tool: files matching a glob."""
    return ListFilesTool(workspace)


def grep_tool(workspace: Workspace) -> Tool:
    """The grep tool: lines matching a regular expression."""
    return GrepTool(workspace)


def run_command_tool(
    workspace: Workspace,
    approve: Approve,
    *,
    max_output_bytes: int = COMMAND_MAX_OUTPUT_BYTES,
) -> Tool:
    """The run_command tool: a shell command, run only if ``approve`` allows it."""
    return RunCommandTool(workspace, approve, max_output_bytes=max_output_bytes)


def todo_write_tool(todos: TodoList) -> Tool:
    """The todo_write tool: replaces ``todos`` whole."""
    return TodoWriteTool(todos)


def coding_tools(
    workspace: Path | Workspace,
    *,
    approve: Approve,
    todos: TodoList,
    context: Context | None = None,
) -> list[Tool]:
    """The coding agent's tools, confined to ``workspace``, in a fixed order (``context``: see
    :func:`read_file_tool`)."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    return [
        read_file_tool(ws, context),
        write_file_tool(ws),
        edit_file_tool(ws),
        list_files_tool(ws),
        grep_tool(ws),
        run_command_tool(ws, approve),
        todo_write_tool(todos),
    ]
