"""The rules every strategy builds with, as pure functions over message lists (no I/O, no
model calls): where to cut, how to assemble prefix and tail, how to prune. The strategies
themselves are things (``strategy.py`` and one ``strategy_*.py`` each).

Every strategy keeps a verbatim *tail* that starts at a safe cut point (an assistant message, so
no tool_result is separated from its tool_use) and replaces the *head* before it. The replaced
head becomes one user message (the prefix, see ``prefix.py``) carrying the summary or note,
preserved state, pinned messages and the latest user request verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentloop._core.cutting.prefix import (
    STATE_OPEN,
    build_prefix,
    cap_request,
    state_block,
)
from agentloop._core.values.blocks import (
    Block,
    BlockRenderer,
    is_any_thinking,
    is_media,
    is_server_tool_use,
    is_text,
    is_tool_result,
    is_tool_use,
    media_description,
    text_block,
    tool_result_text,
)
from agentloop._core.values.messages import (
    ContentBlock,
    Message,
    SummaryInfo,
    latest_request_index,
)
from agentloop._sessions import pair_safe_cut

TokenCount = Callable[[Message], int]

PRUNED_MARKER = "[tool output pruned during compaction: {chars:,} characters; the full output is kept in the parent session]"  # noqa: E501
PRUNED_MEDIA_MARKER = "[tool output pruned during compaction: {chars:,} characters and {media} image or document block(s); the full output is kept in the parent session]"  # noqa: E501
PRUNED_VALUE = "[pruned during compaction: {chars:,} characters; kept in the parent session]"
PRUNED_MEDIA = "[{kind} pruned during compaction: {what}; kept in the parent session]"


@dataclass(frozen=True, slots=True)
class Split:
    """Where a history is cut: ``messages[:tail_start]`` is replaced, the rest is kept verbatim."""

    tail_start: int

    def head(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages[: self.tail_start])

    def tail(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages[self.tail_start :])


def choose_tail_start(
    messages: Sequence[Message],
    *,
    tail_tokens: int,
    count: TokenCount,
    max_messages: int | None = None,
) -> Split | None:
    """The earliest pair-safe cut whose tail fits ``tail_tokens`` (and ``max_messages``).

    The tail starts at an assistant message after the first message (``pair_safe_cut``, the one
    cut rule the store's sliding window uses too), so no tool_result is parted from its
    tool_use. When not even the last cut fits, the last cut is used (the smallest valid tail).
    None when there is no cut point at all.
    """
    n = len(messages)
    earliest = n
    running = 0
    for index in range(n - 1, 0, -1):
        running += count(messages[index])
        if running > tail_tokens or (max_messages is not None and n - index > max_messages):
            break
        earliest = index
    cut = pair_safe_cut(messages, max(earliest, 1), first_role="assistant")
    index = min(earliest, n) - 1
    while cut is None and index > 0:  # no cut fits: the last cut, the smallest valid tail
        cut = pair_safe_cut(messages, index, first_role="assistant")
        index -= 1
    return None if cut is None else Split(cut)


def previous_summary(messages: Sequence[Message]) -> SummaryInfo | None:
    return messages[0].summary if messages and messages[0].summary is not None else None


def carried_items(
    messages: Sequence[Message], split: Split
) -> tuple[tuple[Message, ...], Message | None]:
    """Pinned messages and the latest request that fall in the head and must be carried over.

    The latest request is what a person said last, a steering text beside tool results too;
    it is carried unless it stands in the verbatim tail (or is itself pinned).
    """
    head = messages[: split.tail_start]
    before = previous_summary(messages)
    pinned = list(before.pinned if before else ())
    pinned.extend(m for m in head if m.pinned and m.summary is None)
    index = latest_request_index(messages)
    request: Message | None
    if index is None:
        request = before.request if before is not None else None
    elif index >= split.tail_start or messages[index].pinned:
        request = None
    else:
        found = messages[index]
        request = found if not found.is_tool_result else Message("user", found.request_blocks)
    return tuple(pinned), request


def with_state(messages: list[Message], state: str) -> list[Message]:
    """Put the preserved state into the first message (replacing an older state block)."""
    if not state.strip() or not messages:
        return messages
    first = messages[0]
    if first.summary is not None:
        info: SummaryInfo = first.summary
        rebuilt = build_prefix(
            info.text,
            pinned=info.pinned,
            request=info.request,
            state=state,
            replaced_count=info.replaced_count,
            replaced_here=info.replaced_here,
            parent_count=info.parent_count,
        )
        return [rebuilt, *messages[1:]]
    blocks = [b for b in first.content if not str(b.get("text", "")).startswith(STATE_OPEN)]
    blocks.append(state_block(state))
    return [replace(first, content=tuple(blocks), tokens=None), *messages[1:]]


def assemble(
    messages: Sequence[Message],
    split: Split,
    *,
    text: str,
    state: str = "",
    request_max_chars: int | None = None,
    prune_tail: bool = False,
) -> list[Message]:
    """Prefix + verbatim tail. Tail replies lose their API usage: it measured the old context.

    ``request_max_chars`` caps the carried request (head and tail of its text kept);
    ``prune_tail`` also prunes old tool content inside the tail, all but the newest exchange.
    """
    pinned, request = carried_items(messages, split)
    if request is not None:
        request = cap_request(request, request_max_chars)
    before = previous_summary(messages)
    replaced = split.tail_start + (before.replaced_count - 1 if before else 0)
    prefix = build_prefix(
        text,
        pinned=pinned,
        request=request,
        state=state,
        replaced_count=replaced,
        replaced_here=split.tail_start,
        parent_count=len(messages),
    )
    tail = split.tail(messages)
    if prune_tail:
        newest = _newest_exchange_start(tail)
        tail = prune_tool_outputs(tail, keep_from=newest)
    tail = [m if m.usage is None and m.counted is None else _unanchored(m) for m in tail]
    return [prefix, *tail]


def _unanchored(message: Message) -> Message:
    return replace(message, usage=None, counted=None)


def _newest_exchange_start(tail: Sequence[Message]) -> int:
    """Index of the last assistant message of ``tail`` (its newest exchange starts there)."""
    for index in range(len(tail) - 1, -1, -1):
        if tail[index].role == "assistant":
            return index
    return 0


def window_note(messages: Sequence[Message], split: Split) -> str:
    """The note a sliding window leaves where the dropped messages were."""
    before = previous_summary(messages)
    note = (
        f"{split.tail_start - (1 if before else 0)} earlier messages were dropped (sliding window)."
    )
    if before is not None:
        note = f"{before.text.strip()}\n\n{note}"
    return note


class _Pruner(BlockRenderer[ContentBlock]):
    """One block with its bulk replaced by a marker (the same block when nothing is pruned)."""

    def __init__(self, min_chars: int, role: str) -> None:
        self.min_chars = min_chars
        self.role = role

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: Block) -> ContentBlock:
        pruned = _prune_values(tool_input, self.min_chars)
        return dict(block) if pruned is tool_input else {**block, "input": pruned}

    def tool_result(
        self, items: list[Block], call_id: str, is_error: bool, block: Block
    ) -> ContentBlock:
        chars = len(tool_result_text(block))
        media = sum(1 for item in items if is_media(item))
        if media:
            marker = PRUNED_MEDIA_MARKER.format(chars=chars, media=media)
        else:
            marker = PRUNED_MARKER.format(chars=chars)
            if chars < self.min_chars or chars <= len(marker):  # a marker must save something
                return dict(block)
        return {**block, "content": marker}

    def image(self, block: Block) -> ContentBlock:
        return {"type": "text", "text": PRUNED_MEDIA.format(kind="image", what=_media_size(block))}

    def document(self, block: Block) -> ContentBlock:
        title = block.get("title")
        what = f"{title!r}, {_media_size(block)}" if title else _media_size(block)
        return {"type": "text", "text": PRUNED_MEDIA.format(kind="document", what=what)}

    def other(self, kind: str, block: Block) -> ContentBlock:
        return dict(block)


def _media_size(block: Block) -> str:
    source = block.get("source")
    if not isinstance(source, dict):
        return "no source"
    data = source.get("data")
    kind = media_description(source) or "media"
    if isinstance(data, str):
        return f"{kind}, {len(data) * 3 // 4 // 1024:,} KB"
    return str(source.get("url") or kind)


def _prune_values(value: Any, min_chars: int) -> Any:
    """``value`` with every string of ``min_chars`` or more replaced by a marker; the very same
    object when nothing changed."""
    if isinstance(value, str):
        marker = PRUNED_VALUE.format(chars=len(value))
        return marker if len(value) >= min_chars and len(value) > len(marker) else value
    if isinstance(value, dict):
        items = {key: _prune_values(item, min_chars) for key, item in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        listed = [_prune_values(item, min_chars) for item in value]
        return value if all(a is b for a, b in zip(listed, value, strict=True)) else listed
    return value


def _chars(value: Any) -> int:
    """About how many characters ``value`` takes as JSON: its strings' lengths, plus a little
    for every other leaf (cheap: no encoding)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(key)) + _chars(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return sum(_chars(item) for item in value)
    return 4


def _content_chars(content: Sequence[Block]) -> int:
    total = 0
    for block in content:
        if is_text(block):
            total += len(str(block.get("text", "")))
        elif is_tool_use(block) or is_server_tool_use(block):
            total += _chars(block.get("input", {}))
        elif is_tool_result(block):
            total += _chars(block.get("content", ""))
        else:
            total += _chars(block)
    return total


def _scaled_estimate(old: Message, content: tuple[ContentBlock, ...]) -> int | None:
    """An estimate of the pruned message from the original's, by the share of text kept: a
    pruned history is not tokenized again (the API's count, when it can be had, decides)."""
    if old.tokens is None or any(is_media(b) for b in old.content):
        return None
    before = _content_chars(old.content)
    if before == 0:
        return old.tokens
    return max(1, round(old.tokens * _content_chars(content) / before))


def prune_tool_outputs(
    messages: Sequence[Message], *, keep_from: int, min_chars: int = 200, start: int = 0
) -> list[Message]:
    """Replace the bulk of old messages (before ``keep_from``) by short markers: tool outputs,
    long tool inputs (write and edit bodies) and images and documents.

    The tool_use/tool_result pairs stay (so the conversation keeps its shape and stays valid);
    pinned messages, and the text of what a person said, are kept verbatim; the newest request
    is never pruned. Replies lose their stale API usage. Messages before ``start`` are taken
    as they are (a pruning that goes further than an earlier one prunes only the difference).
    """
    newest_request = latest_request_index(messages)
    out: list[Message] = list(messages[:start])
    for index in range(start, len(messages)):
        message = messages[index]
        if index >= keep_from or message.pinned or index == newest_request:
            out.append(message if message.usage is None else _unanchored(message))
            continue
        pruner = _Pruner(min_chars, message.role)
        blocks = tuple(pruner.render(block) for block in message.content)
        if all(a == b for a, b in zip(blocks, message.content, strict=True)):
            out.append(message if message.usage is None else _unanchored(message))
            continue
        out.append(
            replace(
                message,
                content=blocks,
                tokens=_scaled_estimate(message, blocks),
                usage=None,
                counted=None,
            )
        )
    return out


THINKING_LEFT_OUT = "[thinking left out at compaction]"
"""What an assistant message that held only thinking says once its thinking is removed."""


def unbound_thinking(
    parent: Sequence[Message], child: Sequence[Message]
) -> tuple[list[Message], int]:
    """``child`` without the thinking an edit of ``parent`` invalidated, and how many blocks
    were removed (the one rule for every history agentloop edits itself).

    A thinking block is bound to everything before it: from the first message of ``child``
    that is not ``parent``'s message at the same position, unchanged, every ``thinking`` and
    ``redacted_thinking`` block goes (removing thinking from the end is no edit, so what
    stays before that message keeps its thinking). An assistant message left with nothing
    is dropped when it is the last message, else it says :data:`THINKING_LEFT_OUT`.
    """
    first = 0
    while first < min(len(parent), len(child)) and (parent[first].role, parent[first].content) == (
        child[first].role,
        child[first].content,
    ):
        first += 1
    out, removed = list(child[:first]), 0
    for index in range(first, len(child)):
        message = child[index]
        kept = tuple(block for block in message.content if not is_any_thinking(block))
        if len(kept) == len(message.content):
            out.append(message)
            continue
        removed += len(message.content) - len(kept)
        if not kept and index == len(child) - 1:
            continue
        kept = kept or (dict(text_block(THINKING_LEFT_OUT)),)
        out.append(replace(message, content=kept, tokens=None, usage=None, counted=None))
    return out, removed


def thinking_note(count: int) -> str:
    """The compaction's note for thinking blocks :func:`unbound_thinking` removed."""
    return (
        f"{count} thinking block(s) left out of the compacted context: they were bound to "
        "messages the compaction changed (the parent session keeps them)"
    )
