"""The coding agent's tools: files, search, shell and a todo list, confined to one workspace.

Every tool satisfies :class:`agentloop.Tool`. A tool never raises out of ``run``: bad input, a
missing file, a path outside the workspace or a failing command come back as
``ToolResult(..., is_error=True)`` with a message written for the model.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from agentloop._core.tool import Tool, ToolResult
from agentloop._errors import AgentloopError

__all__ = [
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
    "terminal_consent",
    "todo_write_tool",
    "write_file_tool",
]

# Output caps: what one tool result may put into the context window.
READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
READ_MAX_LINE_CHARS = 2000
LIST_MAX_FILES = 1000
GREP_MAX_MATCHES = 200
GREP_MAX_LINE_CHARS = 300
COMMAND_MAX_OUTPUT_BYTES = 30_000
COMMAND_DEFAULT_TIMEOUT = 120.0
COMMAND_MAX_TIMEOUT = 600.0
EDIT_MAX_BYTES = 10_000_000
TODO_MAX_ITEMS = 100

SKIPPED_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules"})

_BINARY_SNIFF_BYTES = 8192
_GREP_SCAN_LINE_BYTES = 65_536
# Once the command itself has exited, how long to keep reading output that background jobs
# (e.g. `server &`) may still hold open before returning.
_EXIT_GRACE_SECONDS = 1.0


# --------------------------------------------------------------------------------------------
# Workspace


class WorkspaceError(AgentloopError):
    """A path outside the workspace, or a workspace root that is not a directory."""


class Workspace:
    """The directory the agent works in; resolves model-given paths and refuses escapes."""

    def __init__(self, root: Path | str) -> None:
        try:
            resolved = Path(root).expanduser().resolve(strict=True)
        except (OSError, RuntimeError) as error:
            raise WorkspaceError(f"workspace {root} does not exist: {error}") from None
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace {root} is not a directory")
        self._root = resolved

    @property
    def root(self) -> Path:
        """The workspace directory, absolute and with symlinks resolved."""
        return self._root

    def contains(self, path: Path) -> bool:
        """Whether ``path`` (after resolving ``..`` and symlinks) lies inside the workspace."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            return False
        return resolved == self._root or resolved.is_relative_to(self._root)

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-resolved path for ``path``; raises :class:`WorkspaceError`
        when it is empty, invalid, or lands outside the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string")
        if "\x00" in path:
            raise WorkspaceError("path must not contain NUL characters")
        # `~` means the home directory to the model; expanding it makes "~/x" an honest refusal
        # (unless the workspace is the home directory) instead of a file literally named "~".
        expanded = os.path.expanduser(path)
        candidate = self._root / expanded
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as error:
            raise WorkspaceError(f"cannot resolve path {path!r}: {error}") from None
        if resolved == self._root or resolved.is_relative_to(self._root):
            return resolved
        lexical = Path(os.path.normpath(candidate))
        if lexical == self._root or lexical.is_relative_to(self._root):
            raise WorkspaceError(
                f"path {path!r} leads through a symlink to {resolved}, which is outside the "
                f"workspace {self._root}; only files inside the workspace can be used"
            )
        raise WorkspaceError(
            f"path {path!r} is outside the workspace {self._root}; only files inside the "
            "workspace can be used (give paths relative to it)"
        )

    def relative(self, path: Path) -> str:
        """``path`` relative to the root in POSIX form (``.`` for the root itself)."""
        try:
            rel = path.relative_to(self._root)
        except ValueError:
            return str(path)
        text = rel.as_posix()
        return text if text else "."


# --------------------------------------------------------------------------------------------
# Shared machinery


class _InputError(Exception):
    """Bad tool input; its message goes back to the model as an error result."""


class _CodingTool(abc.ABC):
    """Turns every failure inside ``_run`` into an error result."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def __init__(self, name: str, description: str, input_schema: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.input_schema = json.loads(json.dumps(input_schema))  # a private deep copy

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        try:
            if not isinstance(tool_input, Mapping):
                raise _InputError("tool input must be a JSON object")
            return self._run(tool_input)
        except (_InputError, WorkspaceError, ToolStateError) as error:
            return ToolResult(str(error), is_error=True)
        except OSError as error:
            return ToolResult(_describe_os_error(error), is_error=True)
        except Exception as error:  # a tool's failure is information for the model, not a crash
            return ToolResult(f"{self.name} failed: {type(error).__name__}: {error}", is_error=True)

    @abc.abstractmethod
    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        """The tool's work; raise ``_InputError`` for bad input."""


def _describe_os_error(error: OSError) -> str:
    reason = error.strerror or str(error) or type(error).__name__
    return f"{reason}: {error.filename}" if error.filename else reason


def _required_str(tool_input: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    if key not in tool_input:
        raise _InputError(f"missing required parameter {key!r}")
    value = tool_input[key]
    if not isinstance(value, str):
        raise _InputError(f"parameter {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise _InputError(f"parameter {key!r} must not be empty")
    return value


def _optional_str(tool_input: Mapping[str, Any], key: str, default: str) -> str:
    value = tool_input.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _InputError(f"parameter {key!r} must be a string, got {type(value).__name__}")
    return value if value.strip() else default


def _optional_bool(tool_input: Mapping[str, Any], key: str) -> bool:
    value = tool_input.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _InputError(f"parameter {key!r} must be true or false, got {value!r}")
    return value


def _optional_int(tool_input: Mapping[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = tool_input.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _InputError(f"parameter {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise _InputError(f"parameter {key!r} must be at least {minimum}, got {value}")
    return value


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\x00" in handle.read(_BINARY_SNIFF_BYTES)


def _iter_lines(handle: IO[bytes], max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Lines of a binary file, each cut to ``max_bytes`` (flag says so) without ever holding
    a longer line in memory."""
    while True:
        chunk = handle.readline(max_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < max_bytes:
            yield chunk, False
            continue
        rest = handle.readline(max_bytes)
        cut = rest not in (b"", b"\n", b"\r\n")
        while rest and not rest.endswith(b"\n"):
            rest = handle.readline(max_bytes)
        yield chunk, cut


def _decode_line(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _expand_braces(pattern: str) -> list[str]:
    """Shell-style brace expansion: ``*.{ts,tsx}`` → ``*.ts``, ``*.tsx``."""
    depth = 0
    start = -1
    for index, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : index]
                options, level, current = [], 0, ""
                for c in inner:
                    if c == "," and level == 0:
                        options.append(current)
                        current = ""
                        continue
                    level += c == "{"
                    level -= c == "}"
                    current += c
                options.append(current)
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[index + 1 :]
                return [x for option in options for x in _expand_braces(head + option + tail)]
    return [pattern]


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            scan = index + 1
            if segment[scan : scan + 1] in ("!", "^"):
                scan += 1
            if segment[scan : scan + 1] == "]":
                scan += 1  # a leading "]" is part of the set
            end = segment.find("]", scan)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[index + 1 : end]
                negate = body[:1] in ("!", "^")
                members = body[1:] if negate else body
                members = re.sub(r"([\\\[\]])", r"\\\1", members)  # literal \ [ ] in the set
                # A negated set still never matches a path separator.
                out.append(("[^/" if negate else "[") + members + "]")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob matched against POSIX relative paths; ``**`` spans directories."""
    alternatives = []
    for expanded in _expand_braces(pattern):
        while expanded.startswith("./"):
            expanded = expanded[2:]
        segments = [s for s in expanded.split("/") if s]
        pieces: list[str] = []
        for position, segment in enumerate(segments):
            last = position == len(segments) - 1
            if segment == "**":
                pieces.append(".*" if last else "(?:[^/]+/)*")
            else:
                pieces.append(_segment_regex(segment) + ("" if last else "/"))
        alternatives.append("".join(pieces))
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")


def _walk_files(base: Path) -> Iterator[Path]:
    """Files under ``base``, skipping tool/dependency directories and not following symlinked
    directories (which could lead outside the workspace or loop)."""
    for directory, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        for filename in filenames:
            yield Path(directory, filename)


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


class _ReadFileTool(_CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("read_file", _READ_DESCRIPTION, _READ_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(_required_str(tool_input, "path"))
        offset = _optional_int(tool_input, "offset", 1, minimum=1)
        limit = _optional_int(tool_input, "limit", READ_MAX_LINES, minimum=1)
        rel = self._workspace.relative(path)
        if not path.exists():
            return ToolResult(f"file not found: {rel}", is_error=True)
        if path.is_dir():
            return ToolResult(f"{rel} is a directory; use list_files to see it", is_error=True)
        if _is_binary(path):
            return ToolResult(f"{rel} is a binary file; read_file shows text only", is_error=True)

        limit_given = tool_input.get("limit") is not None
        wanted = min(limit, READ_MAX_LINES)
        lines: list[str] = []
        size = 0
        line_no = 0
        capped = False  # stopped by the tool's own caps rather than by the model's limit
        with path.open("rb") as handle:
            numbered = _iter_lines(handle, READ_MAX_LINE_CHARS * 4)
            for raw, cut in numbered:
                line_no += 1
                if line_no < offset:
                    continue
                text = _decode_line(raw)
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


class _WriteFileTool(_CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("write_file", _WRITE_DESCRIPTION, _WRITE_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(_required_str(tool_input, "path"))
        content = _required_str(tool_input, "content", allow_empty=True)
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


class _EditFileTool(_CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("edit_file", _EDIT_DESCRIPTION, _EDIT_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(_required_str(tool_input, "path"))
        old = _required_str(tool_input, "old_string", allow_empty=True)
        new = _required_str(tool_input, "new_string", allow_empty=True)
        replace_all = _optional_bool(tool_input, "replace_all")
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
        if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
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


# --------------------------------------------------------------------------------------------
# list_files

_LIST_DESCRIPTION = (
    "List files in the workspace matching a glob pattern, sorted, as paths relative to the "
    "workspace. '**' matches any number of directories: '**/*.py' finds Python files at any "
    "depth, '*.py' only directly in the directory. Skips .git, __pycache__, .venv and "
    f"node_modules. At most {LIST_MAX_FILES} paths."
)
_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob pattern, relative to path (default '**/*': everything).",
        },
        "path": {
            "type": "string",
            "description": "Directory to search, relative to the workspace (default: its root).",
        },
    },
    "additionalProperties": False,
}


class _ListFilesTool(_CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("list_files", _LIST_DESCRIPTION, _LIST_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        pattern = _optional_str(tool_input, "pattern", "**/*").strip()
        base = self._workspace.resolve(_optional_str(tool_input, "path", "."))
        rel_base = self._workspace.relative(base)
        if pattern.startswith(("/", "~")):
            return ToolResult(
                "pattern must be relative; use the path parameter to choose a directory",
                is_error=True,
            )
        if not base.exists():
            return ToolResult(f"directory not found: {rel_base}", is_error=True)
        if not base.is_dir():
            return ToolResult(f"{rel_base} is not a directory", is_error=True)
        regex = _glob_regex(pattern)
        matches = sorted(
            self._workspace.relative(file)
            for file in _walk_files(base)
            if regex.match(file.relative_to(base).as_posix())
        )
        if not matches:
            return ToolResult(f"No files match {pattern!r} in {rel_base}.")
        shown = matches[:LIST_MAX_FILES]
        body = "\n".join(shown)
        if len(matches) > len(shown):
            body += (
                f"\n[showing the first {len(shown)} of {len(matches)} files; "
                "narrow the pattern or path]"
            )
        return ToolResult(body)


# --------------------------------------------------------------------------------------------
# grep

_GREP_DESCRIPTION = (
    "Search file contents with a regular expression (Python syntax). Prints `path:line: text` "
    "for each matching line, sorted by path. Optional path (file or directory) and glob filter "
    "('*.py' matches file names at any depth; 'src/**/*.ts' matches paths). Skips binary files "
    f"and .git, __pycache__, .venv, node_modules. At most {GREP_MAX_MATCHES} matches."
)
_GREP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Regular expression to search for."},
        "path": {
            "type": "string",
            "description": "File or directory to search, relative to the workspace (default: "
            "its root).",
        },
        "glob": {"type": "string", "description": "Only search files matching this glob."},
        "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


class _GrepTool(_CodingTool):
    def __init__(self, workspace: Workspace) -> None:
        super().__init__("grep", _GREP_DESCRIPTION, _GREP_SCHEMA)
        self._workspace = workspace

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        pattern = _required_str(tool_input, "pattern")
        base = self._workspace.resolve(_optional_str(tool_input, "path", "."))
        glob = _optional_str(tool_input, "glob", "").strip()
        flags = re.IGNORECASE if _optional_bool(tool_input, "case_insensitive") else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as error:
            return ToolResult(f"invalid regular expression {pattern!r}: {error}", is_error=True)
        rel_base = self._workspace.relative(base)
        if not base.exists():
            return ToolResult(f"path not found: {rel_base}", is_error=True)

        if base.is_file():
            files = [base]
        else:
            name_only = "/" not in glob
            glob_regex = _glob_regex(glob) if glob else None

            def wanted(file: Path) -> bool:
                if glob_regex is None:
                    return True
                subject = file.name if name_only else file.relative_to(base).as_posix()
                return glob_regex.match(subject) is not None

            files = sorted((f for f in _walk_files(base) if wanted(f)), key=lambda f: f.as_posix())

        results: list[str] = []
        for file in files:
            # A symlinked file may point outside the workspace: never read it.
            if not self._workspace.contains(file) or not file.is_file():
                continue
            try:
                if _is_binary(file):
                    continue
                with file.open("rb") as handle:
                    for line_no, (raw, _cut) in enumerate(
                        _iter_lines(handle, _GREP_SCAN_LINE_BYTES), start=1
                    ):
                        text = _decode_line(raw)
                        found = regex.search(text)
                        if found is None:
                            continue
                        if len(results) >= GREP_MAX_MATCHES:
                            results.append(
                                f"[stopped after {GREP_MAX_MATCHES} matches; narrow the "
                                "pattern, path or glob]"
                            )
                            return ToolResult("\n".join(results))
                        results.append(
                            f"{self._workspace.relative(file)}:{line_no}: "
                            f"{_excerpt(text, found.start())}"
                        )
            except OSError:
                continue  # unreadable files are skipped, as grep -s would
        if not results:
            where = f" in files matching {glob!r}" if glob and not base.is_file() else ""
            return ToolResult(f"No matches for {pattern!r} in {rel_base}{where}.")
        return ToolResult("\n".join(results))


def _excerpt(text: str, match_start: int) -> str:
    text = text.strip()
    if len(text) <= GREP_MAX_LINE_CHARS:
        return text
    start = max(0, min(match_start - 100, len(text) - GREP_MAX_LINE_CHARS))
    piece = text[start : start + GREP_MAX_LINE_CHARS]
    more = start + GREP_MAX_LINE_CHARS < len(text)
    return ("…" if start > 0 else "") + piece + ("…" if more else "")


# --------------------------------------------------------------------------------------------
# run_command and consent


def always_allow(command: str) -> bool:
    """Consent policy that allows every command (``--yes``)."""
    return True


class _NeverAllow:
    """Consent policy for when nobody can be asked (stdin is not a terminal, no ``--yes``)."""

    decline_message = (
        "not run: shell commands need the user's consent, and nobody can be asked here (no "
        "terminal). The user can allow commands by running agentloop with --yes or in a "
        "terminal. Command: {command}"
    )

    def __call__(self, command: str) -> bool:
        return False


never_allow: Callable[[str], bool] = _NeverAllow()
"""Consent policy that refuses every command, telling the model it needs ``--yes`` or a terminal."""


class _TerminalConsent:
    def __init__(self, input_fn: Callable[[str], str], output: TextIO | None) -> None:
        self._input_fn = input_fn
        self._output = output
        self._always = False

    def __call__(self, command: str) -> bool:
        if self._always:
            return True
        output = self._output if self._output is not None else sys.stderr
        output.write(f"Run `{command}`? [y/N/a(lways)] ")
        output.flush()
        try:
            answer = self._input_fn("").strip().lower()
        except EOFError:
            output.write("\n")
            return False
        if answer in ("a", "always"):
            self._always = True
            return True
        return answer in ("y", "yes")


def terminal_consent(
    input_fn: Callable[[str], str] = input, output: TextIO | None = None
) -> Callable[[str], bool]:
    """Consent policy asking ``Run `cmd`? [y/N/a(lways)]`` on ``output`` (default stderr).

    "y" allows this command, "a" allows it and every later one from this policy, anything else
    (including an empty answer or end of input) declines.
    """
    return _TerminalConsent(input_fn, output)


_RUN_DESCRIPTION = (
    "Run a shell command with bash in the workspace root (no stdin; the user may be asked to "
    "approve it). Returns stdout and stderr combined, truncated in the middle if long, and the "
    f"exit code. Timeout in seconds: default {COMMAND_DEFAULT_TIMEOUT:g}, max "
    f"{COMMAND_MAX_TIMEOUT:g}; on timeout the command and its children are killed."
)
_RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": COMMAND_MAX_TIMEOUT,
            "description": f"Seconds before the command is killed (default "
            f"{COMMAND_DEFAULT_TIMEOUT:g}).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class _HeadTail:
    """Keeps the first and last ``limit // 2`` bytes of a stream of any length."""

    def __init__(self, limit: int) -> None:
        self._half = max(1, limit // 2)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > self._half:
                del self._tail[: len(self._tail) - self._half]

    def text(self) -> str:
        kept = len(self._head) + len(self._tail)
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if kept >= self.total:
            return head + tail
        return f"{head}\n… [{self.total - kept:,} bytes of output omitted] …\n{tail}"


class _RunCommandTool(_CodingTool):
    def __init__(
        self,
        workspace: Workspace,
        approve: Callable[[str], bool],
        *,
        max_output_bytes: int = COMMAND_MAX_OUTPUT_BYTES,
    ) -> None:
        super().__init__("run_command", _RUN_DESCRIPTION, _RUN_SCHEMA)
        self._workspace = workspace
        self._approve = approve
        self._max_output_bytes = max_output_bytes

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        command = _required_str(tool_input, "command")
        timeout = tool_input.get("timeout")
        if timeout is None:
            timeout = COMMAND_DEFAULT_TIMEOUT
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise _InputError(f"parameter 'timeout' must be a number of seconds, got {timeout!r}")
        if not 0 < timeout <= COMMAND_MAX_TIMEOUT:
            raise _InputError(
                f"parameter 'timeout' must be more than 0 and at most {COMMAND_MAX_TIMEOUT:g} "
                f"seconds, got {timeout:g}"
            )
        try:
            approved = self._approve(command)
        except Exception as error:
            return ToolResult(
                f"not run: could not ask the user for consent ({error}). Command: {command}",
                is_error=True,
            )
        if not approved:
            message = getattr(self._approve, "decline_message", None)
            if isinstance(message, str):
                return ToolResult(message.format(command=command), is_error=True)
            return ToolResult(f"the user declined to run: {command}", is_error=True)
        return self._execute(command, float(timeout))

    def _execute(self, command: str, timeout: float) -> ToolResult:
        shell = shutil.which("bash") or "/bin/sh"
        # Pagers and prompts would wait forever for a terminal that is not there.
        env = {**os.environ, "PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
        process = subprocess.Popen(
            [shell, "-c", command],
            cwd=self._workspace.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout can kill all of it
            env=env,
        )
        assert process.stdout is not None
        output = _HeadTail(self._max_output_bytes)
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout
        exit_seen: float | None = None
        timed_out = False
        abandoned = False
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                while True:
                    now = time.monotonic()
                    if now >= deadline:
                        timed_out = process.poll() is None
                        abandoned = not timed_out
                        break
                    if exit_seen is None and process.poll() is not None:
                        exit_seen = now
                    if exit_seen is not None and now - exit_seen >= _EXIT_GRACE_SECONDS:
                        abandoned = True  # background jobs still hold the output open
                        break
                    wait = min(deadline - now, 0.2)
                    if selector.select(wait):
                        chunk = os.read(fd, 65_536)
                        if not chunk:
                            break
                        output.add(chunk)
            if not timed_out:
                try:
                    process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
            if timed_out:
                _kill_group(process)
                _drain(fd, output)
        finally:
            if process.poll() is None:
                _kill_group(process)
            process.stdout.close()

        body = output.text().rstrip("\n") or "(no output)"
        if timed_out:
            return ToolResult(
                f"{body}\n[timed out after {timeout:g} s: the command and its process group were "
                "killed]",
                is_error=True,
            )
        code = process.returncode
        note = (
            "\n[stopped reading output after the command exited: background processes still "
            "hold it open]"
            if abandoned
            else ""
        )
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return ToolResult(f"{body}{note}\n[killed by {name}]", is_error=True)
        return ToolResult(f"{body}{note}\n[exit code {code}]", is_error=code != 0)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _drain(fd: int, output: _HeadTail) -> None:
    """Collect what the killed command left in the pipe, without waiting on escaped children."""
    deadline = time.monotonic() + 0.5
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and selector.select(0.05):
            chunk = os.read(fd, 65_536)
            if not chunk:
                return
            output.add(chunk)


# --------------------------------------------------------------------------------------------
# Todo list

TodoStatus = Literal["pending", "in_progress", "completed"]


class ToolStateError(AgentloopError, ValueError):
    """A todo list, or saved tool state, that does not have the expected shape."""


class TodoItem(BaseModel):
    """One todo: what to do, its status, and an optional id the model may use."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    content: str
    status: TodoStatus
    id: str | None = None

    @field_validator("content")
    @classmethod
    def _one_line(cls, value: str) -> str:
        # Rendered as one markdown list item, so newlines would break the list.
        text = " ".join(value.split())
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


class _TodoWriteTool(_CodingTool):
    def __init__(self, todos: TodoList) -> None:
        super().__init__("todo_write", _TODO_DESCRIPTION, _TODO_SCHEMA)
        self._todos = todos

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        if "todos" not in tool_input:
            raise _InputError("missing required parameter 'todos'")
        self._todos.replace(_parse_todos(tool_input["todos"], "todos"))
        return ToolResult(self._todos.render_markdown())


# --------------------------------------------------------------------------------------------
# Tool history


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call as the history remembers it."""

    name: str
    ok: bool
    summary: str


_SUMMARY_KEYS = ("command", "path", "pattern", "glob")
_SUMMARY_CHARS = 80


def _summarize_input(tool_input: Mapping[str, Any]) -> str:
    parts = [str(tool_input[key]) for key in _SUMMARY_KEYS if isinstance(tool_input.get(key), str)]
    if not parts and isinstance(tool_input.get("todos"), list):
        parts = [f"{len(tool_input['todos'])} items"]
    if not parts:
        parts = [json.dumps(dict(tool_input), sort_keys=True, ensure_ascii=False, default=str)]
    text = " ".join(" ".join(parts).split()).replace("`", "'")
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


class ToolHistory:
    """The most recent tool calls, for a preserved-state hook ("what was I just doing")."""

    def __init__(self, limit: int = 10) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._records: deque[ToolCallRecord] = deque(maxlen=limit)

    @property
    def records(self) -> tuple[ToolCallRecord, ...]:
        return tuple(self._records)

    def record(self, name: str, tool_input: Mapping[str, Any], *, is_error: bool) -> None:
        """Remember one call; the input is reduced to a short one-line summary."""
        self._records.append(ToolCallRecord(name, not is_error, _summarize_input(tool_input)))

    def render_markdown(self) -> str:
        """The recent calls as markdown, or ``No tool calls yet.``."""
        if not self._records:
            return "No tool calls yet."
        lines = [f"## Last {len(self._records)} tool calls (oldest first)"]
        for record in self._records:
            status = "ok" if record.ok else "error"
            lines.append(f"- {record.name} `{record.summary}` → {status}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [{"name": r.name, "ok": r.ok, "summary": r.summary} for r in self._records]
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, limit: int = 10) -> ToolHistory:
        history = cls(limit)
        calls = data.get("calls") if isinstance(data, Mapping) else None
        if not isinstance(calls, list):
            raise ToolStateError("saved tool history must be an object with a 'calls' list")
        for call in calls:
            if not (
                isinstance(call, Mapping)
                and isinstance(call.get("name"), str)
                and isinstance(call.get("ok"), bool)
                and isinstance(call.get("summary"), str)
            ):
                raise ToolStateError(f"malformed saved tool history entry: {call!r}")
            history._records.append(ToolCallRecord(call["name"], call["ok"], call["summary"]))
        return history


# --------------------------------------------------------------------------------------------
# Constructors


def read_file_tool(workspace: Workspace) -> Tool:
    return _ReadFileTool(workspace)


def write_file_tool(workspace: Workspace) -> Tool:
    return _WriteFileTool(workspace)


def edit_file_tool(workspace: Workspace) -> Tool:
    return _EditFileTool(workspace)


def list_files_tool(workspace: Workspace) -> Tool:
    return _ListFilesTool(workspace)


def grep_tool(workspace: Workspace) -> Tool:
    return _GrepTool(workspace)


def run_command_tool(
    workspace: Workspace,
    approve: Callable[[str], bool],
    *,
    max_output_bytes: int = COMMAND_MAX_OUTPUT_BYTES,
) -> Tool:
    return _RunCommandTool(workspace, approve, max_output_bytes=max_output_bytes)


def todo_write_tool(todos: TodoList) -> Tool:
    return _TodoWriteTool(todos)


def coding_tools(
    workspace: Path | Workspace, *, approve: Callable[[str], bool], todos: TodoList
) -> list[Tool]:
    """The coding agent's tools, confined to ``workspace``, in a fixed order."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    return [
        read_file_tool(ws),
        write_file_tool(ws),
        edit_file_tool(ws),
        list_files_tool(ws),
        grep_tool(ws),
        run_command_tool(ws, approve),
        todo_write_tool(todos),
    ]
