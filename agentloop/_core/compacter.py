"""The compaction core: measure, decide, plan and build the compacted conversation.

:class:`CompactionCore` follows one conversation. It measures context usage, decides, runs a
strategy, validates the result against the Messages API's rules and checks that tokens really
dropped. Everything that touches the outside world (the summarizer model, the preserved-state
hooks, the child's id, the clock) is an effect it yields; the token counter is injected. The
public :class:`~agentloop.ConversationCompacter` adds the default wiring and the drivers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloop._core.context import (
    Calibrator,
    CompactionDecision,
    ContextUsage,
    TokenCounter,
    decide,
    measure,
    trigger_tokens,
)
from agentloop._core.effects import NewSessionId, ReadClock, RunHooks, Steps, perform
from agentloop._core.hooks import PreservedStateHook
from agentloop._core.messages import (
    Message,
    as_messages,
    is_safe_boundary,
    validate_messages,
)
from agentloop._core.model import AsyncModel, Model
from agentloop._core.results import CompactionOutcome, CompactionSummary, CompactionTransition
from agentloop._core.strategies import (
    Split,
    assemble,
    choose_tail_start,
    previous_summary,
    prune_tool_outputs,
    window_note,
    with_state,
)
from agentloop._core.summary import digest, summarize_steps
from agentloop._core.validation import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_THRESHOLD,
    validate_threshold,
    validate_window,
)
from agentloop._errors import ConfigurationError

StrategyName = Literal["auto", "summarize", "sliding_window", "prune", "none"]
STRATEGIES: tuple[StrategyName, ...] = ("auto", "summarize", "sliding_window", "prune", "none")


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


class CompactionCore:
    """Measures context usage at safe boundaries and compacts when the threshold is reached.

    One instance follows one conversation (its circuit breaker and estimate cache are per
    conversation). ``summarizer`` is only handed to the model effect; without one, summaries
    are deterministic digests.
    """

    def __init__(
        self,
        *,
        model_name: str,
        context_window: int,
        counter: TokenCounter,
        summarizer: Model | AsyncModel | None = None,
        max_output_tokens: int = DEFAULT_MAX_TOKENS,
        settings: CompactionSettings | None = None,
        calibration: Calibrator | None = None,
        hooks: Sequence[PreservedStateHook] = (),
        window_source: str = "override",
    ) -> None:
        self.model_name = model_name
        self.context_window = validate_window(context_window)
        self.window_source = window_source
        self.summarizer = summarizer
        self.max_output_tokens = max_output_tokens
        self.settings = settings or CompactionSettings()
        self.hooks = list(hooks)
        self.calibration = calibration
        self.counter = counter
        self._estimates: dict[int, tuple[Message, int]] = {}
        self._converted: dict[int, tuple[object, Message]] = {}
        self._breaker_until: int | None = None

    # -- measuring ---------------------------------------------------------------------------

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

    def fixed_tokens(self, system: str, tools: Sequence[dict[str, Any]]) -> int:
        """Local estimate of what every request carries besides messages: system and tools."""
        return self.counter.count_system(system) + self.counter.count_tools(tools)

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
        return measure(
            msgs,
            window=self.context_window,
            count=self.count,
            fixed_tokens=lambda: self.fixed_tokens(system, tools),
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
        """Whether to compact now, and why (nothing is changed)."""
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

    def steps(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
        decision: CompactionDecision | None = None,
    ) -> Steps[CompactionOutcome]:
        """The whole compaction as a generator of effects (for loop authors who drive it with
        their own model calls); it returns the :class:`CompactionOutcome`. ``decision`` is one
        :meth:`should_compact` just made for these messages (saves measuring twice)."""
        msgs = self.messages_of(messages)
        if decision is None:
            decision = self.should_compact(msgs, system=system, tools=tools, force=force)
        if not decision.compact:
            return CompactionOutcome(decision=decision)
        built = yield from self._compact_steps(msgs, decision, system, tools, instructions)
        if isinstance(built, str):
            return CompactionOutcome(decision=decision, skipped=built)
        compacted, summary = built
        child_id = yield from perform(NewSessionId())
        transition = CompactionTransition(
            original_session_id=session_id,
            new_session_id=child_id,
            compacted_messages=compacted,
            summary=summary,
        )
        return CompactionOutcome(decision=decision, transition=transition)

    def _compact_steps(
        self,
        msgs: list[Message],
        decision: CompactionDecision,
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None,
    ) -> Steps[tuple[list[Message], CompactionSummary] | str]:
        """The compacted history and its summary, or why there is none."""
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
            return "nothing to compact: no safe cut point"
        hooks = yield from perform(RunHooks(tuple(self.hooks)))
        state = hooks.state
        warnings = list(hooks.warnings)
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
                return "nothing to prune: no old tool output is large enough"
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
            return (
                f"compaction would not reduce the context ({tokens_before:,} → {tokens_after:,} "
                "tokens); kept the conversation as it is"
            )
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
        created_at = yield from perform(ReadClock())
        summary = CompactionSummary(
            original_message_count=len(msgs),
            compacted_message_count=len(compacted),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summary=text,
            strategy=strategy,
            model=self.model_name,
            created_at=created_at,
            instructions=instructions,
            fallback_reason=fallback,
            warnings=warnings,
            reason=decision.reason,
        )
        return compacted, summary

    def _fits(
        self, msgs: list[Message], limit: float, system: str, tools: Sequence[dict[str, Any]]
    ) -> bool:
        """Whether the local estimate of ``msgs`` (no API usage) is at most ``limit``: the same
        figure as ``measure``, but cached estimates are summed first and counting stops once the
        limit is passed, so rejecting a pruning that is not enough tokenizes little of it."""
        local = self.fixed_tokens(system, tools)
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
    ) -> Steps[tuple[str, str, str | None]]:
        """The model summary of the head, or the deterministic digest if the model fails."""
        settings = self.settings
        before = previous_summary(msgs)
        previous = before.text if before is not None else None
        head = split.head(msgs)
        joined = "\n".join(x for x in (settings.standing_instructions, instructions or "") if x)
        if self.summarizer is None:
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
                model=self.summarizer,
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
        if self.calibration is not None:
            self.calibration = self.calibration.observe(reported_input_tokens, local_input_tokens)
