"""A tool round too big for what is left of the window: its results shortened for the model.

Compaction cannot cut the newest tool results (the model has not seen them yet), so a round whose
results alone overflow the window would end the turn with a refused request. Instead, when the
API refuses the request and compaction cannot make room, the newest round's largest results are
shortened for the model — head, tail and the lines that look like errors or locations
(:func:`agentloop._core.values.shorten.shorten`), saying how much was left out, in the words of
``_core.compaction.round_fit`` — and the request is sent again, while the conversation and
the store keep them whole. A result shortened once is
sent the same way in every later request (the prompt cache keeps working), until a compaction
replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from agentloop._core.compaction.round_fit import MIN_CHARS, result_text, shortened_result
from agentloop._core.compaction_core import CompactionCore
from agentloop._core.values.blocks import Block, ToolResultBlock, is_tool_result
from agentloop._core.values.messages import ContentBlock, Message, compaction_block
from agentloop._core.values.shorten import shorten
from agentloop._errors import AgentloopError
from agentloop._loop.conversation_compacter import count_within
from agentloop._loop.events import LoopEvents

__all__ = [
    "ContextFullError",
    "Shortened",
    "ShorteningLoop",
    "as_sent",
    "fitting",
    "over_window",
    "sent_estimate",
    "shorten_newest",
    "shortened_for_model",
]

Shortened = dict[str, str]
"""What each shortened tool result (by its ``tool_use_id``) is sent as."""

_MARGIN = 0.9
"""How far under the room it aims (the local estimate of a shortened text errs)."""
_REFUSED = (
    re.compile(r"(\d+) tokens? > (\d+)"),  # "prompt is too long: 85252 tokens > 60000 maximum"
    re.compile(r"(\d+) \+ (\d+) > (\d+)"),  # "input length and max_tokens exceed ...: a + b > c"
)


class ContextFullError(AgentloopError):
    """The conversation no longer fits and compaction is disabled or could not help."""


def fitting(
    compacter: CompactionCore | None,
    message: Message,
    system: str,
    tools: Sequence[dict[str, Any]],
) -> Message:
    """``message`` (a new user message) counted; one that alone does not fit the window with
    ``system`` and ``tools`` is refused before it is kept or sent (no compaction can make room
    for it). A huge one is refused from its size: counting stops once it is past the window
    (:func:`count_within`), so its tokens are never all held in memory."""
    if compacter is None:
        return message
    window = compacter.context_window
    fixed = compacter.fixed_tokens(system, tools)
    counted, whole = count_within(compacter, message, fixed, window)
    needs = compacter.calibrate(fixed + counted, 1)
    if needs > window:
        about = "about" if whole else "more than"
        raise ContextFullError(
            f"this message needs {about} {needs:,} tokens with the system prompt and tools, "
            f"more than the {window:,}-token window: it was not "
            "sent — shorten it or send it in parts"
        )
    return message.with_tokens(counted) if whole and message.tokens is None else message


def sent_estimate(
    compacter: CompactionCore, messages: Sequence[Message], local: int, fitted: int | None
) -> int:
    """What a request of ``messages`` sent by the local estimate, for the calibration: their
    ``local`` sum with the system prompt and tools, or ``fitted`` when some results went
    shortened; a server compaction's child counted from its block (the API reads nothing
    before it)."""
    sent = local if fitted is None else fitted
    if len(messages) > 1 and compaction_block(messages[1].content):
        sent -= compacter.count(messages[0])
    return sent


def as_sent(messages: Sequence[Message], shortened: Shortened) -> tuple[tuple[Message, ...], bool]:
    """``messages`` as a request sends them (the results shortened before, shortened), and
    whether any is."""
    if not shortened:
        return tuple(messages), False
    sent = tuple(_as_shortened(message, shortened) for message in messages)
    return sent, any(a is not b for a, b in zip(sent, messages, strict=True))


def over_window(tokens: int | None, compacter: CompactionCore | None) -> str | None:
    """A refusal in the API's words when agentloop's own count of the next request (``tokens``)
    is already over the window: the newest results are shortened before it is sent, never
    after the API refused it. None: it fits (or nothing was counted)."""
    window = compacter.context_window if compacter is not None else None
    if tokens is None or window is None or tokens <= window:
        return None
    return f"prompt is too long by agentloop's own count: {tokens} tokens > {window} maximum"


class ShorteningLoop(Protocol):
    """What :func:`shortened_for_model` reads of a loop."""

    @property
    def compacter(self) -> CompactionCore | None: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def system(self) -> str: ...
    @property
    def tool_definitions(self) -> Sequence[dict[str, Any]]: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def events(self) -> LoopEvents: ...
    @property
    def _shortened(self) -> Shortened: ...


def shortened_for_model(loop: ShorteningLoop, refusal: str) -> bool:
    """:func:`shorten_newest` for ``loop`` (its ``_shortened`` updated), each note a warning;
    whether anything was shortened."""
    compacter = loop.compacter
    if compacter is None:
        return False
    fixed = compacter.fixed_tokens(loop.system, loop.tool_definitions)
    notes = shorten_newest(
        loop.messages, compacter, fixed, loop.max_tokens, loop._shortened, refusal
    )
    for note in notes:
        loop.events.on_warning(note)
    return bool(notes)


def shorten_newest(
    messages: Sequence[Message],
    compacter: CompactionCore,
    fixed: int,
    max_output_tokens: int,
    shortened: Shortened,
    refusal: str,
) -> list[str]:
    """After the API refused ``messages`` as too long (``refusal``, its message, says by how
    much; ``fixed`` estimates the system prompt and tools), shorten the largest results of the
    newest tool round so that they fit beside the rest and a reply of ``max_output_tokens``
    (recorded in ``shortened``). A note per result shortened; none when nothing could be."""
    if not messages or messages[-1].role != "user":
        return []
    sent, _ = as_sent(messages, shortened)
    local = fixed + sum(compacter.count(m) for m in sent)
    measured, room = _measured(refusal, compacter.context_window - max_output_tokens)
    if measured is None:  # the refusal does not say: the calibrated estimate stands in
        measured = max(compacter.calibrate(local, len(sent)), room + 1)
    per_local = measured / max(1, local)  # API tokens per locally estimated token
    excess = (measured - int(room * _MARGIN)) / per_local  # in local tokens
    notes: list[str] = []
    last = messages[-1]
    results = sorted(
        ((len(_sent_text(block, shortened) or ""), index) for index, block in _results(last)),
        reverse=True,
    )
    for _, index in results:
        if excess <= 0:
            break
        block = last.content[index]
        whole = result_text(block)
        current = _sent_text(block, shortened)
        if whole is None or current is None or len(current) <= MIN_CHARS:
            continue
        tokens = max(1, compacter.counter.count_message(Message.user(current)))
        keep = max(MIN_CHARS, int(len(current) * (tokens - excess) / tokens))
        short = shorten(whole, keep)
        if len(short) >= len(current):
            continue
        shortened[str(block.get("tool_use_id"))] = shortened_result(whole, short)
        excess -= tokens - compacter.counter.count_message(Message.user(short))
        notes.append(
            f"a tool result of {len(whole):,} characters did not fit what is left of the "
            f"context window: the model gets it shortened to {len(short):,} (the whole is "
            "stored)"
        )
    return notes


def _measured(refusal: str, room: int) -> tuple[int | None, int]:
    """What the API counted for the refused request, and the room for it (the smaller of what
    the refusal says and ``room``)."""
    found = _REFUSED[1].search(refusal)
    if found is not None:
        tokens, reply, limit = (int(group) for group in found.groups())
        return tokens, min(room, limit - reply)
    found = _REFUSED[0].search(refusal)
    if found is not None:
        tokens, limit = (int(group) for group in found.groups())
        return tokens, min(room, limit)
    return None, room


def _results(message: Message) -> list[tuple[int, ToolResultBlock]]:
    return [(i, b) for i, b in enumerate(message.content) if is_tool_result(b)]


def _sent_text(block: Block, shortened: Shortened) -> str | None:
    short = shortened.get(str(block.get("tool_use_id")))
    return short if short is not None else result_text(block)


def _as_shortened(message: Message, shortened: Shortened) -> Message:
    """``message`` with its shortened tool results as they are sent (itself if none is)."""
    if message.role != "user":
        return message
    blocks: list[ContentBlock] = []
    changed = False
    for block in message.content:
        short = shortened.get(str(block.get("tool_use_id"))) if is_tool_result(block) else None
        # Only over the whole: a result a compaction pruned since is sent as it is now.
        if short is not None and len(result_text(block) or "") > len(short):
            new: dict[str, Any] = {**block, "content": short}
            blocks.append(new)
            changed = True
        else:
            blocks.append(block)
    return replace(message, content=tuple(blocks), tokens=None) if changed else message
