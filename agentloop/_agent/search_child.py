"""The child process of a search off the main thread (see :mod:`agentloop._agent.limited`):
``python -m agentloop._agent.search_child`` runs one grep or list_files and answers."""

from __future__ import annotations

from typing import Any

from agentloop._agent.limited import serve
from agentloop._agent.search_tools import GrepTool, ListFilesTool
from agentloop._agent.workspace import Workspace
from agentloop._core.values.tool import ToolResult


def search(tool: str, root: str, tool_input: dict[str, Any]) -> ToolResult:
    """Run ``tool`` here, without a child of its own (redacted here, and again by the parent)."""
    kind = GrepTool if tool == "grep" else ListFilesTool
    return kind(Workspace(root), limited=False).run(tool_input)


if __name__ == "__main__":
    serve(search)
