"""The one dispatch on content-block type.

Several parts of agentloop turn content blocks into something else: the token counter (a
number), the summarizer's transcript (text), the compaction prefix (blocks a user message may
carry), the sessions commands (terminal text and markdown). Each subclasses
:class:`BlockRenderer` and says what it does for each kind of block; which kind a block is, and
how its fields are read, is decided here once.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

R = TypeVar("R")

Block = Mapping[str, Any]


def to_json(value: Any) -> str:
    """Stable, readable JSON for tool inputs in transcripts (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def result_items(block: Block) -> list[Block]:
    """A tool_result's content as a list of blocks (a bare string becomes one text block)."""
    content: Any = block.get("content", "")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, Sequence):
        return [
            item if isinstance(item, Mapping) else {"type": "text", "text": str(item)}
            for item in content
        ]
    return [] if content is None else [{"type": "text", "text": str(content)}]


def tool_result_text(block: Block) -> str:
    """The text of a tool_result (non-text items are named in brackets)."""
    parts: list[str] = []
    for item in result_items(block):
        if item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        else:
            parts.append(f"[{item.get('type')} block]")
    return "\n".join(parts)


class BlockRenderer(abc.ABC, Generic[R]):
    """Turns content blocks into ``R``; override the kinds you treat differently.

    Every method but :meth:`render` has a default that delegates to :meth:`other`, so a renderer
    only writes the cases it cares about.
    """

    def render(self, block: Block) -> R:
        """Dispatch ``block`` to the method for its type."""
        kind = block.get("type")
        if kind == "text":
            return self.text(str(block.get("text", "")), block)
        if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            return self.tool_use(
                str(block.get("name", "")), block.get("input", {}), str(block.get("id", "")), block
            )
        if kind == "tool_result":
            return self.tool_result(
                result_items(block),
                str(block.get("tool_use_id", "")),
                bool(block.get("is_error")),
                block,
            )
        if kind == "thinking":
            return self.thinking(str(block.get("thinking", "")), block)
        if kind == "redacted_thinking":
            return self.redacted_thinking(str(block.get("data", "")), block)
        if kind == "image":
            return self.image(block)
        if kind == "document":
            return self.document(block)
        if kind == "compaction":
            content = block.get("content")
            return self.compaction("" if content is None else str(content), block)
        if isinstance(kind, str) and kind.endswith("_tool_result"):  # web search, fetch, code...
            return self.server_tool_result(kind, str(block.get("tool_use_id", "")), block)
        return self.other(str(kind), block)

    def render_all(self, blocks: Sequence[Block]) -> list[R]:
        return [self.render(block) for block in blocks]

    def text(self, text: str, block: Block) -> R:
        return self.other("text", block)

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: Block) -> R:
        return self.other(str(block.get("type")), block)

    def tool_result(self, items: list[Block], call_id: str, is_error: bool, block: Block) -> R:
        return self.other("tool_result", block)

    def thinking(self, text: str, block: Block) -> R:
        return self.other("thinking", block)

    def redacted_thinking(self, data: str, block: Block) -> R:
        return self.other("redacted_thinking", block)

    def server_tool_result(self, kind: str, call_id: str, block: Block) -> R:
        """The result of a tool the API ran itself (``web_search_tool_result``...)."""
        return self.other(kind, block)

    def image(self, block: Block) -> R:
        return self.other("image", block)

    def document(self, block: Block) -> R:
        return self.other("document", block)

    def compaction(self, content: str, block: Block) -> R:
        """A summary the API wrote when it compacted the conversation on the server (strategy
        ``server``); the API ignores everything before it. ``content`` is the summary text."""
        return self.other("compaction", block)

    @abc.abstractmethod
    def other(self, kind: str, block: Block) -> R:
        """A block no other method handles (server tool results, search results, ...)."""
