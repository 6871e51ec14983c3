"""The compaction prefix: the user message that opens a compacted conversation.

It carries the summary (or a note), the preserved state, the pinned messages and the user's
latest request. :func:`build_prefix` writes it; :func:`parse_prefix` reads one back from plain
API dicts, so a caller who keeps history as dicts (``compacted_params``) gets the same
behaviour on the next compaction: one prefix, updated, never nested.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop._core.blocks import Block, BlockRenderer, to_json, tool_result_text
from agentloop._core.messages import ContentBlock, Message, SummaryInfo, Usage
from agentloop._core.shorten import cut_middle

SUMMARY_INTRO = (
    "This conversation was compacted to fit the context window: the {count} earlier messages "
    "were replaced by the summary below. The complete original history is kept in the parent "
    "session; when a search_history tool is offered, use it to look up any earlier detail the "
    "summary leaves out instead of guessing."
)
_INTRO = re.compile(
    r"^This conversation was compacted to fit the context window: the (\d+) earlier messages "
    r"were replaced by the summary below\..*?<summary>\n(.*)\n</summary>$",
    re.S,
)
STATE_OPEN = "<preserved-state>"
STATE_CLOSE = "</preserved-state>"
PINNED_HEADING = "Pinned messages, kept verbatim:"
_PINNED_MARK = re.compile(r"^\[pinned (user|assistant) message\]$")
REQUEST_HEADING = "The user's latest request, verbatim:"
REQUEST_CUT = (
    "[... {count:,} characters of this request are left out here: the summary above covers "
    "them, and the parent session keeps the whole text ...]"
)


class _CarriedBlocks(BlockRenderer[list[ContentBlock]]):
    """A message's blocks as a user message may carry them (tool blocks become text)."""

    def __init__(self, role: str) -> None:
        self.role = role

    def text(self, text: str, block: Block) -> list[ContentBlock]:
        return [dict(block)] if text.strip() else []

    def tool_use(
        self, name: str, tool_input: Any, call_id: str, block: Block
    ) -> list[ContentBlock]:
        return [{"type": "text", "text": f"[tool call {name}: {to_json(tool_input)}]"}]

    def tool_result(
        self, items: list[Block], call_id: str, is_error: bool, block: Block
    ) -> list[ContentBlock]:
        return [{"type": "text", "text": f"[tool result: {tool_result_text(block)}]"}]

    def thinking(self, text: str, block: Block) -> list[ContentBlock]:
        return []  # thinking blocks are only valid in their own assistant turn

    def redacted_thinking(self, data: str, block: Block) -> list[ContentBlock]:
        return []

    def image(self, block: Block) -> list[ContentBlock]:
        return [dict(block)] if self.role == "user" else self.other("image", block)

    def document(self, block: Block) -> list[ContentBlock]:
        return [dict(block)] if self.role == "user" else self.other("document", block)

    def other(self, kind: str, block: Block) -> list[ContentBlock]:
        return [{"type": "text", "text": f"[{kind} block]"}]


def carried_blocks(message: Message) -> list[ContentBlock]:
    """``message``'s blocks in a form the prefix (a user message) may carry."""
    renderer = _CarriedBlocks(message.role)
    return [b for block in message.content for b in renderer.render(block)]


def state_block(state: str) -> ContentBlock:
    """The text block that carries the preserved state in a compacted context."""
    return {"type": "text", "text": f"{STATE_OPEN}\n{state.strip()}\n{STATE_CLOSE}"}


def cap_request(request: Message, max_chars: int | None) -> Message:
    """The request with its text cut to about ``max_chars`` (head and tail kept verbatim); the
    summarizer sees the whole of it, and the parent session keeps it."""
    if max_chars is None:
        return request
    texts = [len(str(b.get("text", ""))) for b in request.content if b.get("type") == "text"]
    total = sum(texts)
    if total <= max_chars:
        return request
    blocks: list[ContentBlock] = []
    for block in request.content:
        if block.get("type") == "text":
            text = str(block.get("text", ""))
            share = max(200, max_chars * len(text) // total)
            block = {**block, "text": cut_middle(text, share, REQUEST_CUT)}
        blocks.append(block)
    return replace(request, content=tuple(blocks), tokens=None)


def build_prefix(
    text: str,
    *,
    pinned: Sequence[Message],
    request: Message | None,
    state: str,
    replaced_count: int,
) -> Message:
    """The user message that opens a compacted conversation."""
    blocks: list[ContentBlock] = [
        {
            "type": "text",
            "text": SUMMARY_INTRO.format(count=replaced_count)
            + f"\n\n<summary>\n{text.strip() or '(empty)'}\n</summary>",
        }
    ]
    if state.strip():
        blocks.append(state_block(state))
    if pinned:
        blocks.append({"type": "text", "text": PINNED_HEADING})
        for message in pinned:
            blocks.append({"type": "text", "text": f"[pinned {message.role} message]"})
            blocks.extend(carried_blocks(message))
    if request is not None:
        blocks.append({"type": "text", "text": REQUEST_HEADING})
        blocks.extend(carried_blocks(request))
    info = SummaryInfo(
        text=text, pinned=tuple(pinned), request=request, replaced_count=replaced_count
    )
    return Message("user", tuple(blocks), summary=info)


def parse_prefix(message: Message) -> SummaryInfo | None:
    """What a prefix written by :func:`build_prefix` stands for; None for any other message."""
    if message.role != "user" or not message.content:
        return None
    first = message.content[0]
    match = _INTRO.match(str(first.get("text", ""))) if first.get("type") == "text" else None
    if match is None:
        return None
    pinned: list[tuple[str, list[ContentBlock]]] = []
    request_blocks: list[ContentBlock] | None = None
    for block in message.content[1:]:
        text = str(block.get("text", "")) if block.get("type") == "text" else None
        mark = _PINNED_MARK.match(text) if text is not None else None
        if request_blocks is not None:
            request_blocks.append(dict(block))
        elif text == REQUEST_HEADING:
            request_blocks = []
        elif mark is not None:
            pinned.append((mark.group(1), []))
        elif pinned:
            pinned[-1][1].append(dict(block))
        # before the pinned messages: the state block and the pinned heading, not content
    return SummaryInfo(
        text=match.group(2),
        pinned=tuple(
            Message("user" if role == "user" else "assistant", tuple(blocks), pinned=True)
            for role, blocks in pinned
        ),
        request=Message.user(request_blocks) if request_blocks else None,
        replaced_count=int(match.group(1)),
    )


def as_messages(messages: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    """Accept our messages or plain API dicts (a hand-written loop's history).

    A dict may carry ``usage`` (the API's usage for that reply, a mapping or the SDK's object);
    a first message that is a compaction prefix is recognised as one.
    """
    return [
        item if isinstance(item, Message) else as_message(item, first=index == 0)
        for index, item in enumerate(messages)
    ]


def as_message(param: Mapping[str, Any], *, first: bool = False) -> Message:
    """One API dict as a :class:`Message` (see :func:`as_messages`)."""
    message = Message.from_param(param)
    usage = _usage_of(param.get("usage"))
    if usage is not None and message.role == "assistant":
        message = replace(message, usage=usage)
    if first and (info := parse_prefix(message)) is not None:
        message = replace(message, summary=info)
    return message


def _usage_of(value: Any) -> Usage | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return Usage.from_mapping(value)
    if hasattr(value, "model_dump"):  # the SDK's Usage object
        return Usage.from_mapping(value.model_dump())
    return None
