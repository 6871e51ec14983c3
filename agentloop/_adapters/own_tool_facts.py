"""The facts of the coding agent's own tools (``read_file``, ``write_file``, ``edit_file``,
``run_command``, ``todo_write``; the searches declare none), read from the results as those
tools write them. Shipped with the other agents' recognizers, so a session the coding agent
recorded is read like any other agent's; the tools themselves declare their facts through
these same functions."""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentloop._adapters.command_output import error_lines, tests_reported
from agentloop._core.values.tool_facts import (
    CommandRan,
    FileTouched,
    Recognizer,
    TodoState,
    ToolCall,
    ToolFact,
    exited,
)

__all__ = [
    "OWN_TOOLS",
    "command_outcome",
    "edit_file_facts",
    "read_file_facts",
    "run_command_facts",
    "todo_write_facts",
    "write_file_facts",
]

_EXIT = re.compile(r"\[exit code (-?\d+)\]\s*$")
_KILLED = re.compile(r"\[killed by (\w+)\]\s*$")
OVERWROTE = "overwrote existing file"
NEW_FILE = "new file"


def _path(call: ToolCall) -> str | None:
    path = call.input.get("path")
    return path if isinstance(path, str) and not call.is_error else None


def read_file_facts(call: ToolCall) -> tuple[ToolFact, ...]:
    if (path := _path(call)) is None:
        return ()
    whole = call.input.get("offset") in (None, 1) and call.input.get("limit") is None
    return (FileTouched(path, "read" if whole else "read_part"),)


def write_file_facts(call: ToolCall) -> tuple[ToolFact, ...]:
    if (path := _path(call)) is None:
        return ()
    if OVERWROTE in call.result:
        return (FileTouched(path, "overwritten"),)
    created = NEW_FILE in call.result or "created successfully" in call.result
    return (FileTouched(path, "created" if created else "written"),)


def edit_file_facts(call: ToolCall) -> tuple[ToolFact, ...]:
    if (path := _path(call)) is None:
        return ()
    return (FileTouched(path, "edited"),)


def command_outcome(text: str, is_error: bool) -> str:
    """How a ``run_command`` call ended, read from the markers it writes last."""
    tail = text.rstrip()[-200:]
    if (match := _EXIT.search(tail)) is not None:
        return exited(int(match[1]))
    if (match := _KILLED.search(tail)) is not None:
        return f"killed by {match[1]}"
    if "[timed out after " in tail:
        return "timed out"
    if text.startswith(("the user declined to run:", "not run:")):
        return "not run"
    return "error" if is_error else "ok"


def run_command_facts(call: ToolCall) -> tuple[ToolFact, ...]:
    command = call.input.get("command")
    if not isinstance(command, str):
        return ()
    outcome = command_outcome(call.result, call.is_error)
    tests = tests_reported(call.result, succeeded=outcome == "exit 0")
    return (CommandRan(command, outcome, error_lines(call.result), tests),)


def todo_write_facts(call: ToolCall) -> tuple[ToolFact, ...]:
    todos = call.input.get("todos")
    if call.is_error or not isinstance(todos, list):
        return ()
    items = tuple(
        (str(t.get("status", "pending")), str(t.get("content", "")))
        for t in todos
        if isinstance(t, Mapping)
    )
    return (TodoState(items),)


def _nothing(call: ToolCall) -> tuple[ToolFact, ...]:
    return ()


OWN_TOOLS: dict[str, Recognizer] = {
    "read_file": read_file_facts,
    "write_file": write_file_facts,
    "edit_file": edit_file_facts,
    "run_command": run_command_facts,
    "todo_write": todo_write_facts,
    "list_files": _nothing,
    "grep": _nothing,
    "search_history": _nothing,
}
"""The coding agent's tools by name (what they write is read back here)."""
