"""The search tools: list_files (glob) and grep (regex), and the glob engine they share."""

from __future__ import annotations

import abc
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from agentloop._agent.base import (
    BINARY_SNIFF_BYTES,
    CodingTool,
    InputError,
    decode_line,
    is_binary_data,
    iter_lines,
    optional_bool,
    optional_str,
    required_str,
)
from agentloop._agent.files import not_regular
from agentloop._agent.ignore_files import DirectoryRules, rules_for
from agentloop._agent.limited import SEARCH_MAX_TIMEOUT, SEARCH_TIMEOUT, run_limited, time_limit
from agentloop._agent.secrets import redact
from agentloop._agent.workspace import Workspace, WorkspaceError
from agentloop._core.values.tool import ToolResult

__all__ = ["GrepTool", "ListFilesTool"]

# Output caps: what one tool result may put into the context window.
LIST_MAX_FILES = 1000
GREP_MAX_MATCHES = 200
GREP_MAX_LINE_CHARS = 300

SKIPPED_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules"})

_GREP_SCAN_LINE_BYTES = 65_536
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in the tree must not block the search


# --------------------------------------------------------------------------------------------
# Glob engine


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


def _walk_files(workspace: Workspace, base: Path) -> Iterator[Path]:
    """Files under ``base``, skipping tool/dependency directories and what ``.gitignore`` and
    ``.ignore`` files exclude (as ripgrep does: :mod:`.ignore_files`), and never entering a
    symlinked directory (which could lead outside the workspace or loop). The walk holds a
    descriptor of each directory it lists (``os.fwalk``), so a directory swapped for a symlink
    while the walk runs is skipped, not followed; ignore files are read through it too."""
    base_fd = workspace.open_resolved(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    top = rules_for(workspace.root, base)
    # A directory's rules are made when the walk enters it, from its parent's and the ignore
    # files read through the walk's own descriptor of it.
    pending: dict[str, tuple[DirectoryRules, str]] = {}
    try:
        for directory, dirnames, filenames, fd in os.fwalk(
            ".", dir_fd=base_fd, follow_symlinks=False
        ):
            parent = pending.pop(directory, None)
            here = top if directory == "." else None
            if parent is not None:
                here = parent[0].child(parent[1], fd)
            kept = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            if here is not None:
                kept = [d for d in kept if not here.ignored(d, is_dir=True)]
                pending.update((f"{directory}/{name}", (here, name)) for name in kept)
            dirnames[:] = kept
            for filename in filenames:
                if here is None or not here.ignored(filename, is_dir=False):
                    yield base / directory / filename
    finally:
        os.close(base_fd)


# --------------------------------------------------------------------------------------------
# list_files

_LIST_DESCRIPTION = (
    "List files in the workspace matching a glob pattern, sorted, as paths relative to the "
    "workspace. '**' matches any number of directories: '**/*.py' finds Python files at any "
    "depth, '*.py' only directly in the directory. Skips .git, __pycache__, .venv, "
    "node_modules and what .gitignore and .ignore files exclude (as ripgrep does; give an "
    f"ignored directory as path to list it). At most {LIST_MAX_FILES} paths."
)
_TIMEOUT_SCHEMA: dict[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": SEARCH_MAX_TIMEOUT,
    "description": f"Seconds before the search is stopped (default {SEARCH_TIMEOUT:g}).",
}
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
        "timeout": _TIMEOUT_SCHEMA,
    },
    "additionalProperties": False,
}


class _LimitedSearch(CodingTool):
    """A search that runs in a child process with a time limit (:mod:`.limited`) unless
    ``limited`` is false (the child itself, or where no child can be started)."""

    def __init__(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        workspace: Workspace,
        *,
        limited: bool = True,
    ) -> None:
        super().__init__(name, description, schema)
        self._workspace = workspace
        self._limited = limited

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        try:
            timeout = time_limit(tool_input)
        except ValueError as error:
            raise InputError(str(error)) from None
        if not self._limited:
            return self._search(tool_input)
        root = self._workspace.root
        return run_limited(self.name, root, tool_input, timeout, lambda: self._search(tool_input))

    @abc.abstractmethod
    def _search(self, tool_input: Mapping[str, Any]) -> ToolResult:
        """The search itself, in whichever process runs it (each tool its own)."""


class ListFilesTool(_LimitedSearch):
    def __init__(self, workspace: Workspace, *, limited: bool = True) -> None:
        super().__init__("list_files", _LIST_DESCRIPTION, _LIST_SCHEMA, workspace, limited=limited)

    def _search(self, tool_input: Mapping[str, Any]) -> ToolResult:
        pattern = optional_str(tool_input, "pattern", "**/*").strip()
        base = self._workspace.resolve(optional_str(tool_input, "path", "."))
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
            for file in _walk_files(self._workspace, base)
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
    "and .git, __pycache__, .venv, node_modules and what .gitignore and .ignore files exclude "
    "(as ripgrep does; give an ignored file or directory as path to search it). At most "
    f"{GREP_MAX_MATCHES} matches."
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
        "timeout": _TIMEOUT_SCHEMA,
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


class GrepTool(_LimitedSearch):
    def __init__(self, workspace: Workspace, *, limited: bool = True) -> None:
        super().__init__("grep", _GREP_DESCRIPTION, _GREP_SCHEMA, workspace, limited=limited)

    def _search(self, tool_input: Mapping[str, Any]) -> ToolResult:
        pattern = required_str(tool_input, "pattern")
        base = self._workspace.resolve(optional_str(tool_input, "path", "."))
        glob = optional_str(tool_input, "glob", "").strip()
        flags = re.IGNORECASE if optional_bool(tool_input, "case_insensitive") else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as error:
            return ToolResult(f"invalid regular expression {pattern!r}: {error}", is_error=True)
        rel_base = self._workspace.relative(base)
        if not base.exists():
            return ToolResult(f"path not found: {rel_base}", is_error=True)

        mode = base.stat().st_mode
        if stat.S_ISREG(mode):
            files = [base]
        elif not stat.S_ISDIR(mode):
            return not_regular(rel_base, mode, "grep")
        else:
            name_only = "/" not in glob
            glob_regex = _glob_regex(glob) if glob else None

            def wanted(file: Path) -> bool:
                if glob_regex is None:
                    return True
                subject = file.name if name_only else file.relative_to(base).as_posix()
                return glob_regex.match(subject) is not None

            walk = _walk_files(self._workspace, base)
            files = sorted((f for f in walk if wanted(f)), key=lambda f: f.as_posix())

        results: list[str] = []
        for file in files:
            handle = self._open_text(file)
            if handle is None:
                continue
            with handle:
                for line_no, (raw, _cut) in enumerate(
                    iter_lines(handle, _GREP_SCAN_LINE_BYTES), start=1
                ):
                    text = decode_line(raw)
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
                        f"{self._workspace.relative(file)}:{line_no}: {_excerpt(text, found)}"
                    )
        if not results:
            where = f" in files matching {glob!r}" if glob and not base.is_file() else ""
            return ToolResult(f"No matches for {pattern!r} in {rel_base}{where}.")
        return ToolResult("\n".join(results))

    def _open_text(self, file: Path) -> IO[bytes] | None:
        """``file`` opened for reading if it is a regular text file inside the workspace (a
        symlink is followed only when it stays inside), else None: grep skips it, as grep -s
        would skip what it cannot read."""
        try:
            resolved = self._workspace.resolve(str(file))
            fd = self._workspace.open_resolved(resolved, os.O_RDONLY | _NONBLOCK)
        except (WorkspaceError, OSError):
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            handle = os.fdopen(fd, "rb")
        except OSError:
            os.close(fd)
            return None
        if is_binary_data(handle.read(BINARY_SNIFF_BYTES)):
            handle.close()
            return None
        handle.seek(0)
        return handle


def _excerpt(text: str, found: re.Match[str]) -> str:
    """The line, or the part of it around the match when it is long (redacted before it is
    cut: a secret across the cut is never half shown)."""
    match_start = found.start()
    if len(text) > GREP_MAX_LINE_CHARS:
        redacted = redact(text)
        if redacted != text:
            again = found.re.search(redacted)
            match_start = again.start() if again is not None else min(match_start, len(redacted))
            text = redacted
    text = text.strip()
    if len(text) <= GREP_MAX_LINE_CHARS:
        return text
    start = max(0, min(match_start - 100, len(text) - GREP_MAX_LINE_CHARS))
    piece = text[start : start + GREP_MAX_LINE_CHARS]
    more = start + GREP_MAX_LINE_CHARS < len(text)
    return ("…" if start > 0 else "") + piece + ("…" if more else "")
