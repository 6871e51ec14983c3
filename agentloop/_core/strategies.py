"""Compaction strategies as pure functions over message lists (no I/O, no model calls).

Every strategy keeps a verbatim *tail* that starts at a safe cut point (an assistant message, so
no tool_result is separated from its tool_use) and replaces the *head* before it. The replaced
head becomes one user message (the prefix) carrying the summary or note, preserved state, pinned
messages and the latest user request verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentloop._core.messages import ContentBlock, Message, SummaryInfo, latest_user_request

TokenCount = Callable[[Message], int]

SUMMARY_INTRO = (
    "This conversation was compacted to fit the context window: the {count} earlier messages "
    "were replaced by the summary below. The complete original history is kept in the parent "
    "session."
)
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
    """The earliest safe cut whose tail fits ``tail_tokens`` (and ``max_messages``).

    Safe cuts are assistant messages after the first message: a tail starting there never holds
    a tool_result without its tool_use. When not even the last cut fits, the last cut is used
    (the smallest valid tail). None when there is no cut point at all.
    """
    best: int | None = None
    running = 0
    n = len(messages)
    for index in range(n - 1, 0, -1):
        running += count(messages[index])
        if messages[index].role != "assistant":
            continue
        fits = running <= tail_tokens and (max_messages is None or n - index <= max_messages)
        if fits or best is None:
            best = index
        if not fits:
            break
    return None if best is None else Split(best)


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


def _as_text_blocks(message: Message) -> list[ContentBlock]:
    """A message's blocks in a form a user message may carry (tool blocks become text)."""
    blocks: list[ContentBlock] = []
    for block in message.content:
        kind = block.get("type")
        if kind == "text":
            if str(block.get("text", "")).strip():
                blocks.append(dict(block))
        elif kind in ("image", "document") and message.role == "user":
            blocks.append(dict(block))
        elif kind == "tool_use":
            args = json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True)
            blocks.append({"type": "text", "text": f"[tool call {block.get('name')}: {args}]"})
        elif kind == "tool_result":
            blocks.append({"type": "text", "text": f"[tool result: {tool_result_text(block)}]"})
        elif kind == "thinking":
            continue  # thinking blocks are only valid in their own assistant turn
        else:
            blocks.append({"type": "text", "text": f"[{kind} block]"})
    return blocks


def tool_result_text(block: ContentBlock) -> str:
    content: Any = block.get("content", "")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for item in content or ():
        if isinstance(item, dict) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        elif isinstance(item, dict):
            parts.append(f"[{item.get('type')} block]")
    return "\n".join(parts)


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
        blocks.append(
            {"type": "text", "text": f"<preserved-state>\n{state.strip()}\n</preserved-state>"}
        )
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


def sliding_window(
    messages: Sequence[Message],
    *,
    count: TokenCount,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    state: str = "",
) -> list[Message] | None:
    """Keep the newest messages (by count or tokens) from a safe cut; None if nothing to drop."""
    budget = max_tokens if max_tokens is not None else 2**62
    split = choose_tail_start(messages, tail_tokens=budget, count=count, max_messages=max_messages)
    if split is None:
        return None
    return assemble(messages, split, text=window_note(messages, split), state=state)


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
