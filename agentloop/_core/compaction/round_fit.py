"""Keeping less when the summary and the smallest tail are still too big: the newest tool
round's largest results shortened.

Every strategy keeps the newest tool round verbatim (the model has not seen its results yet).
With a large fixed prefix (system prompt and tools), the summary plus that one round can stay
above the target: a session that is one long user turn of big tool results then could not be
compacted at all, and ended with the context full. Instead, the round's largest results are
shortened — head, tail and the lines that look like errors or locations
(:func:`agentloop._core.values.shorten.shorten`), saying how much was left out — until the compacted
context reaches its target; the parent session keeps them whole. ``_loop/fit.py`` shortens a
result the API refused the same way, with the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import Built, Job
from agentloop._core.values.blocks import Block, is_tool_result, only_text
from agentloop._core.values.messages import ContentBlock, Message
from agentloop._core.values.shorten import shorten

__all__ = ["MIN_CHARS", "fitted_steps", "result_text", "shorten_results", "shortened_result"]

MIN_CHARS = 2_000
"""A shortened result keeps at least this much of itself."""


def result_text(block: Block) -> str | None:
    """The text of a tool result (a string, or text blocks only), else None."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if only_text(content):
        return "\n".join(str(item.get("text", "")) for item in content)
    return None


def shortened_result(whole: str, short: str) -> str:
    """What the model gets for a tool result ``whole`` shortened to ``short``."""
    return (
        f"[This tool result was shortened to fit the context window: {len(whole):,} "
        f"characters, about {len(whole) - len(short):,} of them left out here. The whole "
        "result is kept in the session; run the tool again on a narrower part (a range of "
        "lines, a pattern) for what is missing.]\n" + short
    )


def shorten_results(
    message: Message, excess: float, count_text: Callable[[str], int]
) -> tuple[Message, list[tuple[int, int]]]:
    """``message`` with its largest tool results shortened until about ``excess`` tokens
    (``count_text``'s) are saved, and (whole, sent) characters of each result shortened."""
    results = sorted(
        (
            (len(text), index)
            for index, block in enumerate(message.content)
            if is_tool_result(block) and (text := result_text(block)) is not None
        ),
        reverse=True,
    )
    content: list[ContentBlock] = list(message.content)
    changes: list[tuple[int, int]] = []
    for size, index in results:
        if excess <= 0:
            break
        if size <= MIN_CHARS:
            continue
        whole = result_text(message.content[index]) or ""
        tokens = max(1, count_text(whole))
        keep = max(MIN_CHARS, int(size * (tokens - excess) / tokens))
        sent = shortened_result(whole, shorten(whole, keep))
        if len(sent) >= size:
            continue
        block: dict[str, Any] = {**message.content[index], "content": sent}
        content[index] = block
        excess -= tokens - count_text(sent)
        changes.append((size, len(sent)))
    if not changes:
        return message, []
    return replace(message, content=tuple(content), tokens=None, usage=None, counted=None), changes


def fitted_steps(job: Job, built: Built) -> Steps[Built]:
    """``built``, or when it is above the job's target with a tool round last, that round's
    largest results shortened to reach it (a note for each); re-validated and measured.
    A pinned round is carried verbatim, as every pinned message is."""
    measured, target, messages = built.measured, job.budget.target, built.messages
    if measured.tokens <= target or len(messages) < 2 or messages[-1].role != "user":
        return built
    if messages[-1].pinned:
        return built
    per_local = measured.tokens / max(1, job.local(messages))  # API tokens per local one
    excess = (measured.tokens - target) / per_local
    last, changes = shorten_results(messages[-1], excess, job.meter.counter_text)
    if not changes:
        return built
    compacted, remeasured = yield from job.finished([*messages[:-1], last])
    if remeasured.tokens >= measured.tokens:
        return built
    for whole, sent in changes:
        job.notes.append(
            f"a tool result of {whole:,} characters in the newest tool round was shortened to "
            f"{sent:,} so that the compacted context fits (the parent session keeps it whole)"
        )
    return replace(built, messages=compacted, measured=remeasured)
