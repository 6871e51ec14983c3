"""The compaction core: measure, decide, plan and build the compacted conversation.

:class:`CompactionCore` follows one conversation. It measures context usage, decides, runs a
strategy, validates the result against the Messages API's rules and measures it: by the API's
own count when the model can count (``count_tokens``), else by the calibrated estimate. A
result above the target is tightened (smaller tail, old content in the tail pruned, the carried
request capped); one the API still counts at or above the trigger is not committed.

Where the model offers on-demand compaction, the job offers the API's summary to the strategy
(``api_compaction.py``: the block first, the kept turns with their thinking): ``summarize``
takes it, ``auto`` once pruning has not reached the target; with another summarizer model,
without the capability or when it fails, agentloop summarizes, and every history it edits
itself loses the thinking the edit invalidated (``Job.finished``).

Everything that touches the outside world (the summarizer model, the token count, the
preserved-state hooks, the child's id, the clock) is an effect it yields; the local token
counter is injected. The public :class:`~agentloop.ConversationCompacter` adds the wiring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from agentloop._core.compaction.api_compaction import (
    PREPARED_API_NOTE,
    OnDemandOffer,
    keeps_from,
    swapped_steps,
)
from agentloop._core.compaction.effects import (
    NewSessionId,
    ReadClock,
    RunHooks,
    Steps,
    perform,
)
from agentloop._core.compaction.prepared import (
    Preparation,
    PreparedSummary,
    SettingsKey,
    prepared_cut,
)
from agentloop._core.compaction.prepared_rest import rest_summary_steps
from agentloop._core.compaction.results import (
    CompactionOutcome,
    CompactionSummary,
    CompactionTransition,
)
from agentloop._core.compaction.round_fit import fitted_steps
from agentloop._core.compaction.strategy import (
    Budget,
    Built,
    Job,
    Measured,
    Strategy,
    cut_points,
    register,
    strategy_named,
)
from agentloop._core.cutting.cut_and_prune import thinking_note
from agentloop._core.cutting.prefix import as_message
from agentloop._core.facts.preserved_state import PreservedStateHook, with_ledger
from agentloop._core.measuring.context import (
    BREAKER_WHY,
    UNDONE_WHY,
    Calibrator,
    CompactionDecision,
    ContextUsage,
    TokenCounter,
    breaker_hold,
    decide,
    measure,
    trigger_tokens,
)
from agentloop._core.measuring.figures import token_figure
from agentloop._core.strategies import BUILTIN
from agentloop._core.values.messages import (
    Message,
    MessageValidator,
    Usage,
    is_safe_boundary,
)
from agentloop._core.values.model import (
    AsyncModel,
    Model,
    ServerCompaction,
)
from agentloop._core.values.model_profile import ModelProfile
from agentloop._core.values.profile_table import profile_of
from agentloop._core.values.settings import STRATEGIES, CompactionSettings, StrategyName
from agentloop._core.values.tool_facts import ToolFacts
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS, validate_window

for _strategy in BUILTIN:
    register(_strategy)

__all__ = [
    "STRATEGIES",
    "CompactionCore",
    "CompactionSettings",
    "StrategyName",
]


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
        self.tool_facts = ToolFacts()  # what the calls did: the facts the ledger carries
        self.calibration = calibration
        self.counter = counter
        self._estimates: dict[int, tuple[Message, int]] = {}
        self._converted: dict[int, tuple[object, Message]] = {}
        self._seen: tuple[object, int, object] | None = None
        self.validator = MessageValidator()
        """Checks this conversation's history incrementally; a loop shares it, so what the loop
        checked as messages arrived is not checked again when it compacts."""
        self._breaker_until: int | None = None
        self._undone_hold: int | None = None
        """The breaker's value set by :meth:`hold` (while it is the one that holds)."""
        self._last_output: tuple[Message, int] | None = None
        self.preparation = Preparation()
        """The newest summary prepared ahead (see :meth:`prepare_job`) and the counts."""

    # -- measuring ---------------------------------------------------------------------------

    @property
    def strategy(self) -> Strategy:
        """The strategy the settings name (from the registry)."""
        return strategy_named(self.settings.strategy)

    def request_edit(self, messages: Sequence[Message] = ()) -> ServerCompaction | None:
        """What every request of this conversation asks the API to do (its compaction). None
        for a history ``messages`` the API's own summary opens: the threshold edit cannot run
        beside its block, so such a history compacts here, by the API's summary again."""
        if not self.settings.enabled or (messages and messages[0].is_compaction_only):
            return None
        return self.strategy.edit(self)

    @property
    def threshold(self) -> float:
        return self.settings.threshold_for(self.model_name)

    @property
    def trigger_tokens(self) -> int:
        return trigger_tokens(self.context_window, self.threshold, self.max_output_tokens)[0]

    def hold(self, tokens: int) -> None:
        """At or past the trigger, hold automatic compaction back until the context has grown
        well past ``tokens`` (a compaction the user just undid is not redone at once), but
        never past the point where the reply reserve no longer fits in the window."""
        if tokens >= self.trigger_tokens:
            held = self._pause(tokens)
            if held is not None and tokens < held:
                self._breaker_until = self._undone_hold = held

    def _pause(self, tokens: int) -> int | None:
        """Where the circuit breaker waits after a compaction that left ``tokens`` (context.py
        holds the rule); None when the window leaves no room for a wait."""
        window, reply = self.context_window, self.max_output_tokens
        return breaker_hold(window, reply, self.trigger_tokens, tokens)

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
        strategy = self.strategy
        decision = decide(
            usage,
            threshold=self.threshold,
            max_output_tokens=self.max_output_tokens,
            message_count=len(msgs),
            safe_boundary=is_safe_boundary(msgs),
            enabled=self.settings.enabled,
            strategy_none=not strategy.compacts,
            force=force,
            breaker_until=self._breaker_until,
            breaker_why=UNDONE_WHY
            if self._breaker_until is not None and self._breaker_until == self._undone_hold
            else BREAKER_WHY,
        )
        opened = bool(msgs) and msgs[0].is_compaction_only  # see request_edit
        if decision.compact and not force and not strategy.automatic and not opened:
            # The API compacts at the trigger; only a compaction asked for runs here.
            trigger = decision.trigger_tokens
            reason = f"the API compacts at {trigger:,} tokens (strategy {strategy.name!r})"
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
        if self.strategy.prepares:
            key = self.prepare_key()
            prepared = self.preparation.usable(session_id, msgs, key, instructions)
        built = yield from self._compact_steps(
            msgs, decision, system, tools, instructions, prepared
        )
        if isinstance(built, str):
            return CompactionOutcome(decision=decision, skipped=built)
        compacted, summary, later = built
        self._last_output = (compacted[0], len(compacted))
        child_id = yield from perform(NewSessionId())
        transition = CompactionTransition(
            original_session_id=session_id,
            new_session_id=child_id,
            compacted_messages=compacted,
            summary=summary,
        )
        return CompactionOutcome(decision=decision, transition=transition, later=later)

    def _compact_steps(
        self,
        msgs: Sequence[Message],
        decision: CompactionDecision,
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None,
        prepared: PreparedSummary | None = None,
    ) -> Steps[tuple[list[Message], CompactionSummary, Message | None] | str]:
        """The compacted history, its summary and what waits for the next user turn (the
        caller holds it), or why there is none."""
        strategy = self.strategy.runs_as()
        budget = Budget.of(decision, self.settings, self.context_window)
        cuts = cut_points(self, msgs, budget, strategy)
        if cuts is None:
            return "nothing to compact: no safe cut point"
        hooks = yield from perform(RunHooks(tuple(self.hooks)))
        hooks = with_ledger(hooks, msgs, self, cuts[1].tail_start)
        job = Job(
            self,
            msgs,
            decision,
            budget=budget,
            split=cuts[0],
            smallest=cuts[1],
            state=hooks.state,
            preserved=hooks,
            system=system,
            tools=tools,
            instructions=instructions,
            api_summary=OnDemandOffer(
                self.api_summary_available, self.summarizer, self.api_summary_max_tokens
            ),
        )
        job.warnings.extend(hooks.warnings)
        built: Built | str | None = None
        if prepared is not None:
            built = yield from self._prepared_steps(job, prepared)
        if built is None:  # the strategy decides, the API's summary among its means
            built = yield from strategy.build(job)
        if isinstance(built, str):
            if not decision.requested:  # one asked for never arms the breaker
                self._breaker_until = self._pause(budget.before)
            return built
        built = yield from fitted_steps(job, built)  # still too big: the newest round shortened
        refused = self._judge(job, built.measured)
        if refused is not None:
            return refused
        if built.measured.thinking_removed:
            job.notes.append(thinking_note(built.measured.thinking_removed))
        self._estimates.clear()
        self._converted.clear()
        compacted = built.messages
        if built.measured.by_api:  # the API's figure anchors the measurement of what follows
            compacted[-1] = replace(compacted[-1], counted=built.measured.tokens)
        created_at = yield from perform(ReadClock())
        return compacted, self._record(job, built, created_at), built.later

    def _judge(self, job: Job, measured: Measured) -> str | None:
        """Why the result is not committed, if it is not; sets the circuit breaker (and warns
        when a committed result saved too little). A compaction asked for (``/compact``) never
        arms it: the user chose to compact, whatever it saves."""
        budget = job.budget
        trigger, before, after = budget.trigger, budget.before, measured.tokens
        requested = job.decision.requested
        # One figure rule (``figures.py``): a bare figure was counted by the API, ``~`` estimated.
        sizes = (
            f"{token_figure(before, job.decision.usage.source)} → "
            f"{token_figure(after, 'api' if measured.by_api else 'estimate')} tokens"
        )
        if after >= before:
            if not requested:
                self._breaker_until = self._pause(before)
            return (
                f"compaction would not reduce the context ({sizes}); kept the conversation as it is"
            )
        if before >= trigger and after >= trigger:
            if requested and after + self.max_output_tokens <= self.context_window:
                # Asked for (/compact, or the API refused the request): nothing more can be
                # kept out, but it fits beside a reply, so the turn goes on in it.
                pause = self._breaker_until = self._pause(after)
                waits = "" if pause is None else f"; automatic compaction pauses until {pause:,}"
                job.warnings.append(
                    f"compaction could not bring the context under the trigger ({sizes}, trigger "
                    f"{trigger:,}): it goes on above it{waits}"
                )
                return None
            if not requested:
                self._breaker_until = self._pause(before)
            return (
                f"compaction could not bring the context under the trigger ({sizes}, trigger "
                f"{trigger:,}); kept the conversation as it is "
                "— start a new session or /compact with instructions to keep less"
            )
        if requested or not budget.refused(after):
            self._breaker_until = None  # a fresh context: nothing to wait for
            return None
        pause = self._breaker_until = self._pause(after)
        waits = "" if pause is None else f"; automatic compaction pauses until {pause:,} tokens"
        job.warnings.append(f"compaction saved only {before - after:,} tokens{waits}")
        return None

    def _record(self, job: Job, built: Built, created_at: datetime) -> CompactionSummary:
        """What the compaction did, with what its summary requests used (those prepared ahead,
        when the summary was; anything prepared and not used is thrown away, counted)."""
        settings, spent, decision = self.settings, job.spent, job.decision
        calls, usage = len(spent), sum(spent, Usage())
        if built.prepared:  # with the one request that brought it up to date, if any
            prepared_usage, prepared_calls = self.preparation.take()
            usage, calls = usage + prepared_usage, calls + prepared_calls
        else:
            self.preparation.discard("the compaction did not use it")
        discarded_usage, discarded_calls = self.preparation.take_discarded()
        return CompactionSummary(
            original_message_count=len(job.msgs),
            compacted_message_count=len(built.messages),
            tokens_before=job.budget.before,
            tokens_after=built.measured.tokens,
            tokens_before_source=decision.usage.source,
            tokens_after_source="api" if built.measured.by_api else "estimate",
            summary=built.text,
            strategy=built.label,
            model=self.model_name,
            created_at=created_at,
            instructions=job.instructions,
            fallback_reason=built.fallback,
            warnings=job.warnings,
            notes=job.notes,
            reason=decision.reason,
            summary_calls=calls,
            summary_usage=usage,
            summary_model=settings.summary_model
            if spent and settings.summary_model not in (None, self.model_name)
            else None,
            summary_continued=built.continued,
            prepared=built.prepared,
            discarded_calls=discarded_calls,
            discarded_usage=discarded_usage,
        )

    def _prepared_steps(self, job: Job, prepared: PreparedSummary) -> Steps[Built | None]:
        """The compaction with the summary prepared ahead, if it leaves at most half the room
        the trigger leaves besides the system prompt and tools (the API's block: if the child,
        every turn since kept whole, saves what a compaction must); else None (it was too far
        behind: thrown away, counted, and the caller summarizes now)."""
        fixed = self.calibrate(self.fixed_tokens(job.system, job.tools))
        half = fixed + max(0, job.budget.trigger - fixed) // 2
        cut = prepared_cut(job.msgs, len(prepared.covered))
        size = 0
        if prepared.block is not None:  # the API's: swapped for exactly what it covers
            covered, cut = len(prepared.covered), None
            if covered < len(job.msgs) and keeps_from(job.msgs, covered):
                built = yield from swapped_steps(job, covered, prepared.block, prepared=True)
                size = built.measured.tokens
                # Usable when it does what a compaction must: the turns since stay whole.
                if not job.budget.refused(size):
                    job.notes.append(PREPARED_API_NOTE)
                    return built
        for tighten in (False, True):
            if cut is None:
                break
            compacted, measured = yield from job.assembled(
                cut, prepared.text, request_chars=job.budget.request_chars, tighten=tighten
            )
            size = measured.tokens
            if measured.tokens <= half:
                job.notes.append("the summary was prepared in the background: no model call now")
                return Built(
                    compacted,
                    measured,
                    "summarize",
                    prepared.text,
                    cut,
                    continued=True,
                    prepared=True,
                )
        self.preparation.fallbacks += 1
        after = f" (it would have left {size:,} tokens, over {half:,})" if size else ""
        if prepared.block is None and cut is not None:  # one request brings it up to date
            job.warnings.append(
                "the summary prepared in the background covered too little of the "
                f"conversation{after}: what it did not cover was folded into it now"
            )
            return (yield from rest_summary_steps(job, prepared))
        self.preparation.discard("it covered too little of the conversation")
        job.warnings.append(
            "the summary prepared in the background covered too little of the "
            f"conversation{after}: it was summarized now instead"
        )
        return None

    def counter_text(self, text: str) -> int:
        """A fast, deliberately high estimate for sizing summarizer chunks (3 chars a token,
        calibrated): re-tokenizing the whole history would cost more than the compaction."""
        ratio = self.calibration.ratio if self.calibration is not None else 1.0
        return int(len(text) / 3 * ratio) + 1

    # -- the API's own summary (see ``api_compaction.py``) ----------------------------------------

    @property
    def profile(self) -> ModelProfile:
        """What the conversation's model can do where the summarizer answers it."""
        return profile_of(self.summarizer, self.model_name)

    def api_summary_available(self) -> bool:
        """Whether the API writes this conversation's summaries (on-demand compaction): the
        model's :attr:`profile` says so, and no other model is to summarize
        (``--compaction-model``)."""
        settings = self.settings
        if not settings.api_summary or settings.summary_model not in (None, self.model_name):
            return False
        return self.profile.on_demand_compaction

    def api_summary_max_tokens(self) -> int:
        """``max_tokens`` of a compaction request (the summary's room)."""
        return max(1024, min(self.settings.summary_max_tokens, self.context_window // 4))

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
