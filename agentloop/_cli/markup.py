"""Stored messages as text: for ``sessions show`` (long blocks cut) and as Markdown for
``sessions export`` (fences that cannot be closed from inside, headings kept below the
message's own, HTML-like tags shown). Both number messages alike: ``#1`` is the first."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop._adapters.records import USAGE_ESTIMATED
from agentloop._cli.render import when
from agentloop._core.measuring.figures import token_figure
from agentloop._core.values.blocks import BlockRenderer, media_description, tool_result_text
from agentloop._core.values.messages import Usage

if TYPE_CHECKING:
    from agentloop._sessions import StoredMessage

SHOW_BLOCK_CHARS = 2000
SHOW_BLOCK_LINES = 25

ContentBlock = Mapping[str, Any]
"""A stored content block, as the Messages API takes it (JSON)."""


# ---------------------------------------------------------------------------- messages as text


def number(message: StoredMessage) -> str:
    """How ``show`` and ``export`` both number a message: ``#1`` is the first."""
    return f"#{message.seq + 1}"


def message_heading(message: StoredMessage) -> str:
    parts = [f"{number(message)} {message.role}", when(message.created_at)]
    usage = Usage.from_mapping(message.usage)
    if usage is not None:
        # `~` when the model only estimated its usage (the demo's): the API counted nothing.
        source = "estimate" if message.metadata.get(USAGE_ESTIMATED) is True else "api"
        parts.append(
            f"{token_figure(usage.prompt_tokens, source)} in / "
            f"{token_figure(usage.output_tokens, source)} out tokens"
        )
    elif message.token_estimate is not None:
        parts.append(f"{token_figure(message.token_estimate, 'estimate')} tokens")
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

    def compaction(self, content: str, block: ContentBlock) -> str:
        return _truncate(f"(the API's summary of what came before) {content}", self.limit)

    def other(self, kind: str, block: ContentBlock) -> str:
        return _truncate(f"[{kind}] {json.dumps(dict(block), ensure_ascii=False)}", self.limit)


def _media(kind: str, block: ContentBlock) -> str:
    described = media_description(block.get("source"))
    return f"[{kind}{': ' + described if described else ''}]"


def render_block(block: ContentBlock, *, limit: bool) -> str:
    """A content block for ``sessions show``; ``limit`` cuts long ones."""
    return _ShowBlock(limit).render(block)


# ---------------------------------------------------------------------------- messages as Markdown


_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^( {0,3})(#{1,6})(?=\s|$)")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")
HEADING_SHIFT = 2
"""Headings inside a message sit below the message's own ``##`` heading."""


def fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so the content cannot close it. Each `in`
    # is one C-speed scan; runs longer than a few backticks are rare.
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{info}\n{text}\n{ticks}"


def _escape_html(line: str) -> str:
    # Tags such as <summary> would be taken as HTML and vanish; code spans stay as typed.
    parts: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(line):
        parts.append(_HTML_START.sub("&lt;", line[last : match.start()]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_HTML_START.sub("&lt;", line[last:]))
    return "".join(parts)


def markdown_text(text: str) -> str:
    """Message text for the export: its headings one level under the message heading and
    below (``## Goal`` becomes ``#### Goal``), HTML-like tags shown, code blocks untouched."""
    if "#" not in text and "<" not in text:
        return text
    lines = text.split("\n")
    fence_mark: str | None = None
    for index, line in enumerate(lines):
        opening = _FENCE_LINE.match(line)
        if fence_mark is not None:
            if (
                opening
                and opening.group(1)[0] == fence_mark[0]
                and len(opening.group(1)) >= len(fence_mark)
            ):
                fence_mark = None
            continue
        if opening:
            fence_mark = opening.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            level = min(len(heading.group(2)) + HEADING_SHIFT, 6)
            line = heading.group(1) + "#" * level + line[heading.end() :]
        if "<" in line:
            line = _escape_html(line)
        lines[index] = line
    return "\n".join(lines)


_CLOSING_HASHES = re.compile(r"(^|\s)(#+)(\s*)$")


def markdown_inline(text: str) -> str:
    """One line of text in the export's own Markdown (its title heading): HTML-like tags shown
    as the messages' text shows them, and a closing run of ``#`` kept as text."""
    line = _escape_html(text) if "<" in text else text
    return _CLOSING_HASHES.sub(lambda m: f"{m.group(1)}\\{m.group(2)}{m.group(3)}", line)


class _MarkdownBlock(BlockRenderer[str]):
    """A content block for ``sessions export`` (Markdown)."""

    def text(self, text: str, block: ContentBlock) -> str:
        return markdown_text(text)

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

    def compaction(self, content: str, block: ContentBlock) -> str:
        heading = "*The API's summary of what came before*"
        return f"{heading}\n\n{fence(content)}"

    def other(self, kind: str, block: ContentBlock) -> str:
        return fence(json.dumps(dict(block), ensure_ascii=False, indent=2), "json")


_MARKDOWN = _MarkdownBlock()


def markdown_block(block: ContentBlock) -> str:
    """A content block for ``sessions export`` (Markdown)."""
    return _MARKDOWN.render(block)
