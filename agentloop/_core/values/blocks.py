"""Content blocks: their types, and the one dispatch on a block's kind.

A block travels as the Messages API's JSON object (a plain dict, stored and sent as is); the
TypedDicts below say what each known kind holds, and :class:`OtherBlock` stands for a kind
agentloop does not know (it is passed on untouched). Which kind a block is, is decided here
only: elsewhere code asks :func:`is_text`, :func:`is_tool_use`... (which narrow a block to its
type) or hands the block to a :class:`BlockRenderer`.

Several parts of agentloop turn content blocks into something else: the token counter (a
number), the summarizer's transcript (text), the compaction prefix (blocks a user message may
carry), the sessions commands (terminal text and markdown). Each subclasses
:class:`BlockRenderer` and says what it does for each kind of block.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, NotRequired, TypeAlias, TypedDict, TypeGuard, TypeVar

R = TypeVar("R")

Block = Mapping[str, Any]
"""Any content block as read: a mapping with a ``type`` (validated where messages are made);
:data:`TypedBlock` says what each kind holds, and the predicates below narrow a block to it."""


class TextBlock(TypedDict):
    """Text; ``citations`` when the API cited documents or search results."""

    type: Literal["text"]
    text: str
    citations: NotRequired[list[Any]]
    cache_control: NotRequired[dict[str, Any]]


class ImageBlock(TypedDict):
    """An image; ``source`` is base64 data, a URL or a file id."""

    type: Literal["image"]
    source: dict[str, Any]
    cache_control: NotRequired[dict[str, Any]]


class DocumentBlock(TypedDict):
    """A document (PDF, plain text, or blocks of content) the model reads."""

    type: Literal["document"]
    source: dict[str, Any]
    title: NotRequired[str | None]
    context: NotRequired[str | None]
    citations: NotRequired[dict[str, Any]]
    cache_control: NotRequired[dict[str, Any]]


class ToolUseBlock(TypedDict):
    """A call of one of the caller's tools (answered by a :class:`ToolResultBlock`)."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: NotRequired[Any]
    cache_control: NotRequired[dict[str, Any]]


class ServerToolUseBlock(TypedDict):
    """A call of a tool the API runs itself (web search, code execution, an MCP server)."""

    type: Literal["server_tool_use", "mcp_tool_use"]
    id: str
    name: str
    input: NotRequired[Any]


class ToolResultBlock(TypedDict):
    """What a tool answered: a string or a list of text/image/document blocks."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: NotRequired[str | list[dict[str, Any]] | None]
    is_error: NotRequired[bool]
    cache_control: NotRequired[dict[str, Any]]


class ServerToolResultBlock(TypedDict):
    """The result of a tool the API ran itself (``web_search_tool_result``...)."""

    type: str
    tool_use_id: str
    content: NotRequired[Any]


class ThinkingBlock(TypedDict):
    """The model's extended thinking (valid only in its own assistant turn)."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    """Thinking the API encrypted; ``data`` is opaque."""

    type: Literal["redacted_thinking"]
    data: str


class CompactionBlock(TypedDict):
    """A summary the API wrote when it compacted the conversation on the server; the API
    ignores everything before it."""

    type: Literal["compaction"]
    content: NotRequired[str | None]
    encrypted_content: NotRequired[str]
    signature: NotRequired[str]
    tool_changes: NotRequired[Any]


class OtherBlock(TypedDict):
    """A kind agentloop does not know (search results, container uploads, a future kind...):
    kept and passed on as it came."""

    type: str


TypedBlock: TypeAlias = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | ToolResultBlock
    | ServerToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | CompactionBlock
    | OtherBlock
)
"""Every content block, typed by its kind (:class:`OtherBlock` for the rest)."""

TEXT = "text"
TOOL_USE = "tool_use"
TOOL_RESULT = "tool_result"
COMPACTION = "compaction"
"""The block type (and the stop reason) of a compaction the API made on the server."""
_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
_THINKING = frozenset({"thinking", "redacted_thinking"})
_MEDIA = frozenset({"image", "document"})

REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    TEXT: ("text",),
    TOOL_USE: ("id", "name"),
    TOOL_RESULT: ("tool_use_id",),
}
"""Keys without which a block of a kind cannot be read at all (the rest is the API's to judge)."""


def kind_of(block: Block) -> str | None:
    """The block's kind as the API names it (``"text"``, ``"tool_use"``...); None when it has
    none. For messages and tables keyed by kind: to test a kind, use the predicates below."""
    kind = block.get("type")
    return kind if isinstance(kind, str) else None


def text_block(text: str) -> TextBlock:
    """A text block."""
    return {"type": "text", "text": text}


def is_text(block: Block) -> TypeGuard[TextBlock]:
    return block.get("type") == TEXT


def is_blank_text(block: Block) -> bool:
    """A text block with nothing but whitespace (the API refuses it)."""
    return is_text(block) and not str(block.get("text", "")).strip()


def is_tool_use(block: Block) -> TypeGuard[ToolUseBlock]:
    """A call of one of the caller's tools (not one the API runs itself)."""
    return block.get("type") == TOOL_USE


def is_server_tool_use(block: Block) -> TypeGuard[ServerToolUseBlock]:
    """A call of a tool the API runs itself."""
    return block.get("type") in _SERVER_CALLS


def is_tool_result(block: Block) -> TypeGuard[ToolResultBlock]:
    return block.get("type") == TOOL_RESULT


def is_server_tool_result(block: Block) -> TypeGuard[ServerToolResultBlock]:
    """The result of a tool the API ran itself (``web_search_tool_result``...)."""
    kind = block.get("type")
    return isinstance(kind, str) and kind.endswith("_tool_result") and kind != TOOL_RESULT


def is_thinking(block: Block) -> TypeGuard[ThinkingBlock]:
    return block.get("type") == "thinking"


def is_redacted_thinking(block: Block) -> TypeGuard[RedactedThinkingBlock]:
    return block.get("type") == "redacted_thinking"


def is_any_thinking(block: Block) -> TypeGuard[ThinkingBlock | RedactedThinkingBlock]:
    """Thinking, plain or redacted (neither may carry a cache breakpoint)."""
    return block.get("type") in _THINKING


def is_image(block: Block) -> TypeGuard[ImageBlock]:
    return block.get("type") == "image"


def is_document(block: Block) -> TypeGuard[DocumentBlock]:
    return block.get("type") == "document"


def is_media(block: Block) -> TypeGuard[ImageBlock | DocumentBlock]:
    """An image or a document."""
    return block.get("type") in _MEDIA


def is_compaction(block: Block) -> TypeGuard[CompactionBlock]:
    return block.get("type") == COMPACTION


def source_kind(source: object) -> str | None:
    """The kind of a media block's ``source`` (``base64``, ``url``, ``text``, ``content``...);
    None when ``source`` is not a mapping or names none."""
    if not isinstance(source, Mapping):
        return None
    kind = source.get("type")
    return kind if isinstance(kind, str) else None


def media_description(source: object) -> str | None:
    """What a media block's ``source`` is, for a reader: its media type, else its kind."""
    if not isinstance(source, Mapping):
        return None
    described = source.get("media_type") or source.get("type")
    return str(described) if described else None


def to_json(value: Any) -> str:
    """Stable, readable JSON for tool inputs in transcripts (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def result_items(block: Block) -> list[Block]:
    """A tool_result's content as a list of blocks (a bare string becomes one text block)."""
    content: Any = block.get("content", "")
    if isinstance(content, str):
        return [text_block(content)] if content else []
    if isinstance(content, Sequence):
        return [item if isinstance(item, Mapping) else text_block(str(item)) for item in content]
    return [] if content is None else [text_block(str(content))]


def tool_result_text(block: Block) -> str:
    """The text of a tool_result (non-text items are named in brackets)."""
    parts: list[str] = []
    for item in result_items(block):
        if is_text(item):
            parts.append(str(item.get("text", "")))
        else:
            parts.append(f"[{item.get('type')} block]")
    return "\n".join(parts)


def only_text(items: object) -> TypeGuard[list[TextBlock]]:
    """Whether ``items`` (a tool result's content list) holds text blocks only."""
    return isinstance(items, list) and all(
        isinstance(item, dict) and is_text(item) for item in items
    )


class BlockRenderer(abc.ABC, Generic[R]):
    """Turns content blocks into ``R``; override the kinds you treat differently.

    Every method but :meth:`render` has a default that delegates to :meth:`other`, so a renderer
    only writes the cases it cares about.
    """

    def render(self, block: Block) -> R:
        """Dispatch ``block`` to the method for its type."""
        if is_text(block):
            return self.text(str(block.get("text", "")), block)
        if is_tool_use(block) or is_server_tool_use(block):
            return self.tool_use(
                str(block.get("name", "")), block.get("input", {}), str(block.get("id", "")), block
            )
        if is_tool_result(block):
            return self.tool_result(
                result_items(block),
                str(block.get("tool_use_id", "")),
                bool(block.get("is_error")),
                block,
            )
        if is_thinking(block):
            return self.thinking(str(block.get("thinking", "")), block)
        if is_redacted_thinking(block):
            return self.redacted_thinking(str(block.get("data", "")), block)
        if is_image(block):
            return self.image(block)
        if is_document(block):
            return self.document(block)
        if is_compaction(block):
            content = block.get("content")
            return self.compaction("" if content is None else str(content), block)
        if is_server_tool_result(block):  # web search, fetch, code execution...
            return self.server_tool_result(block["type"], str(block.get("tool_use_id", "")), block)
        return self.other(str(block.get("type")), block)

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
