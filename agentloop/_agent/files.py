"""The file tools: read_file, write_file and edit_file, confined to the workspace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop._agent.base import (
    BINARY_SNIFF_BYTES,
    CodingTool,
    decode_line,
    is_binary,
    iter_lines,
    optional_bool,
    optional_int,
    required_str,
)
from agentloop._agent.workspace import Workspace
from agentloop._core.tool import ToolResult

__all__ = ["EditFileTool", "ReadFileTool", "WriteFileTool"]

# Output caps: what one tool result may put into the context window.
READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
READ_MAX_LINE_CHARS = 2000
EDIT_MAX_BYTES = 10_000_000


# --------------------------------------------------------------------------------------------
# read_file

_READ_DESCRIPTION = (
    "Read a text file in the workspace. Output is numbered like `cat -n` "
    f"(at most {READ_MAX_LINES} lines / {READ_MAX_CHARS // 1000} KB per call; use offset and "
    "limit to read more of a long file). Binary files are refused."
)
_READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


class ReadFileTool(CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("read_file", _READ_DESCRIPTION, _READ_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(required_str(tool_input, "path"))
        offset = optional_int(tool_input, "offset", 1, minimum=1)
        limit = optional_int(tool_input, "limit", READ_MAX_LINES, minimum=1)
        rel = self._workspace.relative(path)
        if not path.exists():
            return ToolResult(f"file not found: {rel}", is_error=True)
        if path.is_dir():
            return ToolResult(f"{rel} is a directory; use list_files to see it", is_error=True)
        if is_binary(path):
            return ToolResult(f"{rel} is a binary file; read_file shows text only", is_error=True)

        limit_given = tool_input.get("limit") is not None
        wanted = min(limit, READ_MAX_LINES)
        lines: list[str] = []
        size = 0
        line_no = 0
        capped = False  # stopped by the tool's own caps rather than by the model's limit
        with path.open("rb") as handle:
            numbered = iter_lines(handle, READ_MAX_LINE_CHARS * 4)
            for raw, cut in numbered:
                line_no += 1
                if line_no < offset:
                    continue
                text = decode_line(raw)
                if cut or len(text) > READ_MAX_LINE_CHARS:
                    text = text[:READ_MAX_LINE_CHARS] + " … [line cut]"
                entry = f"{line_no:6d}\t{text}"
                if lines and size + len(entry) + 1 > READ_MAX_CHARS:
                    capped = True
                    break
                lines.append(entry)
                size += len(entry) + 1
                if len(lines) >= wanted:
                    capped = not limit_given or limit > READ_MAX_LINES
                    break
            total = line_no + sum(1 for _ in numbered)
        if total == 0:
            return ToolResult(f"{rel} is empty")
        if offset > total:
            return ToolResult(
                f"offset {offset} is past the end of {rel}, which has {total} lines",
                is_error=True,
            )
        last_shown = offset + len(lines) - 1
        body = "\n".join(lines)
        if last_shown < total:
            why = (
                f"output truncated at {READ_MAX_LINES} lines / {READ_MAX_CHARS // 1000} KB; "
                if capped
                else ""
            )
            body += (
                f"\n[{why}showing lines {offset}-{last_shown} of {total}; "
                f"call read_file with offset={last_shown + 1} to read more]"
            )
        return ToolResult(body)


# --------------------------------------------------------------------------------------------
# write_file

_WRITE_DESCRIPTION = (
    "Create or overwrite a file in the workspace with the given content (UTF-8). Missing parent "
    "directories are created. Prefer edit_file for changing part of an existing file."
)
_WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace."},
        "content": {"type": "string", "description": "The complete new file content."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


class WriteFileTool(CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("write_file", _WRITE_DESCRIPTION, _WRITE_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(required_str(tool_input, "path"))
        content = required_str(tool_input, "content", allow_empty=True)
        rel = self._workspace.relative(path)
        if path == self._workspace.root or path.is_dir():
            return ToolResult(f"{rel} is a directory; give a file path", is_error=True)
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
        state = "overwrote existing file" if existed else "new file"
        return ToolResult(f"Wrote {len(data):,} bytes to {rel} ({state}).")


# --------------------------------------------------------------------------------------------
# edit_file

_EDIT_DESCRIPTION = (
    "Edit a file by exact string replacement: old_string must match the file exactly "
    "(including whitespace and indentation) and occur once, unless replace_all is true. "
    "Include enough surrounding lines to make it unique. Read the file first."
)
_EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path, relative to the workspace."},
        "old_string": {"type": "string", "description": "The exact text to replace."},
        "new_string": {"type": "string", "description": "The replacement text."},
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence (default false).",
        },
    },
    "required": ["path", "old_string", "new_string"],
    "additionalProperties": False,
}


class EditFileTool(CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("edit_file", _EDIT_DESCRIPTION, _EDIT_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(required_str(tool_input, "path"))
        old = required_str(tool_input, "old_string", allow_empty=True)
        new = required_str(tool_input, "new_string", allow_empty=True)
        replace_all = optional_bool(tool_input, "replace_all")
        rel = self._workspace.relative(path)
        if not old:
            return ToolResult(
                "old_string must not be empty; use write_file to create a file", is_error=True
            )
        if old == new:
            return ToolResult(
                "old_string and new_string are identical; nothing to do", is_error=True
            )
        if not path.exists():
            return ToolResult(
                f"file not found: {rel} (use write_file to create a new file)", is_error=True
            )
        if path.is_dir():
            return ToolResult(f"{rel} is a directory; give a file path", is_error=True)
        if path.stat().st_size > EDIT_MAX_BYTES:
            return ToolResult(
                f"{rel} is too large to edit (over {EDIT_MAX_BYTES:,} bytes)", is_error=True
            )
        data = path.read_bytes()
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            return ToolResult(f"{rel} is a binary file; edit_file edits text only", is_error=True)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult(
                f"{rel} is not valid UTF-8 text; edit_file cannot edit it safely", is_error=True
            )
        count = text.count(old)
        if count == 0:
            return ToolResult(
                f"old_string was not found in {rel}; it must match exactly, including "
                "whitespace and indentation (read the file again to copy it)",
                is_error=True,
            )
        if count > 1 and not replace_all:
            return ToolResult(
                f"old_string occurs {count} times in {rel}; include more surrounding context "
                "to make it unique, or set replace_all to true",
                is_error=True,
            )
        first_line = text.count("\n", 0, text.index(old)) + 1
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        path.write_bytes(updated.encode("utf-8"))
        replaced = count if replace_all else 1
        noun = "occurrence" if replaced == 1 else "occurrences"
        return ToolResult(f"Edited {rel}: replaced {replaced} {noun} (first at line {first_line}).")
