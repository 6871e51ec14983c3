"""The prefix a thinking block is bound to, as a hash chain over the request.

- ``system`` and the tools not marked ``defer_loading`` give one digest (:func:`system_tools`).
- The messages give a chain: each message (its role, its other fields, and its content blocks
  without thinking and without ``cache_control``, keys sorted) is one link. A thinking block's
  prefix is the chain before its message followed by the blocks before it in its own message.
  Thinking never enters the chain, so removing thinking anywhere changes no prefix (the gap
  rule, :mod:`fake_api.binding`, catches a removal from the middle).
- With a compaction block the chain starts at the block: an on-demand block (our signature)
  carries the chain state of the messages it summarized, so the kept messages after it continue
  that chain unchanged, unless they do not directly continue the summarized ones (the first
  kept message of the same role as the last summarized one, or a system message; or a block
  written by a model without preserved thinking; or a request whose ``system`` or non-deferred
  tools differ from the compaction request's, rule (c) of kept turns): then the chain starts
  from another state and the kept thinking no longer matches. A threshold block
  (``compact_20260112``) starts a chain of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_api import signing
from fake_api.model_facts import prefix_checked

THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
ROOT = "root"


def strip_markers(value: Any) -> Any:
    """``value`` without any ``cache_control`` (a breakpoint is no content)."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(item) for item in value]
    return value


def content_blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def system_tools(body: Mapping[str, Any]) -> str:
    """The digest of ``system`` and the non-deferred tools (their order does not matter)."""
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    tools = body.get("tools")
    loaded = [
        strip_markers(tool)
        for tool in (tools if isinstance(tools, list) else [])
        if not (isinstance(tool, dict) and tool.get("defer_loading") is True)
    ]
    loaded.sort(key=signing.canonical)
    return signing.digest(signing.canonical({"system": strip_markers(system), "tools": loaded}))


def item(message: Any, blocks: Sequence[Any], *, partial: bool = False) -> dict[str, Any]:
    """One link of the chain: a message (or the start of one) without its thinking."""
    extra = {}
    if isinstance(message, dict):
        extra = {k: strip_markers(v) for k, v in message.items() if k not in ("content",)}
    kept = [
        strip_markers(block)
        for block in blocks
        if not (isinstance(block, dict) and block.get("type") in THINKING_TYPES)
    ]
    return {**extra, "content": kept, "partial": partial}


@dataclass(frozen=True)
class Slot:
    """A thinking (or redacted thinking) block of the request and the prefix it follows."""

    index: int
    position: int
    block: dict[str, Any]
    prefix: str

    @property
    def path(self) -> str:
        return f"messages.{self.index}.content.{self.position}"

    @property
    def signature(self) -> Any:
        key = "data" if self.block.get("type") == "redacted_thinking" else "signature"
        return self.block.get(key)


@dataclass
class Scan:
    """What the server reads of a request's messages, as the prefix check sees it."""

    slots: list[Slot] = field(default_factory=list)
    state: str = ROOT
    """The chain after every visible message."""
    before_last: str = ROOT
    """The chain before the last visible message."""
    last: Any = None
    """The last visible message (as sent; its content may start after a compaction block)."""
    last_blocks: list[Any] = field(default_factory=list)
    first_visible: int = 0


def _block_start(
    message: Any, position: int, secret: bytes, st: str
) -> tuple[str, str | None, bool]:
    """(chain state, role of the last summarized message, preserved) of a compaction block
    read in a request whose system+tools digest is ``st``."""
    block = content_blocks(message)[position]
    payload = signing.verify(secret, block.get("signature"))
    if payload is None or payload.get("kind") != "compaction":
        return signing.step("threshold", block.get("signature") or block.get("content")), None, True
    preserved = prefix_checked(str(payload.get("model")))
    state = str(payload.get("chain"))
    if payload.get("st") != st:  # rule (c): compacted under another system prompt or tool set
        state = signing.step("other system or tools", [state, payload.get("st"), st])
    return state, payload.get("last_role"), preserved


def last_compaction(messages: Sequence[Any]) -> tuple[int, int] | None:
    for index in range(len(messages) - 1, -1, -1):
        blocks = content_blocks(messages[index])
        for position in range(len(blocks) - 1, -1, -1):
            block = blocks[position]
            if isinstance(block, dict) and block.get("type") == "compaction":
                return index, position
    return None


def scan(body: Mapping[str, Any], secret: bytes) -> Scan:
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    result = Scan()
    state = ROOT
    begin, skip = 0, 0  # the first visible message and how many of its blocks are hidden
    found = last_compaction(messages)
    if found is not None:
        begin, position = found
        skip = position + 1
        state, last_role, preserved = _block_start(
            messages[begin], position, secret, system_tools(body)
        )
        rest = content_blocks(messages[begin])[skip:]
        if not rest:
            begin, skip = begin + 1, 0
        kept = messages[begin] if begin < len(messages) else None
        kept_role = kept.get("role") if isinstance(kept, dict) else None
        if kept is not None and (kept_role in (last_role, "system") or not preserved):
            state = signing.step("merged", state)
    result.first_visible = begin
    for index in range(begin, len(messages)):
        message = messages[index]
        blocks = content_blocks(message)
        first = skip if index == begin else 0
        result.before_last = state
        for position in range(first, len(blocks)):
            block = blocks[position]
            if isinstance(block, dict) and block.get("type") in THINKING_TYPES:
                prefix = signing.step(state, item(message, blocks[first:position], partial=True))
                result.slots.append(Slot(index, position, block, prefix))
        state = signing.step(state, item(message, blocks[first:]))
        result.last, result.last_blocks = message, blocks[first:]
    result.state = state
    return result


def reply_prefix(found: Scan, continued: bool, earlier: Sequence[Any]) -> str:
    """The prefix of a block of a new reply, after ``earlier`` blocks of the same reply.
    ``continued``: the reply continues the request's last (assistant) message."""
    for position in range(len(earlier) - 1, -1, -1):
        block = earlier[position]
        if isinstance(block, dict) and block.get("type") == "compaction":  # a threshold's
            state = signing.step("threshold", block.get("signature") or block.get("content"))
            rest = earlier[position + 1 :]
            return signing.step(state, item({"role": "assistant"}, rest, partial=True))
    if continued:
        blocks = [*found.last_blocks, *earlier]
        return signing.step(found.before_last, item(found.last, blocks, partial=True))
    return signing.step(found.state, item({"role": "assistant"}, earlier, partial=True))
