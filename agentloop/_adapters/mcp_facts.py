"""The official MCP servers' tools, as Claude Code and others name them:
``mcp__<server>__<tool>``, whatever key the user gave the server in their configuration.

Filesystem (``@modelcontextprotocol/server-filesystem``): ``read_text_file``/``read_file``
(``head``/``tail``: a part), ``read_media_file``, ``read_multiple_files`` (``paths``; a file that
failed is listed ``<path>: Error - …``), ``write_file``, ``edit_file`` (``dryRun``: a preview,
nothing written), ``move_file`` (``source``, ``destination``); listings and searches keep
nothing. Git (``mcp-server-git``, every tool takes ``repo_path``): see :func:`mcp_git`. Errors
are thrown by the server and arrive flagged, so the error flag is trusted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from agentloop._core.values.tool_facts import (
    CommandRan,
    FileAction,
    FileTouched,
    ToolCall,
    ToolFact,
)

__all__ = ["mcp_filesystem", "mcp_git", "mcp_tool"]

Facts = tuple[ToolFact, ...] | None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _partial(data: Mapping[str, Any]) -> bool:
    return data.get("head") is not None or data.get("tail") is not None


def _file(call: ToolCall, action: FileAction) -> Facts:
    path = _text(call.input.get("path"))
    if path is None:
        return None
    return () if call.is_error else (FileTouched(path, action),)


_MCP_READ = ("read_text_file", "read_file", "read_media_file")
_MCP_KNOWN_NOTHING = (
    "create_directory",  # a directory is no file; the files written into it carry the facts
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
)
_GIT_READS = frozenset(
    ("git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_log", "git_show")
) | {"git_branch"}


def mcp_tool(name: str) -> str | None:
    """The tool's own name in ``mcp__<server>__<tool>`` (``None``: not an MCP tool's name)."""
    server, sep, tool = name.removeprefix("mcp__").rpartition("__")
    return tool if name.startswith("mcp__") and sep and server else None


def mcp_filesystem(call: ToolCall) -> Facts:
    tool, data = mcp_tool(call.name), call.input
    if tool in _MCP_READ:
        return _file(call, "read_part" if _partial(data) else "read")
    if tool == "read_multiple_files" and isinstance(named := data.get("paths"), list):
        if call.is_error:
            return ()
        failed = set(re.findall(r"^(.+?): Error - ", call.result, re.M))
        return tuple(
            FileTouched(p, "read") for p in named if isinstance(p, str) and p not in failed
        )
    if tool == "write_file":
        return _file(call, "written")
    if tool == "edit_file" and "edits" in data:
        return () if data.get("dryRun") else _file(call, "edited")
    if tool == "move_file":
        source, target = _text(data.get("source")), _text(data.get("destination"))
        if source is None or target is None:
            return None
        if call.is_error:
            return ()
        return (FileTouched(source, "deleted"), FileTouched(target, "written"))
    if tool in _MCP_KNOWN_NOTHING and ("path" in data or not data):
        return ()
    return None


def _git_line(tool: str, data: Mapping[str, Any]) -> list[str] | None:
    """The git command line an MCP git tool that changes the repository stands for."""
    files = data.get("files")
    if tool == "git_add" and isinstance(files, list):
        return ["git", "add", *map(str, files)]
    if tool == "git_commit" and (message := _text(data.get("message"))) is not None:
        return ["git", "commit", "-m", message]
    if tool == "git_reset":
        return ["git", "reset"]
    if tool == "git_checkout" and (branch := _text(data.get("branch_name"))) is not None:
        return ["git", "checkout", branch]
    if tool == "git_create_branch" and (branch := _text(data.get("branch_name"))) is not None:
        base = _text(data.get("base_branch"))
        return ["git", "branch", branch, *([base] if base else [])]
    return None


def mcp_git(call: ToolCall) -> Facts:
    """mcp-server-git: a change (add, commit, reset, checkout, a new branch) is the git command
    it stands for; a query (status, diff, log, show, branch) is nothing to keep. Staging names
    no file change, so ``git_add`` touches no file."""
    tool = mcp_tool(call.name)
    if tool is None or "repo_path" not in call.input:
        return None
    if tool in _GIT_READS:
        return ()
    line = _git_line(tool, call.input)
    if line is None:
        return None
    return (CommandRan(shlex.join(line), "error" if call.is_error else "ok"),)
