"""The compaction prefix: the user message that opens a compacted conversation.

It carries the summary (or a note), the preserved state, the pinned messages and the user's
latest request. The prefix is kept as structure: :func:`build_prefix` makes a :class:`Message`
whose ``summary`` (a :class:`SummaryInfo`) holds what it stands for, and whose blocks
:func:`render_prefix` writes from that structure, for the API only. The store keeps the
structure in the message's metadata; a caller who keeps history as API dicts gets the prefix as
a :class:`PrefixParam`, a dict that holds it too. So the next compaction updates the prefix (one,
never nested) without reading its text; only a history saved as plain JSON is read back from
the text (:func:`_read_rendered_prefix`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop._core.values.blocks import (
    Block,
    BlockRenderer,
    is_text,
    text_block,
    to_json,
    tool_result_text,
)
from agentloop._core.values.carried import PINNED_MARK
from agentloop._core.values.messages import ContentBlock, Message, PrefixParam, SummaryInfo, Usage
from agentloop._core.values.shorten import cut_middle

SUMMARY_INTRO = (
    "This conversation was compacted to fit the context window: {replaced} were replaced by the "
    "summary below. The complete original history is kept in the parent session; when a "
    "search_history tool is offered, use it to look up any earlier detail the summary leaves "
    "out instead of guessing."
)
# The parent's figure is the compaction notice's ("Conversation compacted: 7 messages → ..."),
# so the model, the user and the stored record speak of the same messages.
_REPLACED = "the earliest {here} of the parent session's {parent} messages"
_IN_ALL = " ({count} original messages in all, across earlier compactions)"
_OLD_REPLACED = "the {count} earlier messages"  # a prefix written before the parent was recorded
_INTRO = re.compile(
    r"^This conversation was compacted to fit the context window: "
    r"(?:the (?P<old>\d+) earlier messages|the earliest (?P<here>\d+) of the parent session's "
    r"(?P<parent>\d+) messages"
    r"(?: \((?P<all>\d+) original messages in all, across earlier compactions\))?) "
    r"were replaced by the summary below\..*?<summary>\n(?P<text>.*)\n</summary>$",
    re.S,
)
STATE_OPEN = "<preserved-state>"
STATE_CLOSE = "</preserved-state>"
PINNED_HEADING = "Pinned messages, kept verbatim:"
_PINNED_MARK = re.compile(
    "^" + re.escape(PINNED_MARK).replace(re.escape("{role}"), "(user|assistant)") + "$"
)
"""A pinned message's mark as :data:`PINNED_MARK` writes it (read by the one reader of a
prefix kept as text alone)."""
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
    return dict(text_block(f"{STATE_OPEN}\n{state.strip()}\n{STATE_CLOSE}"))


def cap_request(request: Message, max_chars: int | None) -> Message:
    """The request with its text cut to about ``max_chars`` (head and tail kept verbatim); the
    summarizer sees the whole of it, and the parent session keeps it."""
    if max_chars is None:
        return request
    texts = [len(str(b.get("text", ""))) for b in request.content if is_text(b)]
    total = sum(texts)
    if total <= max_chars:
        return request
    blocks: list[ContentBlock] = []
    for block in request.content:
        if is_text(block):
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
    replaced_here: int = 0,
    parent_count: int = 0,
) -> Message:
    """The user message that opens a compacted conversation: the structure, and its blocks."""
    info = SummaryInfo(
        text=text,
        pinned=tuple(pinned),
        request=request,
        replaced_count=replaced_count,
        replaced_here=replaced_here,
        parent_count=parent_count,
    )
    return Message("user", render_prefix(info, state), summary=info)


def render_prefix(info: SummaryInfo, state: str = "") -> tuple[ContentBlock, ...]:
    """The blocks the API reads for a prefix: ``info`` (and the preserved state) as text."""
    if info.parent_count:
        replaced = _REPLACED.format(here=info.replaced_here, parent=info.parent_count)
        if info.replaced_count != info.replaced_here:
            replaced += _IN_ALL.format(count=info.replaced_count)
    else:
        replaced = _OLD_REPLACED.format(count=info.replaced_count)
    intro = SUMMARY_INTRO.format(replaced=replaced)
    summary = f"\n\n<summary>\n{info.text.strip() or '(empty)'}\n</summary>"
    blocks: list[ContentBlock] = [dict(text_block(intro + summary))]
    if state.strip():
        blocks.append(state_block(state))
    if info.pinned:
        blocks.append(dict(text_block(PINNED_HEADING)))
        for message in info.pinned:
            blocks.append(dict(text_block(PINNED_MARK.format(role=message.role))))
            blocks.extend(carried_blocks(message))
    if info.request is not None:
        blocks.append(dict(text_block(REQUEST_HEADING)))
        blocks.extend(carried_blocks(info.request))
    return tuple(blocks)


def _summary_of(param: Mapping[str, Any], message: Message) -> SummaryInfo | None:
    """What the first message of a dict history stands for, if it is a compaction prefix."""
    if isinstance(param, PrefixParam):
        return param.summary
    return _read_rendered_prefix(message)


def _read_rendered_prefix(message: Message) -> SummaryInfo | None:
    """What a prefix's text says it stands for; None for any other message.

    Kept only for histories stored as plain JSON, which lost the structure: the API takes no
    field beside its own, so a caller's ``compacted_params`` saved to a file and read back (or
    written by an older agentloop) hold the prefix as text alone. Our messages, the store
    (message metadata) and the :class:`PrefixParam` dicts we hand out keep the structure.
    """
    if message.role != "user" or not message.content:
        return None
    first = message.content[0]
    match = _INTRO.match(str(first.get("text", ""))) if is_text(first) else None
    if match is None:
        return None
    pinned: list[tuple[str, list[ContentBlock]]] = []
    request_blocks: list[ContentBlock] | None = None
    for block in message.content[1:]:
        text = str(block.get("text", "")) if is_text(block) else None
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
        text=match["text"],
        pinned=tuple(
            Message("user" if role == "user" else "assistant", tuple(blocks), pinned=True)
            for role, blocks in pinned
        ),
        request=Message.user(request_blocks) if request_blocks else None,
        replaced_count=int(match["old"] or match["all"] or match["here"]),
        replaced_here=int(match["here"] or 0),
        parent_count=int(match["parent"] or 0),
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
    if first and (info := _summary_of(param, message)) is not None:
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
