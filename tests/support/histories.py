"""Hypothesis strategies that generate *valid* conversation histories for the compaction tests.

A history is built by a small state machine that only ever appends what the Messages API
allows next: a user request after an assistant text reply, an assistant reply (text, tool calls
or both) after any user message, and a tool_result message answering every tool_use of the
assistant message before it. Histories end at a safe boundary (no tool_use left unanswered).

Structural choices (roles, number of parallel calls, pins, errors, usage) are drawn from
hypothesis so failures shrink to readable histories; the filler text comes from a seeded
``random.Random`` so that generating a long history stays cheap. Every message carries a unique
tag (``m17``) so that "the same content" really means the same message.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from agentloop._core.compaction.results import CompactionOutcome
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.values.blocks import tool_result_text
from agentloop._core.values.messages import ContentBlock, Message, Usage
from agentloop._core.values.model import ModelRequest, ModelResponse, TextCallback
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.drive import drive
from agentloop.testing import summary_input

WORDS = (
    "parse", "config", "retry", "cache", "token", "window", "session", "schema", "router",
    "fix", "test", "flaky", "timeout", "deploy", "rollback", "index", "query", "lock", "merge",
    "src/app.py", "tests/test_api.py", "README.md", "pyproject.toml", "the", "and", "because",
    "we", "should", "keep", "drop", "rename", "function", "argument", "return", "value",
)  # fmt: skip
TOOLS = ("read_file", "write_file", "edit_file", "bash", "grep")
PATHS = ("src/app.py", "src/db.py", "tests/test_api.py", "docs/index.md", "setup.cfg")

# Text sizes in characters, picked by bucket: mostly short, sometimes long.
TEXT_SIZES = (12, 80, 300, 1200)
OUTPUT_SIZES = (8, 60, 250, 900, 2400)
"""Tool output sizes; the last three are at or above the pruning threshold (200 characters)."""

FIXED_CLOCK = datetime(2026, 1, 1, tzinfo=UTC)

_FILLER = " ".join(random.Random(0).choices(WORDS, k=20_000))


class CharCounter:
    """A cheap token counter (characters / 4) so that tiktoken is not the bottleneck of a test."""

    def count_message(self, message: Message) -> int:
        return 4 + sum(_block_chars(block) for block in message.content) // 4

    def count_system(self, system: str) -> int:
        return len(system) // 4

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        return sum(len(json.dumps(tool)) for tool in tools) // 4


def _block_chars(block: ContentBlock) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text", ""))) + 8
    if kind == "tool_use":
        return len(str(block.get("name", ""))) + len(str(block.get("input", ""))) + 40
    if kind == "tool_result":
        return len(tool_result_text(block)) + 40
    return 40


class StubSummarizer:
    """A zero-latency summarizer model: a short fixed summary that names how much it saw."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        self.calls += 1
        prompt = summary_input(request)
        text = f"## Goal\nsummary #{self.calls} of {len(prompt)} characters"
        return ModelResponse(content=({"type": "text", "text": text},), usage=Usage(10, 10))


@dataclass
class _Builder:
    """Mutable state while a history is drawn: the messages and the id counters."""

    rng: random.Random
    messages: list[Message] = field(default_factory=list)
    tags: int = 0
    tool_ids: int = 0
    reported: int = 0

    def tag(self) -> str:
        self.tags += 1
        return f"m{self.tags}"

    def text(self, size: int) -> str:
        """About ``size`` characters of filler words (a slice of a fixed random text: cheap)."""
        start = self.rng.randrange(len(_FILLER) - size - 20)
        start = _FILLER.index(" ", start) + 1
        return _FILLER[start : start + size].strip()


class _Dice:
    """Several small choices from one hypothesis draw (fewer draws keep generation fast). A
    draw of 0 means the simplest choice everywhere, so failures still shrink to plain
    histories: shortest texts, no pins, no errors, no usage."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.value = draw(st.integers(0, 2**24 - 1))

    def pick(self, n: int) -> int:
        """A choice in ``range(n)``."""
        choice = self.value % n
        self.value //= n
        return choice

    def one_in(self, n: int) -> bool:
        return self.pick(n) == n - 1


def _user_request(draw: st.DrawFn, b: _Builder) -> Message:
    dice = _Dice(draw)
    size = TEXT_SIZES[dice.pick(len(TEXT_SIZES))]
    blocks: list[ContentBlock] = [{"type": "text", "text": f"{b.tag()} please {b.text(size)}"}]
    if dice.one_in(8):  # sometimes a second text block (e.g. an attached note)
        blocks.append({"type": "text", "text": f"{b.tag()} note {b.text(40)}"})
    return Message("user", tuple(blocks), pinned=dice.one_in(6))


def _assistant(draw: st.DrawFn, b: _Builder, *, parallel: int) -> Message:
    dice = _Dice(draw)
    kind = ("text", "tools", "text+tools", "tools")[dice.pick(4)]
    blocks: list[ContentBlock] = []
    if kind != "tools":
        size = TEXT_SIZES[dice.pick(len(TEXT_SIZES))]
        blocks.append({"type": "text", "text": f"{b.tag()} {b.text(size)}"})
    if kind != "text":
        for _ in range(1 + dice.pick(parallel)):
            b.tool_ids += 1
            name = b.rng.choice(TOOLS)
            tool_input: dict[str, Any] = {"path": b.rng.choice(PATHS)}
            if name == "bash":
                tool_input = {"command": f"pytest -k {b.rng.choice(WORDS)}"}
            elif name in ("write_file", "edit_file"):
                tool_input["content"] = b.text(40)
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{b.tool_ids:05d}",
                    "name": name,
                    "input": tool_input,
                }
            )
    usage = None
    if dice.one_in(3):  # some replies carry the usage the API reported
        b.reported += 200 + b.rng.randrange(400)
        usage = Usage(input_tokens=b.reported, output_tokens=50, cache_read_input_tokens=100)
    return Message("assistant", tuple(blocks), pinned=dice.one_in(10), usage=usage)


def _tool_results(draw: st.DrawFn, b: _Builder, ids: list[str]) -> Message:
    dice = _Dice(draw)
    blocks: list[ContentBlock] = []
    order = list(ids)
    if dice.one_in(2):
        order.reverse()  # results may come back in any order
    for tool_id in order:
        block_dice = _Dice(draw)
        size = OUTPUT_SIZES[block_dice.pick(len(OUTPUT_SIZES))]
        body = f"{b.tag()} out {b.text(size)}"
        content: Any = [{"type": "text", "text": body}] if block_dice.one_in(2) else body
        block: ContentBlock = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
        if block_dice.one_in(6):
            block["is_error"] = True
        blocks.append(block)
    if dice.one_in(10):  # a user remark after the results (they must come first)
        blocks.append({"type": "text", "text": f"{b.tag()} also {b.text(30)}"})
    return Message("user", tuple(blocks), pinned=dice.one_in(15))


def _extend(draw: st.DrawFn, b: _Builder, steps: int, *, parallel: int) -> None:
    """Append ``steps`` valid messages, then close any pending tool round."""
    for _ in range(steps):
        last = b.messages[-1] if b.messages else None
        if last is None or (last.role == "assistant" and not last.tool_use_ids):
            b.messages.append(_user_request(draw, b))
        elif last.role == "user":
            b.messages.append(_assistant(draw, b, parallel=parallel))
        else:
            b.messages.append(_tool_results(draw, b, last.tool_use_ids))
    last = b.messages[-1]
    if last.role == "assistant" and last.tool_use_ids:
        b.messages.append(_tool_results(draw, b, last.tool_use_ids))


def _with_estimates(messages: list[Message], counter: CharCounter) -> list[Message]:
    """Every message with its cached estimate filled in, as the agent loop stores them."""
    return [
        m if m.tokens is not None else m.with_tokens(counter.count_message(m)) for m in messages
    ]


def prefix_compacter(strategy: str, *, window: int = 3_000) -> ConversationCompacter:
    """The compacter used to produce an earlier compaction inside a generated history."""
    return ConversationCompacter(
        model_name="test-model",
        context_window=window,
        model=StubSummarizer() if strategy == "summarize" else None,
        max_output_tokens=256,
        settings=CompactionSettings(strategy=strategy),  # type: ignore[arg-type]
        counter=CharCounter(),
        clock=lambda: FIXED_CLOCK,
        new_session_id=lambda: "child",
    )


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_steps: int = 24,
    parallel: int = 3,
    prefix: bool | None = None,
    extend_steps: int = 12,
) -> list[Message]:
    """A valid history ending at a safe boundary.

    ``prefix``: True always, False never, None sometimes starts from an earlier compaction (a
    history is compacted with the summarize or sliding-window strategy and then extended).
    """
    b = _Builder(random.Random(draw(st.integers(0, 2**32 - 1))))
    _extend(draw, b, draw(st.integers(1, max_steps)), parallel=parallel)
    with_prefix = draw(st.booleans()) if prefix is None else prefix
    if with_prefix and len(b.messages) >= 3:
        strategy = draw(st.sampled_from(("summarize", "sliding_window", "digest")))
        compacter = prefix_compacter("summarize" if strategy == "digest" else strategy)
        if strategy == "digest":
            compacter.summarizer = None
        result = compact(compacter, b.messages, force=True).transition
        if result is not None:
            b.messages = list(result.compacted_messages)
            _extend(draw, b, draw(st.integers(0, extend_steps)), parallel=parallel)
    if draw(st.booleans()):
        b.messages = _with_estimates(b.messages, CharCounter())
    return b.messages


def compact(
    compacter: ConversationCompacter, messages: Sequence[Message], **options: Any
) -> CompactionOutcome:
    """Drive one compaction attempt to its outcome (which says why when nothing was done)."""
    return drive(compacter.steps("session", messages, **options), compacter.runtime.perform)


def original_count(messages: Sequence[Message]) -> int:
    """How many original messages a history stands for (a compaction prefix counts for all it
    replaced)."""
    first = messages[0].summary if messages else None
    return len(messages) if first is None else first.replaced_count + len(messages) - 1
