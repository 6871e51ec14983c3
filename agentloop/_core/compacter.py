"""ConversationCompacter: decides when to compact and produces the compacted conversation.

It measures, decides, runs a strategy, validates the result against the Messages API's rules,
checks that tokens really dropped, and hands back a :class:`CompactionTransition` for the caller
to continue under a child session. Clock, ids, tokenizer and model are injected.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, InstanceOf

from agentloop._core.context import (
    DEFAULT_THRESHOLD,
    Calibrator,
    CompactionDecision,
    ContextUsage,
    TokenCounter,
    decide,
    measure,
    trigger_tokens,
    validate_threshold,
    validate_window,
)
from agentloop._core.hooks import PreservedStateHook, run_hooks
from agentloop._core.messages import (
    Message,
    MessageParam,
    SummaryInfo,
    as_messages,
    is_safe_boundary,
    to_params,
    validate_messages,
)
from agentloop._core.model import AsyncModel, Model, ModelRequest, ModelResponse
from agentloop._core.strategies import (
    Split,
    assemble,
    build_prefix,
    choose_tail_start,
    previous_summary,
    prune_tool_outputs,
    window_note,
)
from agentloop._core.summary import digest, summarize_steps
from agentloop._errors import ConfigurationError
from agentloop._loop.drive import acall, adrive, call, drive

StrategyName = Literal["auto", "summarize", "sliding_window", "prune", "none"]
STRATEGIES: tuple[StrategyName, ...] = ("auto", "summarize", "sliding_window", "prune", "none")
STATE_TAG = "<preserved-state>"


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """How and when to compact. Invalid values raise :class:`ConfigurationError` at once."""

    enabled: bool = True
    """Automatic compaction. When False, only an explicit ``force=True`` (``/compact``) runs."""
    threshold: float = DEFAULT_THRESHOLD
    """Fraction of the context window at which compaction triggers (0 < t <= 1)."""
    thresholds: Mapping[str, float] = field(default_factory=dict)
    """Per-model thresholds, up or down from ``threshold``."""
    strategy: StrategyName = "auto"
    """``auto`` prunes old tool outputs first and summarizes only if that is not enough."""
    tail_fraction: float = 0.10
    """The recent tail kept verbatim, as a fraction of the window."""
    target_ratio: float = 0.25
    """Aim: tokens after / tokens before. ``auto`` accepts pruning only if it gets there."""
    min_savings: float = 0.20
    """A compaction saving less than this fraction opens the circuit breaker."""
    window_messages: int | None = None
    """For ``sliding_window``: keep at most this many messages (else the tail token budget)."""
    summary_max_tokens: int = 4096
    summarizer_window: int | None = None
    """The summarizer's own context window (default: the conversation's window)."""
    tool_output_chars: int = 2000
    """Tool outputs longer than this are shortened (head and tail) for the summarizer."""
    standing_instructions: str = ""
    """Instructions every summary follows (e.g. 'always keep the API design decisions')."""

    def __post_init__(self) -> None:
        # Store the validated floats: a threshold given as text ("0.7", from a config file)
        # would otherwise pass validation and break the first trigger computation.
        object.__setattr__(self, "threshold", validate_threshold(self.threshold))
        thresholds: dict[str, float] = {}
        for model, value in self.thresholds.items():
            try:
                thresholds[model] = validate_threshold(value)
            except ConfigurationError as error:
                raise ConfigurationError(f"{error} for model {model}") from None
        object.__setattr__(self, "thresholds", thresholds)
        if self.strategy not in STRATEGIES:
            raise ConfigurationError(
                f"unknown compaction strategy {self.strategy!r} "
                f"(choose from {', '.join(STRATEGIES)})"
            )
        for name in ("tail_fraction", "target_ratio", "min_savings"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfigurationError(f"{name} must be between 0 and 1 (got {value!r})")
        if self.window_messages is not None and self.window_messages < 2:
            raise ConfigurationError("window_messages must be at least 2")
        if self.summary_max_tokens < 256:
            raise ConfigurationError("summary_max_tokens must be at least 256")
        if self.summarizer_window is not None:
            validate_window(self.summarizer_window)

    def threshold_for(self, model: str) -> float:
        return self.thresholds.get(model, self.threshold)


class CompactionSummary(BaseModel):
    """What one compaction did: counts, tokens before/after, the summary and how it was made."""

    model_config = ConfigDict(frozen=True)

    original_message_count: int
    compacted_message_count: int
    tokens_before: int
    tokens_after: int
    summary: str
    strategy: str
    """The strategy that produced the result: summarize, digest, prune, sliding_window."""
    model: str
    created_at: datetime
    instructions: str | None = None
    fallback_reason: str | None = None
    """Why a deterministic digest replaced the model summary, if it did."""
    warnings: list[str] = []
    reason: str = ""
    """Why compaction ran (the decision's reason)."""


class CompactionResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    messages: list[InstanceOf[Message]]
    summary: CompactionSummary


class CompactionTransition(BaseModel):
    """The compacted history and the child session it continues under."""

    model_config = ConfigDict(frozen=True)

    original_session_id: str
    new_session_id: str
    compacted_messages: list[InstanceOf[Message]]
    summary: CompactionSummary

    @property
    def compacted_params(self) -> list[MessageParam]:
        """The compacted history exactly as the Messages API takes it."""
        return to_params(self.compacted_messages)


class _NoModel:
    def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        raise RuntimeError("no summarizer model is configured")


CompactionSteps = Generator[ModelRequest, ModelResponse, CompactionResult | None]


class ConversationCompacter:
    """Measures context usage at safe boundaries and compacts when the threshold is reached.

    One compacter follows one conversation (its circuit breaker and estimate cache are per
    conversation). ``model`` is the summarizer; without one, summaries are deterministic digests.
    """

    def __init__(
        self,
        *,
        model_name: str,
        context_window: int,
        model: Model | AsyncModel | None = None,
        max_output_tokens: int = 8192,
        settings: CompactionSettings | None = None,
        counter: TokenCounter | None = None,
        calibration: Calibrator | None = None,
        hooks: Sequence[PreservedStateHook] = (),
        clock: Callable[[], datetime] | None = None,
        new_session_id: Callable[[], str] | None = None,
        window_source: str = "override",
    ) -> None:
        self.model_name = model_name
        self.context_window = validate_window(context_window)
        self.window_source = window_source
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.settings = settings or CompactionSettings()
        self.hooks = list(hooks)
        self.calibration = calibration
        self._counter = counter
        self._clock = clock or (lambda: datetime.now(UTC))
        self._new_session_id = new_session_id
        self._estimates: dict[int, tuple[Message, int]] = {}
        self._converted: dict[int, tuple[object, Message]] = {}
        self._breaker_until: int | None = None
        self.last_decision: CompactionDecision | None = None
        self.last_outcome: str = ""
        """What the last compaction attempt did, in words (for ``/compact`` feedback)."""

    # -- measuring ---------------------------------------------------------------------------

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            from agentloop._adapters.tokens import TokenEstimator

            self._counter = TokenEstimator()
        return self._counter

    @property
    def threshold(self) -> float:
        return self.settings.threshold_for(self.model_name)

    @property
    def trigger_tokens(self) -> int:
        return trigger_tokens(self.context_window, self.threshold, self.max_output_tokens)[0]

    def count(self, message: Message) -> int:
        """The message's cached estimate, computing (and remembering) it if missing."""
        if message.tokens is not None:
            return message.tokens
        cached = self._estimates.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        tokens = self.counter.count_message(message)
        self._estimates[id(message)] = (message, tokens)
        return tokens

    def calibrate(self, local_tokens: int) -> int:
        return (
            self.calibration.apply(local_tokens) if self.calibration is not None else local_tokens
        )

    def messages_of(self, messages: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
        """Our messages, converting plain API dicts once each (a hand-written loop's history)."""
        # Fast path for a history of Message values (every turn of our loop): one C-level pass
        # instead of a Python loop, so the per-turn check stays flat in history length.
        if isinstance(messages, list | tuple) and set(map(type, messages)) == {Message}:
            return list(messages)
        out: list[Message] = []
        for item in messages:
            if isinstance(item, Message):
                out.append(item)
                continue
            cached = self._converted.get(id(item))
            if cached is None or cached[0] is not item:
                cached = (item, as_messages([item])[0])
                self._converted[id(item)] = cached
            out.append(cached[1])
        return out

    def measure(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
    ) -> ContextUsage:
        """Context usage: reported API usage plus calibrated estimates of what came after."""
        return self._measure(self.messages_of(messages), system, tools)

    def _measure(
        self, msgs: list[Message], system: str, tools: Sequence[dict[str, Any]]
    ) -> ContextUsage:
        counter = self.counter
        return measure(
            msgs,
            window=self.context_window,
            count=self.count,
            fixed_tokens=lambda: counter.count_system(system) + counter.count_tools(tools),
            calibrate=self.calibrate,
        )

    def should_compact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        force: bool = False,
    ) -> CompactionDecision:
        msgs = self.messages_of(messages)
        usage = self._measure(msgs, system, tools)
        return decide(
            usage,
            threshold=self.threshold,
            max_output_tokens=self.max_output_tokens,
            message_count=len(msgs),
            safe_boundary=is_safe_boundary(msgs),
            enabled=self.settings.enabled,
            strategy_none=self.settings.strategy == "none",
            force=force,
            breaker_until=self._breaker_until,
        )

    # -- compacting --------------------------------------------------------------------------

    def compact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionResult | None:
        """Compact if the decision says so (or ``force``); None when nothing was done."""
        steps = self.compaction_steps(messages, system, tools, instructions, force)
        if steps is None:
            return None
        model: Any = self.model or _NoModel()
        return drive(steps, lambda request: call(model, request))

    async def acompact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionResult | None:
        steps = self.compaction_steps(messages, system, tools, instructions, force)
        if steps is None:
            return None
        model: Any = self.model or _NoModel()
        return await adrive(steps, lambda request: acall(model, request))

    def compact_and_transition(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionTransition | None:
        """None when no compaction is needed or possible; otherwise the transition to a child."""
        result = self.compact(
            messages, system=system, tools=tools, instructions=instructions, force=force
        )
        return None if result is None else self.transition_for(session_id, result)

    async def acompact_and_transition(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionTransition | None:
        result = await self.acompact(
            messages, system=system, tools=tools, instructions=instructions, force=force
        )
        return None if result is None else self.transition_for(session_id, result)

    def transition_for(self, session_id: str, result: CompactionResult) -> CompactionTransition:
        """Give a compaction result a child session id."""
        if self._new_session_id is None:
            from sessions import new_session_id

            self._new_session_id = new_session_id
        return CompactionTransition(
            original_session_id=session_id,
            new_session_id=self._new_session_id(),
            compacted_messages=result.messages,
            summary=result.summary,
        )

    def compaction_steps(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None,
        force: bool,
    ) -> CompactionSteps | None:
        """For loop authors: the compaction as a generator of summarizer requests (drive it with
        your own sync or async model calls), or None when the decision is not to compact."""
        msgs = self.messages_of(messages)
        decision = self.should_compact(msgs, system=system, tools=tools, force=force)
        self.last_decision = decision
        self.last_outcome = ""
        if not decision.compact:
            return None
        return self._compact_steps(msgs, decision, system, tools, instructions)

    def _compact_steps(
        self,
        msgs: list[Message],
        decision: CompactionDecision,
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None,
    ) -> CompactionSteps:
        settings = self.settings
        tokens_before = decision.usage.tokens
        tail_budget = min(
            int(self.context_window * settings.tail_fraction),
            int(tokens_before * settings.target_ratio / 2),
        )
        window_messages = (
            settings.window_messages if settings.strategy == "sliding_window" else None
        )
        split = choose_tail_start(
            msgs, tail_tokens=tail_budget, count=self.count, max_messages=window_messages
        )
        if split is None:
            self.last_outcome = "nothing to compact: no safe cut point"
            return None
        state, warnings = run_hooks(self.hooks)
        strategy: str = settings.strategy
        compacted: list[Message] | None = None
        text = ""
        fallback: str | None = None

        margin = max(1, int(self.context_window * 0.05))

        if strategy in ("auto", "prune"):
            pruned = prune_tool_outputs(msgs, keep_from=split.tail_start)
            # Pruning that replaced nothing is no compaction, whatever the token figures say
            # (tokens_before may be API-reported, tokens_after is always a local estimate).
            if any(p.content is not m.content for p, m in zip(pruned, msgs, strict=True)):
                pruned = with_state(pruned, state)
                target = tokens_before * settings.target_ratio
                if strategy == "prune" or self._fits(pruned, target, system, tools):
                    compacted, strategy = pruned, "prune"
                    text = "old tool outputs were pruned"
            elif strategy == "prune":
                self._breaker_until = max(decision.trigger_tokens, tokens_before) + margin
                self.last_outcome = "nothing to prune: no old tool output is large enough"
                return None
        if compacted is None and strategy == "sliding_window":
            text = window_note(msgs, split)
            compacted = assemble(msgs, split, text=text, state=state)
        if compacted is None:
            text, strategy, fallback = yield from self._summary_steps(msgs, split, instructions)
            compacted = assemble(msgs, split, text=text, state=state)

        validate_messages(compacted, allow_pending_tool_use=False)
        tokens_after = self.measure(compacted, system=system, tools=tools).tokens
        if tokens_after >= tokens_before:
            self._breaker_until = max(decision.trigger_tokens, tokens_before) + margin
            self.last_outcome = (
                f"compaction would not reduce the context ({tokens_before:,} → {tokens_after:,} "
                "tokens); kept the conversation as it is"
            )
            return None
        saved_too_little = tokens_after > tokens_before * (1 - settings.min_savings)
        if saved_too_little or tokens_after >= decision.trigger_tokens:
            self._breaker_until = max(decision.trigger_tokens, tokens_after) + margin
            warnings.append(
                f"compaction saved only {tokens_before - tokens_after:,} tokens; automatic "
                f"compaction pauses until the context passes {self._breaker_until:,} tokens"
            )
        else:
            self._breaker_until = None
        self._estimates.clear()
        self._converted.clear()
        self.last_outcome = f"compacted {len(msgs)} → {len(compacted)} messages"
        return CompactionResult(
            messages=compacted,
            summary=CompactionSummary(
                original_message_count=len(msgs),
                compacted_message_count=len(compacted),
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summary=text,
                strategy=strategy,
                model=self.model_name,
                created_at=self._clock(),
                instructions=instructions,
                fallback_reason=fallback,
                warnings=warnings,
                reason=decision.reason,
            ),
        )

    def _fits(
        self, msgs: list[Message], limit: float, system: str, tools: Sequence[dict[str, Any]]
    ) -> bool:
        """Whether the local estimate of ``msgs`` (no API usage) is at most ``limit``: the same
        figure as ``measure``, but cached estimates are summed first and counting stops once the
        limit is passed, so rejecting a pruning that is not enough tokenizes little of it."""
        counter = self.counter
        local = counter.count_system(system) + counter.count_tools(tools)
        local += sum(m.tokens for m in msgs if m.tokens is not None)
        if self.calibrate(local) > limit:
            return False
        for message in msgs:
            if message.tokens is None:
                local += self.count(message)
                if self.calibrate(local) > limit:
                    return False
        return True

    def _summary_steps(
        self, msgs: list[Message], split: Split, instructions: str | None
    ) -> Generator[ModelRequest, ModelResponse, tuple[str, str, str | None]]:
        """The model summary of the head, or the deterministic digest if the model fails."""
        settings = self.settings
        before = previous_summary(msgs)
        previous = before.text if before is not None else None
        head = split.head(msgs)
        joined = "\n".join(x for x in (settings.standing_instructions, instructions or "") if x)
        if self.model is None:
            reason = "no summarizer model is configured"
            return digest(head, reason=reason, previous=previous), "digest", reason
        budget = settings.summarizer_window or self.context_window
        try:
            text = yield from summarize_steps(
                head,
                previous=previous,
                model_name=self.model_name,
                budget_tokens=budget,
                # A small summarizer window must still leave most of its room for the history.
                max_tokens=max(256, min(settings.summary_max_tokens, budget // 4)),
                count=self.counter_text,
                instructions=joined,
                tool_output_chars=settings.tool_output_chars,
            )
        except Exception as error:  # the session must go on: fall back to the digest
            reason = f"the summarizer failed ({type(error).__name__}: {error})"
            return digest(head, reason=reason, previous=previous), "digest", reason
        return text, "summarize", None

    def counter_text(self, text: str) -> int:
        """A fast, deliberately high estimate for sizing summarizer chunks (3 chars a token,
        calibrated): re-tokenizing the whole history would cost more than the compaction."""
        ratio = self.calibration.ratio if self.calibration is not None else 1.0
        return int(len(text) / 3 * ratio) + 1

    # -- calibration -------------------------------------------------------------------------

    def record_usage(self, reported_input_tokens: int, local_input_tokens: int) -> None:
        """Teach the calibration how the API's count of a request relates to our estimate."""
        if self.calibration is not None and hasattr(self.calibration, "observe"):
            self.calibration = self.calibration.observe(reported_input_tokens, local_input_tokens)


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
    blocks = [b for b in first.content if not str(b.get("text", "")).startswith(STATE_TAG)]
    blocks.append({"type": "text", "text": f"{STATE_TAG}\n{state.strip()}\n</preserved-state>"})
    return [replace(first, content=tuple(blocks), tokens=None), *messages[1:]]
