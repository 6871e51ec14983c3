"""The file tools: read_file, write_file and edit_file, confined to the workspace.

Every file is opened through :meth:`Workspace.open_resolved` (a walk from the workspace root
that follows no symlink), and what is checked afterwards is checked on the open descriptor, so
nothing can be swapped between the check and the use. Only regular files are read or written:
a FIFO, socket or device is refused at once instead of blocking the agent.

Hard links: a file with more than one link is never written through (write_file and edit_file
refuse it and say so), because the other name may be outside the workspace and would change
too. Reading one is allowed: its name is inside the workspace, whoever made the link chose to
put its content there, and package managers (pnpm, conda, Nix) fill projects with hard links
that the agent must be able to read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from agentloop._adapters.own_tool_facts import edit_file_facts, read_file_facts, write_file_facts
from agentloop._agent.base import (
    BINARY_SNIFF_BYTES,
    CodingTool,
    decode_line,
    is_binary_data,
    iter_lines,
    optional_bool,
    optional_int,
    required_str,
)
from agentloop._agent.file_diff import DIFF_MAX_CHARS, FileChange, compact_diff
from agentloop._agent.secrets import redact
from agentloop._agent.workspace import Workspace
from agentloop._core.values.blocks import is_text, is_tool_result, tool_result_text
from agentloop._core.values.messages import Message
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall, ToolFact

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # so opening a FIFO never waits for its other end

__all__ = [
    "EditFileTool",
    "ReadFileTool",
    "WriteFileTool",
    "hard_link_refusal",
    "not_regular",
    "read_all",
    "write_all",
]

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


Context = Callable[[], Sequence[Message]]
"""What the model sees now: the conversation a read's result would join."""

UNCHANGED = (
    "{path} is unchanged since you read it ({when}): the same content is in your context "
    "above, so it was not sent again. Read it there."
)


class ReadFileTool(CodingTool):
    """``context`` (optional): the conversation as the model sees it. A read whose result
    would be exactly a read result still in it (same file content, same lines) answers
    :data:`UNCHANGED` instead of sending the content again; a changed file, other lines, or a
    read that left the context (compacted, pruned) sends the content."""

    def __init__(self, workspace: Workspace, context: Context | None = None) -> None:
        super().__init__("read_file", _READ_DESCRIPTION, _READ_SCHEMA)
        self._workspace = workspace
        self._context = context
        self._sent: dict[str, datetime] = {}
        """When this tool sent each result (by its text's digest), for "when"."""

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return read_file_facts(call)

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        result = super().run(tool_input)
        if result.is_error or self._context is None:
            return result
        digest = hashlib.sha256(result.content.encode("utf-8", "surrogatepass")).hexdigest()
        path = self._workspace.relative(self._workspace.resolve(str(tool_input.get("path"))))
        if not _in_context(result.content, path, self._context()):
            self._sent[digest] = datetime.now(UTC)
            return result
        sent = self._sent.get(digest)
        when = f"at {sent:%H:%M:%S} UTC" if sent else "earlier in this conversation"
        return ToolResult(UNCHANGED.format(path=path, when=when))

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(required_str(tool_input, "path"))
        offset = optional_int(tool_input, "offset", 1, minimum=1)
        limit = optional_int(tool_input, "limit", READ_MAX_LINES, minimum=1)
        rel = self._workspace.relative(path)
        try:
            fd = self._workspace.open_resolved(path, os.O_RDONLY | _NONBLOCK)
        except FileNotFoundError:
            return ToolResult(f"file not found: {rel}", is_error=True)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                return ToolResult(f"{rel} is a directory; use list_files to see it", is_error=True)
            return not_regular(rel, mode, "read_file")
        with os.fdopen(fd, "rb") as handle:
            if is_binary_data(handle.read(BINARY_SNIFF_BYTES)):
                return ToolResult(
                    f"{rel} is a binary file; read_file shows text only", is_error=True
                )
            handle.seek(0)
            return self._numbered(handle, rel, tool_input, offset, limit)

    def _numbered(
        self, handle: IO[bytes], rel: str, tool_input: Mapping[str, Any], offset: int, limit: int
    ) -> ToolResult:
        limit_given = tool_input.get("limit") is not None
        wanted = min(limit, READ_MAX_LINES)
        lines: list[str] = []
        size = 0
        line_no = 0
        capped = False  # stopped by the tool's own caps rather than by the model's limit
        numbered = iter_lines(handle, READ_MAX_LINE_CHARS * 4)
        for raw, cut in numbered:
            line_no += 1
            if line_no < offset:
                continue
            text = decode_line(raw)
            if cut or len(text) > READ_MAX_LINE_CHARS:  # redacted before the cut, not after
                text = redact(text)[:READ_MAX_LINE_CHARS] + " … [line cut]"
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
                f"offset {offset} is past the end of {rel}, which has {total} "
                f"line{'' if total == 1 else 's'}",
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

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return write_file_facts(call)

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        path = self._workspace.resolve(required_str(tool_input, "path"))
        content = required_str(tool_input, "content", allow_empty=True)
        rel = self._workspace.relative(path)
        if path == self._workspace.root:
            return ToolResult(f"{rel} is a directory; give a file path", is_error=True)
        data = content.encode("utf-8")
        before = self._before(path)
        try:
            fd, existed = self._open(path)
        except IsADirectoryError:
            return ToolResult(f"{rel} is a directory; give a file path", is_error=True)
        except OSError as error:
            if error.errno == errno.ENXIO:  # a FIFO nobody reads
                return not_regular(rel, stat.S_IFIFO, "write_file")
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return not_regular(rel, info.st_mode, "write_file")
            if info.st_nlink > 1:
                return hard_link_refusal(rel, info.st_nlink, "write_file")
            os.ftruncate(fd, 0)
            write_all(fd, data)
        finally:
            os.close(fd)
        state = "overwrote existing file" if existed else "new file"
        return FileChange(
            f"Wrote {len(data):,} bytes to {rel} ({state}).",
            # An existing file that is not text (or vanished meanwhile): no diff to show.
            diff="" if existed and before is None else compact_diff(before, content),
        )

    def _before(self, path: Path) -> str | None:
        """The file's text before it is written, for the diff shown to the user (None: none,
        or not text worth a diff). Never blocks, never follows a symlink."""
        try:
            fd = self._workspace.open_resolved(path, os.O_RDONLY | _NONBLOCK)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = read_all(fd, DIFF_MAX_CHARS + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if is_binary_data(data[:BINARY_SNIFF_BYTES]):
            return None
        return data.decode("utf-8", "replace")

    def _open(self, path: Path) -> tuple[int, bool]:
        """A descriptor to write ``path`` (not truncated yet), and whether the file existed."""
        flags = os.O_WRONLY | _NONBLOCK
        for _attempt in range(3):
            try:
                return self._workspace.open_resolved(path, flags, make_parents=True), True
            except FileNotFoundError:
                pass
            try:
                created = flags | os.O_CREAT | os.O_EXCL
                return self._workspace.open_resolved(path, created, make_parents=True), False
            except FileExistsError:
                continue  # made meanwhile: open the one that exists
        raise FileExistsError(errno.EEXIST, "the file keeps appearing and disappearing", str(path))


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

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return edit_file_facts(call)

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
        try:
            fd = self._workspace.open_resolved(path, os.O_RDWR | _NONBLOCK)
        except FileNotFoundError:
            return ToolResult(
                f"file not found: {rel} (use write_file to create a new file)", is_error=True
            )
        except IsADirectoryError:
            return ToolResult(f"{rel} is a directory; give a file path", is_error=True)
        except OSError as error:
            if error.errno == errno.ENXIO:
                return not_regular(rel, stat.S_IFIFO, "edit_file")
            raise
        try:
            return self._edit(fd, rel, old, new, replace_all)
        finally:
            os.close(fd)

    def _edit(self, fd: int, rel: str, old: str, new: str, replace_all: bool) -> ToolResult:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return not_regular(rel, info.st_mode, "edit_file")
        if info.st_nlink > 1:
            return hard_link_refusal(rel, info.st_nlink, "edit_file")
        if info.st_size > EDIT_MAX_BYTES:
            return ToolResult(
                f"{rel} is too large to edit (over {EDIT_MAX_BYTES:,} bytes)", is_error=True
            )
        data = read_all(fd, EDIT_MAX_BYTES + 1)
        if len(data) > EDIT_MAX_BYTES:
            return ToolResult(
                f"{rel} is too large to edit (over {EDIT_MAX_BYTES:,} bytes)", is_error=True
            )
        if is_binary_data(data):
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
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        write_all(fd, updated.encode("utf-8"))
        replaced = count if replace_all else 1
        noun = "occurrence" if replaced == 1 else "occurrences"
        return FileChange(
            f"Edited {rel}: replaced {replaced} {noun} (first at line {first_line}).",
            diff=compact_diff(text, updated),
        )


# --------------------------------------------------------------------------------------------
# shared


_RESTORED = "### {path} — current contents after compaction"
"""The heading of a file brought back after a compaction (``recent_files.py``)."""


def _in_context(text: str, path: str, messages: Sequence[Message]) -> bool:
    """Whether the model sees exactly ``text`` now: a read result of the same text, or (a
    whole, uncut read) the file brought back whole after a compaction. Newest first: a re-read
    is most often of something read recently."""
    restored = _RESTORED.format(path=path)
    raw: str | None = None
    for message in reversed(messages):
        for block in message.content:
            if is_tool_result(block) and not block.get("is_error"):
                shown = tool_result_text(block)
                if len(shown) == len(text) and shown == text:
                    return True
            elif is_text(block) and restored in str(block.get("text", "")):
                if raw is None:
                    raw = _unnumbered(text)
                section = str(block.get("text", "")).split(restored, 1)[1]
                if raw and f"\n{raw}\n```" in section.split("\n### ", 1)[0]:
                    return True
    return False


def _unnumbered(text: str) -> str:
    """A whole read's lines without their numbers ('' for a read that was cut)."""
    lines = text.split("\n")
    if not all(len(line) > 6 and line[6] == "\t" for line in lines) or "[line cut]" in text:
        return ""
    return "\n".join(line[7:] for line in lines)


def not_regular(rel: str, mode: int, tool: str) -> ToolResult:
    """The refusal for a FIFO, socket or device: reading one could block forever."""
    if stat.S_ISFIFO(mode):
        kind = "a named pipe (FIFO)"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    else:
        kind = "not a regular file"
    return ToolResult(f"{rel} is {kind}; {tool} works on regular files only", is_error=True)


def hard_link_refusal(rel: str, links: int, tool: str) -> ToolResult:
    """The refusal to write through a file that has other names (hard links)."""
    return ToolResult(
        f"refused: {rel} has {links} hard links, so the same file also exists under another "
        f"name, possibly outside the workspace, and {tool} would change it there too. Write a "
        "new file instead, or remove this name first.",
        is_error=True,
    )


def read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd``, from its current position."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
