"""Compaction strategies as pure functions over message lists (no I/O, no model calls).

Every strategy keeps a verbatim *tail* that starts at a safe cut point (an assistant message, so
no tool_result is separated from its tool_use) and replaces the *head* before it. The replaced
head becomes one user message (the prefix) carrying the summary or note, preserved state, pinned
messages and the latest user request verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentloop._core.blocks import Block, BlockRenderer, to_json, tool_result_text
from agentloop._core.messages import ContentBlock, Message, SummaryInfo, latest_user_request
from sessions import pair_safe_cut

TokenCount = Callable[[Message], int]

SUMMARY_INTRO = (
    "This conversation was compacted to fit the context window: the {count} earlier messages "
    "were replaced by the summary below. The complete original history is kept in the parent "
    "session."
)
STATE_OPEN = "<preserved-state>"
STATE_CLOSE = "</preserved-state>"
PRUNED_MARKER = "[tool output pruned during compaction: {chars:,} characters; the full output is kept in the parent session]"  # noqa: E501


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
    """Pinned messages and the latest request that fall in the head and must be carried over."""
    head = messages[: split.tail_start]
    tail = messages[split.tail_start :]
    before = previous_summary(messages)
    pinned = list(before.pinned if before else ())
    pinned.extend(m for m in head if m.pinned and m.summary is None)
    request = latest_user_request(messages)
    if request is not None and (
        any(m is request for m in tail) or any(m is request for m in pinned)
    ):
        request = None
    return tuple(pinned), request


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


def _as_text_blocks(message: Message) -> list[ContentBlock]:
    renderer = _CarriedBlocks(message.role)
    return [b for block in message.content for b in renderer.render(block)]


def state_block(state: str) -> ContentBlock:
    """The text block that carries the preserved state in a compacted context."""
    return {"type": "text", "text": f"{STATE_OPEN}\n{state.strip()}\n{STATE_CLOSE}"}


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
        )
        return [rebuilt, *messages[1:]]
    blocks = [b for b in first.content if not str(b.get("text", "")).startswith(STATE_OPEN)]
    blocks.append(state_block(state))
    return [replace(first, content=tuple(blocks), tokens=None), *messages[1:]]


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
        blocks.append({"type": "text", "text": "Pinned messages, kept verbatim:"})
        for message in pinned:
            blocks.append({"type": "text", "text": f"[pinned {message.role} message]"})
            blocks.extend(_as_text_blocks(message))
    if request is not None:
        blocks.append({"type": "text", "text": "The user's latest request, verbatim:"})
        blocks.extend(_as_text_blocks(request))
    info = SummaryInfo(
        text=text, pinned=tuple(pinned), request=request, replaced_count=replaced_count
    )
    return Message("user", tuple(blocks), summary=info)


def assemble(
    messages: Sequence[Message], split: Split, *, text: str, state: str = ""
) -> list[Message]:
    """Prefix + verbatim tail. Tail replies lose their API usage: it measured the old context."""
    pinned, request = carried_items(messages, split)
    before = previous_summary(messages)
    replaced = split.tail_start + (before.replaced_count - 1 if before else 0)
    prefix = build_prefix(
        text, pinned=pinned, request=request, state=state, replaced_count=replaced
    )
    tail = [m if m.usage is None else replace(m, usage=None) for m in split.tail(messages)]
    return [prefix, *tail]


def window_note(messages: Sequence[Message], split: Split) -> str:
    """The note a sliding window leaves where the dropped messages were."""
    before = previous_summary(messages)
    note = (
        f"{split.tail_start - (1 if before else 0)} earlier messages were dropped (sliding window)."
    )
    if before is not None:
        note = f"{before.text.strip()}\n\n{note}"
    return note


def prune_tool_outputs(
    messages: Sequence[Message], *, keep_from: int, min_chars: int = 200
) -> list[Message]:
    """Replace the content of tool_results before ``keep_from`` by a short marker.

    The tool_use/tool_result pairs stay (so the conversation keeps its shape and stays valid);
    only large outputs are replaced; pinned messages are kept verbatim. Replies lose their stale
    API usage.
    """
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index >= keep_from or message.pinned or not message.is_tool_result:
            out.append(message if message.usage is None else replace(message, usage=None))
            continue
        changed = False
        blocks: list[ContentBlock] = []
        for block in message.content:
            if block.get("type") == "tool_result":
                text = tool_result_text(block)
                if len(text) >= min_chars:
                    block = {**block, "content": PRUNED_MARKER.format(chars=len(text))}
                    changed = True
            blocks.append(block)
        out.append(replace(message, content=tuple(blocks), tokens=None) if changed else message)
    return out
