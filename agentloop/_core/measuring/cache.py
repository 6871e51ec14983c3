"""Where a request's prompt-cache breakpoints go (pure functions over request parameters).

The Messages API caches the prefix of a request (tools, then system, then messages) up to each
block marked ``cache_control``; a later request reads the longest cached prefix that ends at one
of its own breakpoints, or at a block boundary up to about 20 blocks before one. At most four
breakpoints are allowed. The rule here, applied to every request the same way:

1. the stable prefix: the last system block (the last tool when there is no system prompt);
2. a compaction prefix opening the conversation (so the turns after a compaction read it);
3. the end of the previous request — the newest user message before the newest assistant
   message — when more blocks than the lookback follow it (a long tool round), or when the
   newest message is not marked (a one-off request such as a summary, which reads the
   conversation's cache and writes nothing of its own);
4. the newest message (what the next request reads).

Explicit breakpoints rather than automatic caching (one top-level ``cache_control``): automatic
caching marks only the last block, so a tool round of more than 20 blocks would miss the
previous entry, and a summary request could not read the conversation without also writing its
own tail. The markers never change a byte of the content: the prefix up to a breakpoint stays
identical from one request to the next (string content is always sent as blocks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agentloop._core.values.blocks import is_any_thinking, is_blank_text

__all__ = [
    "CACHE_LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "CacheMode",
    "breakpoint_count",
    "with_cache_breakpoints",
]

CacheMode = Literal["conversation", "system", "off"]
"""``conversation``: the full rule; ``system``: tools and system only; ``off``: no marker."""

MAX_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
# A previous request's end this many blocks back or more gets its own breakpoint: a margin under
# the API's lookback, whose exact reach is not documented to the block.
_LOOKBACK_MARGIN = 4
_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def with_cache_breakpoints(
    params: Mapping[str, Any],
    *,
    mode: CacheMode = "conversation",
    mark_newest: bool = True,
    prefix_message: bool = False,
) -> dict[str, Any]:
    """``params`` (the keyword arguments of ``messages.create``) with cache breakpoints placed.

    The given dicts are not changed: what is marked is copied. Breakpoints the caller placed
    are kept and counted; ours are dropped, least useful first, so that there are never more
    than four. ``mark_newest=False`` is for one-off requests (a summary): they read the
    previous request's prefix and write nothing after it. ``prefix_message`` says the first
    message is a compaction prefix (breakpoint 2 of the rule above).
    """
    out = dict(params)
    messages = [_as_blocks(m) for m in out.get("messages") or ()]
    if "messages" in out:
        out["messages"] = messages
    if mode == "off":
        return out
    if isinstance(out.get("system"), str):
        text = out["system"]
        out["system"] = [{"type": "text", "text": text}] if text.strip() else []
        if not out["system"]:
            del out["system"]
    wanted: list[tuple[str, int]] = []  # most useful first
    if out.get("system"):
        wanted.append(("system", len(out["system"]) - 1))
    elif out.get("tools"):
        wanted.append(("tools", len(out["tools"]) - 1))
    if mode == "conversation" and messages:
        newest = len(messages) - 1
        if mark_newest:
            wanted.append(("messages", newest))
        previous = _previous_request_end(messages)
        if previous is not None and (
            not mark_newest or _blocks_after(messages, previous) >= _lookback_reach()
        ):
            wanted.append(("messages", previous))
        if prefix_message and newest > 0 and ("messages", 0) not in wanted:
            wanted.append(("messages", 0))
    room = MAX_BREAKPOINTS - breakpoint_count(out)
    for where, index in wanted[: max(0, room)]:
        _mark(out, where, index)
    return out


def breakpoint_count(params: Mapping[str, Any]) -> int:
    """How many ``cache_control`` markers ``params`` carries (tools, system, messages, and a
    top-level one for automatic caching)."""
    count = 1 if params.get("cache_control") else 0
    system = params.get("system")
    blocks: list[Any] = list(system) if isinstance(system, list) else []
    blocks += list(params.get("tools") or ())
    for message in params.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            blocks += content
    return count + sum(1 for b in blocks if isinstance(b, Mapping) and b.get("cache_control"))


def _lookback_reach() -> int:
    return CACHE_LOOKBACK_BLOCKS - _LOOKBACK_MARGIN


def _as_blocks(message: Any) -> Any:
    """A message whose string content is one text block (the bytes then never depend on
    whether a breakpoint was put on it); anything else as it is."""
    if isinstance(message, Mapping) and isinstance(message.get("content"), str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def _previous_request_end(messages: Sequence[Any]) -> int | None:
    """The newest user message before the newest assistant message: where the conversation's
    previous request ended."""
    seen_assistant = False
    for index in range(len(messages) - 1, -1, -1):
        role = messages[index].get("role") if isinstance(messages[index], Mapping) else None
        if role == "assistant":
            seen_assistant = True
        elif role == "user" and seen_assistant:
            return index
    return None


def _blocks_after(messages: Sequence[Any], index: int) -> int:
    return sum(len(_content(m)) for m in messages[index + 1 :])


def _content(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else []


def _markable(block: Any) -> bool:
    # cache_control is refused on thinking blocks (and on empty text); a breakpoint goes on the
    # nearest earlier block that takes one.
    return isinstance(block, Mapping) and not is_any_thinking(block) and not is_blank_text(block)


def _mark(params: dict[str, Any], where: str, index: int) -> None:
    """Put a breakpoint on the last markable block of ``params[where][index]`` (a message's
    content, a system block or a tool), copying what it changes."""
    if where != "messages":
        items = list(params[where])
        if not isinstance(items[index], Mapping) or items[index].get("cache_control"):
            return
        items[index] = {**items[index], "cache_control": dict(_EPHEMERAL)}
        params[where] = items
        return
    messages = params["messages"]
    content = list(_content(messages[index]))
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if _markable(block):
            if not block.get("cache_control"):
                content[position] = {**block, "cache_control": dict(_EPHEMERAL)}
                messages[index] = {**messages[index], "content": content}
            return
