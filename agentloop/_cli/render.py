"""Text for the ``agentloop sessions`` commands: times, tables, stored messages as terminal text
and as Markdown, store values as JSON-ready data. Pure functions; nothing here reads the store.

Imports nothing heavy (no pydantic, no store) so that the sessions commands stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from agentloop._core.blocks import BlockRenderer, tool_result_text
from agentloop._core.messages import Usage

if TYPE_CHECKING:
    from pydantic import BaseModel

    from sessions import CompactionEntry, StoredMessage

SHOW_BLOCK_CHARS = 2000
SHOW_BLOCK_LINES = 25

ContentBlock = Mapping[str, Any]
"""A stored content block, as the Messages API takes it (JSON)."""

# ---------------------------------------------------------------------------- JSON


def print_json(value: object, out: TextIO) -> None:
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def plain(model: BaseModel) -> dict[str, object]:
    """A store value as JSON-ready data.

    Written out by hand: pydantic's serializer would build its schema on first use, which costs
    more than the whole of `sessions list` (its plugin discovery scans every installed package).
    """
    return {
        name: iso(value) if isinstance(value, datetime) else value
        for name in type(model).model_fields
        for value in (getattr(model, name),)
    }


# ---------------------------------------------------------------------------- words and tables


def when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def ago(moment: datetime, now: datetime) -> str:
    seconds = (now - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)}d ago"
    return moment.astimezone().strftime("%Y-%m-%d")


def home_short(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def one_line(text: str) -> str:
    return " ".join(text.split())


def table(rows: Sequence[Sequence[str]], *, right: Iterable[int] = ()) -> list[str]:
    aligned_right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in aligned_right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def fit(line: str, width: int | None) -> str:
    if width is None or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


def terminal_width(out: TextIO) -> int | None:
    # Only a person at a terminal wants lines cut to fit; pipes get everything.
    if not out.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def compaction_note(entry: CompactionEntry) -> str:
    note = f"← compacted {entry.messages_before:,} → {plural(entry.messages_after, 'msg')}"
    if entry.tokens_before is not None and entry.tokens_after is not None:
        note += f" ({entry.tokens_before:,} → {entry.tokens_after:,} tokens)"
    elif entry.tokens_before is not None:
        note += f" ({entry.tokens_before:,} tokens before)"
    return f"{note} by {entry.strategy}"


# ---------------------------------------------------------------------------- messages as text


def message_heading(message: StoredMessage) -> str:
    parts = [f"#{message.seq} {message.role}", when(message.created_at)]
    usage = Usage.from_mapping(message.usage)
    if usage is not None:
        parts.append(f"{usage.prompt_tokens:,} in / {usage.output_tokens:,} out tokens")
    elif message.token_estimate is not None:
        parts.append(f"~{message.token_estimate:,} tokens")
    flags = [key for key in ("pinned",) if message.metadata.get(key)]
    kind = message.metadata.get("kind")
    if isinstance(kind, str):
        flags.append(kind)
    if flags:
        parts.append(", ".join(flags))
    return "── " + " · ".join(parts)


def indent(text: str) -> str:
    return "\n".join("   " + line if line else "" for line in text.splitlines() or [""])


def _truncate(text: str, limit: bool) -> str:
    if not limit:
        return text
    lines = text.splitlines()
    cut = "\n".join(lines[:SHOW_BLOCK_LINES])
    cut = cut[:SHOW_BLOCK_CHARS]
    if cut == text:
        return text
    hidden = len(text) - len(cut)
    return f"{cut}\n… {hidden:,} more characters (agentloop sessions export shows everything)"


class _ShowBlock(BlockRenderer[str]):
    """A content block for ``sessions show``; ``limit`` cuts long ones."""

    def __init__(self, limit: bool) -> None:
        self.limit = limit

    def text(self, text: str, block: ContentBlock) -> str:
        return text

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: ContentBlock) -> str:
        arguments = json.dumps(tool_input, ensure_ascii=False)
        return _truncate(f"→ {name} ({call_id}) {arguments}", self.limit)

    def tool_result(
        self, items: list[ContentBlock], call_id: str, is_error: bool, block: ContentBlock
    ) -> str:
        error = " ERROR" if is_error else ""
        return _truncate(f"← result ({call_id}){error}\n{tool_result_text(block)}", self.limit)

    def thinking(self, text: str, block: ContentBlock) -> str:
        return _truncate(f"(thinking) {text}", self.limit)

    def redacted_thinking(self, data: str, block: ContentBlock) -> str:
        return "(redacted thinking)"

    def image(self, block: ContentBlock) -> str:
        return _media("image", block)

    def document(self, block: ContentBlock) -> str:
        return _media("document", block)

    def other(self, kind: str, block: ContentBlock) -> str:
        return _truncate(f"[{kind}] {json.dumps(dict(block), ensure_ascii=False)}", self.limit)


def _media(kind: str, block: ContentBlock) -> str:
    source = block.get("source")
    described = (
        source.get("media_type") or source.get("type") if isinstance(source, Mapping) else ""
    )
    return f"[{kind}{': ' + str(described) if described else ''}]"


def render_block(block: ContentBlock, *, limit: bool) -> str:
    """A content block for ``sessions show``; ``limit`` cuts long ones."""
    return _ShowBlock(limit).render(block)


# ---------------------------------------------------------------------------- messages as Markdown


def fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so the content cannot close it.
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


class _MarkdownBlock(BlockRenderer[str]):
    """A content block for ``sessions export`` (Markdown)."""

    def text(self, text: str, block: ContentBlock) -> str:
        return text

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: ContentBlock) -> str:
        arguments = json.dumps(tool_input, ensure_ascii=False, indent=2)
        return f"**Tool call** `{name}` (`{call_id}`)\n\n{fence(arguments, 'json')}"

    def tool_result(
        self, items: list[ContentBlock], call_id: str, is_error: bool, block: ContentBlock
    ) -> str:
        error = " — error" if is_error else ""
        return f"**Tool result** (`{call_id}`){error}\n\n{fence(tool_result_text(block))}"

    def thinking(self, text: str, block: ContentBlock) -> str:
        quoted = "\n".join("> " + line for line in text.splitlines())
        return f"> *Thinking*\n>\n{quoted}"

    def redacted_thinking(self, data: str, block: ContentBlock) -> str:
        return "> *Thinking (redacted)*"

    def other(self, kind: str, block: ContentBlock) -> str:
        return fence(json.dumps(dict(block), ensure_ascii=False, indent=2), "json")


_MARKDOWN = _MarkdownBlock()


def markdown_block(block: ContentBlock) -> str:
    """A content block for ``sessions export`` (Markdown)."""
    return _MARKDOWN.render(block)
