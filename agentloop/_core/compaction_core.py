"""The compaction core: measure, decide, plan and build the compacted conversation.

:class:`CompactionCore` follows one conversation. It measures context usage, decides, runs a
strategy, validates the result against the Messages API's rules and measures it: by the API's
own count when the model can count (``count_tokens``), else by the calibrated estimate. A
result above the target is tightened (smaller tail, old content in the tail pruned, the carried
request capped); one the API still counts at or above the trigger is not committed.

Everything that touches the outside world (the summarizer model, the token count, the
preserved-state hooks, the child's id, the clock) is an effect it yields; the local token
counter is injected. The public :class:`~agentloop.ConversationCompacter` adds the wiring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from agentloop._core.context import (
    Calibrator,
    CompactionDecision,
    ContextUsage,
    TokenCounter,
    decide,
    measure,
    trigger_tokens,
)
from agentloop._core.effects import (
    CountTokens,
    NewSessionId,
    ReadClock,
    RunHooks,
    Steps,
    perform,
)
from agentloop._core.messages import (
    Message,
    MessageValidator,
    Usage,
    is_safe_boundary,
    validate_messages,
)
from agentloop._core.model import AsyncModel, Model, ModelRequest
from agentloop._core.prefix import as_message
from agentloop._core.prepared import (
    Preparation,
    PreparedSummary,
    SettingsKey,
    prepared_cut,
)
from agentloop._core.preserved_state import PreservedStateHook
from agentloop._core.results import (
    CompactionOutcome,
    CompactionSummary,
    CompactionTransition,
)
from agentloop._core.settings import STRATEGIES, CompactionSettings, StrategyName
from agentloop._core.strategies import (
    Split,
    assemble,
    choose_tail_start,
    prune_tool_outputs,
    window_note,
    with_state,
)
from agentloop._core.summary import (
    condense_steps,
    digest,
)
from agentloop._core.validation import DEFAULT_MAX_TOKENS, validate_window
from agentloop._core.whole_summary import previous_text, whole_summary_steps

__all__ = [
    "STRATEGIES",
    "CompactionCore",
    "CompactionSettings",
    "StrategyName",
]

CHARS_PER_TOKEN = 4
"""Only to turn a token cap on a request's text into characters."""


@dataclass(frozen=True, slots=True)
class _Measured:
    tokens: int
    by_api: bool


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
        self._seen: tuple[object, int, object] | None = None
        self.validator = MessageValidator()
        """Checks this conversation's history incrementally; a loop shares it, so what the loop
        checked as messages arrived is not checked again when it compacts."""
        self._breaker_until: int | None = None
        self._last_output: tuple[Message, int] | None = None
        self.preparation = Preparation()
        """The newest summary prepared ahead (see :meth:`prepare_job`) and the counts."""

    # -- measuring ---------------------------------------------------------------------------

    @property
    def threshold(self) -> float:
        return self.settings.threshold_for(self.model_name)

    @property
    def trigger_tokens(self) -> int:
        return trigger_tokens(self.context_window, self.threshold, self.max_output_tokens)[0]

    def count(self, message: Message) -> int:
        """The message's cached local estimate, computing (and remembering) it if missing."""
        if message.tokens is not None:
            return message.tokens
        cached = self._estimates.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        tokens = self.counter.count_message(message)
        self._estimates[id(message)] = (message, tokens)
        return tokens

    def calibrate(self, local_tokens: int, messages: int = 0) -> int:
        """A local estimate in the API's units (what the calibration learnt)."""
        if self.calibration is None:
            return local_tokens
        return self.calibration.apply(local_tokens, messages)

    def fixed_tokens(self, system: str, tools: Sequence[dict[str, Any]]) -> int:
        """Local estimate of what every request carries besides messages: system and tools."""
        return self.counter.count_system(system) + self.counter.count_tools(tools)

    def messages_of(self, messages: Sequence[Message | Mapping[str, Any]]) -> Sequence[Message]:
        """Our messages, converting plain API dicts once each (a hand-written loop's history).

        A list that only grew since the last call (the loop's own history) is checked from where
        the last check stopped, so the per-turn cost follows what was appended.
        """
        start = 0
        if self._seen is not None:
            seen_list, seen_len, seen_last = self._seen
            grown = messages is seen_list and 0 < seen_len <= len(messages)
            if grown and messages[seen_len - 1] is seen_last:
                start = seen_len
        if all(type(item) is Message for item in messages[start:]):
            if messages:
                self._seen = (messages, len(messages), messages[-1])
            return cast(Sequence[Message], messages)
        out: list[Message] = []
        for index, item in enumerate(messages):
            if isinstance(item, Message):
                out.append(item)
                continue
            cached = self._converted.get(id(item))
            if cached is None or cached[0] is not item:
                cached = (item, as_message(item, first=index == 0))
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
        """Context usage: the API's last figure plus calibrated estimates of what came after."""
        return self._measure(self.messages_of(messages), system, tools)

    def _measure(
        self, msgs: Sequence[Message], system: str, tools: Sequence[dict[str, Any]]
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
        decision = decide(
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
        if decision.compact and not force and self.settings.strategy == "server":
            # The API compacts at the trigger; only a compaction asked for runs here.
            reason = f"the API compacts at {decision.trigger_tokens:,} tokens (strategy 'server')"
            return decision.model_copy(update={"compact": False, "reason": reason})
        return decision

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
        :meth:`should_compact` just made for these messages (saves measuring twice).

        An invalid history is refused first (:class:`MessageValidationError` naming the
        caller's index), before any model call.
        """
        msgs = self.messages_of(messages)
        self.validator.validate(msgs, allow_pending_tool_use=True)
        if decision is None:
            decision = self.should_compact(msgs, system=system, tools=tools, force=force)
        if not decision.compact:
            return CompactionOutcome(decision=decision)
        last = self._last_output
        if not force and last is not None and msgs[0] is last[0] and len(msgs) == last[1]:
            return CompactionOutcome(
                decision=decision, skipped="nothing new since the last compaction"
            )
        prepared = None
        if self.settings.strategy in ("auto", "summarize"):
            key = self.prepare_key()
            prepared = self.preparation.usable(session_id, msgs, key, instructions)
        built = yield from self._compact_steps(
            msgs, decision, system, tools, instructions, prepared
        )
        if isinstance(built, str):
            return CompactionOutcome(decision=decision, skipped=built)
        compacted, summary = built
        self._last_output = (compacted[0], len(compacted))
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
        msgs: Sequence[Message],
        decision: CompactionDecision,
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None,
        prepared: PreparedSummary | None = None,
    ) -> Steps[tuple[list[Message], CompactionSummary] | str]:
        """The compacted history and its summary, or why there is none."""
        settings = self.settings
        trigger = decision.trigger_tokens
        tokens_before = decision.usage.tokens
        # Automatic compaction aims at a share of the trigger; one asked for below it (/compact),
        # at a share of what there is.
        target = int(min(trigger, tokens_before) * settings.target_ratio)
        margin = max(1, int(self.context_window * 0.05))
        split = choose_tail_start(
            msgs,
            tail_tokens=min(int(self.context_window * settings.tail_fraction), target // 2),
            count=lambda message: self.calibrate(self.count(message), 1),
            max_messages=settings.window_messages
            if settings.strategy == "sliding_window"
            else None,
        )
        if split is None:
            return "nothing to compact: no safe cut point"
        hooks = yield from perform(RunHooks(tuple(self.hooks)))
        warnings = list(hooks.warnings)
        # Asked for under "server" (/compact, an emergency): the API cannot be made to compact
        # now, so it runs here as "auto".
        strategy: str = "auto" if settings.strategy == "server" else settings.strategy
        request_chars = CHARS_PER_TOKEN * (
            settings.request_max_tokens or max(2_000, int(self.context_window * 0.05))
        )
        smallest = choose_tail_start(msgs, tail_tokens=0, count=self.count)
        assert smallest is not None  # a cut exists, so the last cut does
        compacted: list[Message] | None = None
        measured = _Measured(tokens_before, False)
        text = ""
        fallback: str | None = None
        notes: list[str] = []
        if prepared is not None:
            # At most half the room the trigger leaves besides the system prompt and tools.
            fixed = self.calibrate(self.fixed_tokens(system, tools))
            half = fixed + max(0, trigger - fixed) // 2
            cut = prepared_cut(msgs, len(prepared.covered))
            size = 0
            for tighten in (False, True):  # at most half the trigger, or it was too far behind
                if cut is None:
                    break
                compacted, measured = yield from self._assembled(
                    msgs, cut, prepared.text, hooks.state, request_chars, tighten, system, tools
                )
                size = measured.tokens
                if measured.tokens <= half:
                    strategy, text = "summarize", prepared.text
                    notes.append("the summary was prepared in the background: no model call now")
                    break
                compacted = None
            if compacted is None:
                self.preparation.fallbacks += 1
                self.preparation.discard("it covered too little of the conversation")
                after = f" (it would have left {size:,} tokens, over {half:,})" if size else ""
                warnings.append(
                    "the summary prepared in the background covered too little of the "
                    f"conversation{after}: it was summarized now instead"
                )
                prepared = None

        if compacted is None and strategy in ("auto", "prune"):
            pruned_to, so_far = 0, list(msgs)
            for keep_from in dict.fromkeys((split.tail_start, smallest.tail_start)):
                # The smallest tail prunes further than the planned one: only the difference.
                so_far = prune_tool_outputs(so_far, keep_from=keep_from, start=pruned_to)
                pruned_to = keep_from
                # Pruning that replaced nothing is no compaction, whatever the figures say.
                if all(p.content is m.content for p, m in zip(so_far, msgs, strict=True)):
                    continue
                pruned = with_state(so_far, hooks.state)
                # auto settles for pruning only if it reaches the target: a cheap estimate
                # first, so a pruning far from it is never counted.
                local = self._local(pruned, system, tools)
                if strategy == "auto" and self.calibrate(local, len(pruned)) > target * 1.2:
                    break
                measured = yield from self._measure_result(pruned, system, tools, local)
                if strategy == "prune" or measured.tokens <= target:
                    compacted, strategy, text = pruned, "prune", "old tool outputs were pruned"
                if measured.tokens <= target:
                    break
            if compacted is None and strategy == "prune":
                self._breaker_until = max(trigger, tokens_before) + margin
                return "nothing to prune: no old tool output, input or image is large enough"

        spent: list[Usage] = []
        continued = prepared is not None
        if compacted is None:
            # One summary of the whole history, then the verbatim tail chosen within the
            # budget: tightening drops tail (the planned tail; then old content in it pruned
            # and the carried request capped; then the smallest tail), never asks again.
            if strategy != "sliding_window":
                text, strategy, fallback, continued = yield from whole_summary_steps(
                    msgs,
                    decision.usage.tokens,
                    settings=settings,
                    model_name=self.model_name,
                    window=self.context_window,
                    summarizer=self.summarizer,
                    system=system,
                    tools=tools,
                    instructions=instructions,
                    spent=spent,
                    count_text=self.counter_text,
                )
            levels = dict.fromkeys(((split, False), (split, True), (smallest, True)))
            for cut, tighten in levels:
                if strategy == "sliding_window":
                    text = window_note(msgs, cut)
                elif strategy == "digest":  # no model call: a digest of just what is replaced
                    head = msgs[: cut.tail_start]
                    text = digest(head, reason=fallback or "", previous=previous_text(msgs))
                compacted, measured = yield from self._assembled(
                    msgs,
                    cut,
                    text,
                    hooks.state,
                    request_chars if tighten else None,
                    tighten,
                    system,
                    tools,
                )
                if measured.tokens <= target:
                    break
            refused = measured.tokens >= trigger or measured.tokens > tokens_before * (
                1 - settings.min_savings
            )
            if strategy == "summarize" and refused:
                # Only a summary too long for the compaction to help is asked for again, shorter.
                summary_tokens = self.counter_text(text)
                if summary_tokens > target // 2:
                    try:
                        text = yield from condense_steps(
                            text,
                            model_name=self.settings.summary_model or self.model_name,
                            target_tokens=max(256, target // 3),
                            max_tokens=max(256, min(settings.summary_max_tokens, target // 2)),
                            model=self.summarizer,
                            spent=spent,
                        )
                    except Exception as error:  # the longer summary stands
                        warnings.append(f"the summary could not be condensed ({error})")
                    else:
                        notes.append(
                            f"the summary was too long (about {summary_tokens:,} tokens): it "
                            "was condensed in a second summarizer call"
                        )
                        compacted, measured = yield from self._assembled(
                            msgs, smallest, text, hooks.state, request_chars, True, system, tools
                        )
        assert compacted is not None

        tokens_after = measured.tokens
        unit = "tokens" if measured.by_api else "tokens (estimated)"
        if tokens_after >= tokens_before:
            self._breaker_until = max(trigger, tokens_before) + margin
            return (
                f"compaction would not reduce the context ({tokens_before:,} → {tokens_after:,} "
                f"{unit}); kept the conversation as it is"
            )
        if tokens_before >= trigger and tokens_after >= trigger:
            self._breaker_until = max(trigger, tokens_before) + margin
            return (
                f"compaction could not bring the context under the trigger ({tokens_before:,} → "
                f"{tokens_after:,} {unit}, trigger {trigger:,}); kept the conversation as it is "
                "— start a new session or /compact with instructions to keep less"
            )
        if tokens_after > tokens_before * (1 - settings.min_savings) or tokens_after >= trigger:
            self._breaker_until = max(trigger, tokens_after) + margin
            warnings.append(
                f"compaction saved only {tokens_before - tokens_after:,} tokens; automatic "
                f"compaction pauses until the context passes {self._breaker_until:,} tokens"
            )
        else:
            self._breaker_until = None
        self._estimates.clear()
        self._converted.clear()
        if measured.by_api:  # the API's figure anchors the measurement of what follows
            compacted[-1] = replace(compacted[-1], counted=tokens_after)
        created_at = yield from perform(ReadClock())
        calls, usage = len(spent), sum(spent, Usage())
        if prepared is not None:
            usage, calls = self.preparation.take()
        else:  # anything prepared and not used is thrown away (counted)
            self.preparation.discard("the compaction did not use it")
        discarded_usage, discarded_calls = self.preparation.take_discarded()
        summary = CompactionSummary(
            original_message_count=len(msgs),
            compacted_message_count=len(compacted),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            tokens_before_source=decision.usage.source,
            tokens_after_source="api" if measured.by_api else "estimate",
            summary=text,
            strategy=strategy,
            model=self.model_name,
            created_at=created_at,
            instructions=instructions,
            fallback_reason=fallback,
            warnings=warnings,
            notes=notes,
            reason=decision.reason,
            summary_calls=calls,
            summary_usage=usage,
            summary_model=settings.summary_model
            if spent and settings.summary_model not in (None, self.model_name)
            else None,
            summary_continued=continued,
            prepared=prepared is not None,
            discarded_calls=discarded_calls,
            discarded_usage=discarded_usage,
        )
        return compacted, summary

    def _local(self, msgs: Sequence[Message], system: str, tools: Sequence[dict[str, Any]]) -> int:
        """The local estimate of a whole candidate request (no API figure in it)."""
        return self.fixed_tokens(system, tools) + sum(self.count(m) for m in msgs)

    def _measure_result(
        self, msgs: Sequence[Message], system: str, tools: Sequence[dict[str, Any]], local: int
    ) -> Steps[_Measured]:
        """A candidate's size as the API counts it, or the calibrated estimate of ``local``
        when the model cannot count. Every count also teaches the calibration."""
        request = ModelRequest(
            model=self.model_name,
            messages=tuple(msgs),
            system=system,
            tools=tuple(tools),
            max_tokens=self.max_output_tokens,
            metadata={"purpose": "count"},
        )
        counted = yield from perform(CountTokens(request))
        if counted is None:
            return _Measured(self.calibrate(local, len(msgs)), False)
        self.record_usage(counted, local, len(msgs))
        return _Measured(counted, True)

    def _assembled(
        self,
        msgs: Sequence[Message],
        cut: Split,
        text: str,
        state: str,
        request_chars: int | None,
        tighten: bool,
        system: str,
        tools: Sequence[dict[str, Any]],
    ) -> Steps[tuple[list[Message], _Measured]]:
        """Prefix (``text``) + the verbatim tail from ``cut``, validated and measured."""
        compacted = assemble(
            msgs,
            cut,
            text=text,
            state=state,
            request_max_chars=request_chars,
            prune_tail=tighten,
        )
        validate_messages(compacted, allow_pending_tool_use=False)
        local = self._local(compacted, system, tools)
        measured = yield from self._measure_result(compacted, system, tools, local)
        return compacted, measured

    def counter_text(self, text: str) -> int:
        """A fast, deliberately high estimate for sizing summarizer chunks (3 chars a token,
        calibrated): re-tokenizing the whole history would cost more than the compaction."""
        ratio = self.calibration.ratio if self.calibration is not None else 1.0
        return int(len(text) / 3 * ratio) + 1

    # -- summaries prepared ahead (see ``prepared.py``) -----------------------------------------

    def prepare_key(self) -> SettingsKey:
        """What a prepared summary depends on besides the messages."""
        s = self.settings
        return (self.model_name, s.summary_model, s.standing_instructions, s.summary_max_tokens)

    # -- calibration -------------------------------------------------------------------------

    def record_usage(self, api_tokens: int, local_tokens: int, messages: int = 0) -> None:
        """Teach the calibration what the API counted for a request we estimated locally."""
        if self.calibration is not None:
            self.calibration = self.calibration.observe(api_tokens, local_tokens, messages)
