"""Measuring how full the context window is, and deciding whether to compact (pure functions).

Ground truth is the usage the API reported for the newest response; what was appended since is
estimated locally and scaled by a calibration ratio (tiktoken is not Claude's tokenizer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from agentloop._core.measuring.figures import plural, token_figure
from agentloop._core.values.messages import Message

UsageSource = Literal["api", "estimate", "api+estimate"]


class TokenCounter(Protocol):
    """The local tokenizer seam (the tiktoken adapter implements it)."""

    def count_message(self, message: Message) -> int: ...

    def count_system(self, system: str) -> int: ...

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int: ...


class Calibrator(Protocol):
    """Turns a local estimate into the API's units: a ratio plus a cost per message."""

    @property
    def ratio(self) -> float: ...

    @property
    def per_message(self) -> float: ...

    @property
    def samples(self) -> int:
        """How many API-counted requests the calibration learnt from."""
        ...

    def apply(self, local_tokens: int, messages: int = 0) -> int: ...

    def observe(self, api_tokens: int, local_tokens: int, messages: int = 0) -> Calibrator:
        """A new calibrator that has learnt from one request the API counted."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """What to save so that a resumed session keeps what was learnt."""
        ...


class ContextUsage(BaseModel):
    """How full the context window is, and where the number came from."""

    model_config = ConfigDict(frozen=True)

    tokens: int
    window: int
    source: UsageSource
    reported_tokens: int = 0
    """The part the API reported (0 when nothing was reported yet)."""
    estimated_tokens: int = 0
    """The part estimated locally (calibrated), for messages the API has not seen yet."""

    @property
    def fraction(self) -> float:
        return self.tokens / self.window if self.window else 1.0


class CompactionDecision(BaseModel):
    """Whether to compact now, and why (shown by ``/context`` and carried in events)."""

    model_config = ConfigDict(frozen=True)

    compact: bool
    reason: str
    usage: ContextUsage
    trigger_tokens: int
    threshold: float
    held_until: int | None = None
    """Set while the circuit breaker holds automatic compaction back: the context size (tokens)
    past which it tries again."""
    held_because: str | None = None
    """Why the breaker holds (with ``held_until``)."""
    requested: bool = False
    """A compaction asked for (``/compact``, the model, an emergency): it never arms the
    circuit breaker."""


def last_reported_index(messages: Sequence[Message]) -> int | None:
    """Index of the newest message with an API figure: the usage of the response that produced
    it, or a ``count_tokens`` result (scans from the end)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].usage is not None or messages[index].counted is not None:
            return index
    return None


def measure(
    messages: Sequence[Message],
    *,
    window: int,
    count: Callable[[Message], int],
    fixed_tokens: Callable[[], int],
    calibrate: Callable[[int, int], int],
) -> ContextUsage:
    """Context usage: the newest API figure plus calibrated estimates of what came after.

    Work is proportional to the messages appended since the last API figure; only when there
    is none (a fresh or resumed session) does it cover the whole history, and then
    ``fixed_tokens`` (system prompt and tool definitions) is added too. ``calibrate`` turns
    local tokens over a number of messages into the API's units.
    """
    reported_at = last_reported_index(messages)
    if reported_at is None:
        local = fixed_tokens() + sum(count(m) for m in messages)
        estimated = calibrate(local, len(messages))
        return ContextUsage(
            tokens=estimated, window=window, source="estimate", estimated_tokens=estimated
        )
    anchor = messages[reported_at]
    reported = anchor.usage.context_tokens if anchor.usage is not None else anchor.counted or 0
    tail = messages[reported_at + 1 :]
    estimated = calibrate(sum(count(m) for m in tail), len(tail)) if tail else 0
    if anchor.usage is not None and anchor.usage.estimated:
        # Usage a model estimated itself (a test double's): an anchor, but not the API's count.
        total = reported + estimated
        return ContextUsage(tokens=total, window=window, source="estimate", estimated_tokens=total)
    if not tail:
        return ContextUsage(tokens=reported, window=window, source="api", reported_tokens=reported)
    return ContextUsage(
        tokens=reported + estimated,
        window=window,
        source="api+estimate",
        reported_tokens=reported,
        estimated_tokens=estimated,
    )


REPLY_SHARE = 0.15
"""The most of the window the reply reserve takes: what the default threshold (85 %) leaves
free, so that with default settings compaction triggers at 85 % whatever the window's size."""
MIN_REPLY_TOKENS = 512
"""The smallest reply reserve a window must leave (a window whose share is less is refused)."""
BREAKER_GROWTH = 0.10
"""After a compaction that saved too little (or could not get under the trigger), automatic
compaction waits until the context has grown by this share of the window: one more attempt
before the window is full, never one per turn."""

BREAKER_WHY = "the last compaction saved too little"
UNDONE_WHY = "a compaction was just undone"


def reply_reserve(window: int, max_output_tokens: int) -> int:
    """Tokens kept free for the reply: the reply's limit, but never more than
    :data:`REPLY_SHARE` of the window (a small window is not eaten by a large limit)."""
    return max(0, min(max_output_tokens, int(window * REPLY_SHARE)))


def breaker_margin(window: int) -> int:
    """How far the context must grow past a compaction that saved too little before automatic
    compaction tries again."""
    return max(1, int(window * BREAKER_GROWTH))


def breaker_hold(window: int, max_output_tokens: int, trigger: int, tokens: int) -> int | None:
    """Where automatic compaction waits after one that did not help (or was undone): a
    :func:`breaker_margin` past ``tokens`` (and past the trigger), but never where the reply
    reserve no longer fits in the window. None when that leaves no room above the trigger
    and ``tokens``: it then tries again at the trigger, since a longer wait could overflow
    the window."""
    limit = window - reply_reserve(window, max_output_tokens)
    held = min(max(trigger, tokens) + breaker_margin(window), limit)
    return held if held > max(trigger, tokens) else None


@lru_cache(maxsize=64)  # asked at every safe boundary with the same three numbers
def trigger_tokens(window: int, threshold: float, max_output_tokens: int) -> tuple[int, str]:
    """Where compaction triggers: the threshold, or earlier if the reply reserve (see
    :func:`reply_reserve`) would not fit above it."""
    at_threshold = int(window * threshold)
    reserve = reply_reserve(window, max_output_tokens)
    room_for_reply = window - reserve
    if 0 < room_for_reply < at_threshold:
        return room_for_reply, (
            f"triggering at {room_for_reply:,} tokens instead of {at_threshold:,}, the "
            f"threshold {threshold:.0%}, so a reply of up to {reserve:,} tokens still fits"
        )
    return at_threshold, f"threshold {threshold:.0%} of {window:,} tokens"


def decide(
    usage: ContextUsage,
    *,
    threshold: float,
    max_output_tokens: int,
    message_count: int,
    safe_boundary: bool,
    enabled: bool = True,
    strategy_none: bool = False,
    force: bool = False,
    breaker_until: int | None = None,
    breaker_why: str = BREAKER_WHY,
) -> CompactionDecision:
    """The pure decision. ``enabled`` governs automatic compaction; ``force`` (a user's explicit
    request) compacts even when it is off. ``breaker_until`` holds back automatic compaction
    after one that saved too little, until the context has grown past that many tokens; from
    the moment it is set the decision carries it (``held_until``), so what is shown is the
    threshold in force."""
    trigger, why = trigger_tokens(usage.window, threshold, max_output_tokens)
    now = token_figure(usage.tokens, usage.source)  # `~` unless the API counted it
    held = breaker_until if breaker_until is not None and breaker_until > trigger else None

    def result(compact: bool, reason: str) -> CompactionDecision:
        return CompactionDecision(
            compact=compact,
            reason=reason,
            usage=usage,
            trigger_tokens=trigger,
            threshold=threshold,
            held_until=None if compact else held,
            held_because=None if compact or held is None else breaker_why,
            requested=force and compact,
        )

    if strategy_none:
        return result(False, "the compaction strategy is 'none'")
    if not enabled and not force:
        return result(False, "automatic compaction is disabled (run /compact to compact now)")
    if not safe_boundary:
        return result(False, "a tool_use is waiting for its tool_result: not a safe boundary")
    if message_count < 3:
        if message_count == 0:
            return result(False, "no messages yet: nothing to compact")
        return result(False, f"only {plural(message_count, 'message')}: nothing worth compacting")
    if force:
        return result(True, "compaction requested")
    if held is not None and usage.tokens < held:
        return result(
            False,
            f"circuit breaker: {breaker_why}; waiting until the context passes {held:,} tokens "
            f"(now {now}; the trigger is {trigger:,})",
        )
    if usage.tokens < trigger:
        return result(False, f"{now} tokens is below the trigger ({why})")
    return result(True, f"{now} tokens reached the trigger ({why})")
