"""What a compaction strategy is: one small protocol, the registry, and the :class:`Budget`.

A strategy says what it keeps (:meth:`Strategy.max_tail_messages`), what it asks the model
(:meth:`Strategy.edit`, for a strategy the API runs) and builds its result through a
:class:`Job` (:meth:`Strategy.build`), which measures every candidate. The compaction hands it
a job that calls the summarizer and counts with the API, and offers the API's own summary where
the model writes one (:meth:`Job.api_summary`: the strategy decides whether and when to use it);
the preview (``plan.py``) hands it a :class:`PreviewJob` that does neither, so both follow the
same steps under the same budget.

Adding a strategy: a module with one class and its name in ``BUILTIN`` of
``strategies/__init__.py`` (or :func:`register` from your own code).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agentloop._core.compaction.effects import CountTokens, Steps, perform
from agentloop._core.compaction.summary import condense_steps
from agentloop._core.compaction.whole_summary import whole_summary_steps
from agentloop._core.cutting.cut_and_prune import (
    Split,
    assemble,
    choose_tail_start,
    unbound_thinking,
)
from agentloop._core.facts.preserved_state import HookOutput, PreservedStateHook
from agentloop._core.measuring.context import CompactionDecision, ContextUsage
from agentloop._core.values.messages import Message, Usage, validate_messages
from agentloop._core.values.model import AsyncModel, Model, ModelRequest, ServerCompaction
from agentloop._core.values.model_profile import ModelProfile
from agentloop._core.values.settings import CompactionSettings, register_name
from agentloop._core.values.tool_facts import ToolFacts
from agentloop._errors import ConfigurationError

CHARS_PER_TOKEN = 4
"""Only to turn a token cap on a request's text into characters."""


class Meter(Protocol):
    """What a strategy, the preview and server-side compaction read of a conversation's
    compacter: its settings, its counts and its calibration (``CompactionCore`` is one)."""

    model_name: str
    context_window: int
    max_output_tokens: int
    settings: CompactionSettings
    summarizer: Model | AsyncModel | None
    hooks: list[PreservedStateHook]
    tool_facts: ToolFacts

    @property
    def strategy(self) -> Strategy: ...

    @property
    def profile(self) -> ModelProfile: ...

    @property
    def threshold(self) -> float: ...

    @property
    def trigger_tokens(self) -> int: ...

    def count(self, message: Message) -> int: ...

    def calibrate(self, local_tokens: int, messages: int = 0) -> int: ...

    def fixed_tokens(self, system: str, tools: Sequence[dict[str, Any]]) -> int: ...

    def counter_text(self, text: str) -> int: ...

    def record_usage(self, api_tokens: int, local_tokens: int, messages: int = 0) -> None: ...

    def measure(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
    ) -> ContextUsage: ...

    def should_compact(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        force: bool = False,
    ) -> CompactionDecision: ...


@dataclass(frozen=True, slots=True)
class Measured:
    """A candidate's size: counted by the API, or the calibrated local estimate."""

    tokens: int
    by_api: bool
    thinking_removed: int = 0
    """Thinking blocks the candidate lost to the edit (``cut_and_prune.unbound_thinking``)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What a compaction aims at and how much it may keep: the compaction and its preview
    both take it from :meth:`of`, so they cannot disagree about the target or the tail."""

    trigger: int
    before: int
    target: int
    """Automatic compaction aims at a share of the trigger; one asked for below it
    (/compact), at a share of what there is."""
    tail_tokens: int
    """The verbatim tail's budget."""
    request_chars: int
    """The carried request's cap, when a result must be tightened."""
    min_savings: float

    @classmethod
    def of(cls, decision: CompactionDecision, settings: CompactionSettings, window: int) -> Budget:
        trigger, before = decision.trigger_tokens, decision.usage.tokens
        target = int(min(trigger, before) * settings.target_ratio)
        request_tokens = settings.request_max_tokens or max(2_000, int(window * 0.05))
        return cls(
            trigger=trigger,
            before=before,
            target=target,
            tail_tokens=min(int(window * settings.tail_fraction), target // 2),
            request_chars=CHARS_PER_TOKEN * request_tokens,
            min_savings=settings.min_savings,
        )

    def refused(self, tokens: int) -> bool:
        """Too large to be worth committing: at the trigger, or saving too little."""
        return tokens >= self.trigger or tokens > self.before * (1 - self.min_savings)


@dataclass(slots=True)
class Built:
    """A strategy's result: the compacted history, its size and how it was made."""

    messages: list[Message]
    measured: Measured
    label: str
    """What is recorded as the strategy that ran (``digest`` for a summary without a model)."""
    text: str
    cut: Split | None = None
    """Where the verbatim tail starts; None when no message was replaced (pruning)."""
    fallback: str | None = None
    continued: bool = False
    prepared: bool = False
    """Made from the summary prepared in the background."""
    later: Message | None = None
    """What the child carries over but could not place yet (it ends with a reply): a system
    message to append after the next user message (see ``api_compaction.py``)."""


class ApiSummary(Protocol):
    """The API's own summary (on-demand compaction) as the core offers it to a job: asked
    whether it is available only when a strategy wants it (``api_compaction.OnDemandOffer``)."""

    def available(self) -> bool: ...

    def __call__(self, job: Job) -> Steps[Built | str]: ...


NOT_OFFERED = "the API does not write summaries here"


@dataclass(frozen=True, slots=True)
class WholeSummary:
    text: str
    label: str
    fallback: str | None
    continued: bool


class Job:
    """One compaction's inputs, and the effects a strategy may ask for (measure a candidate,
    summarize the history, condense a summary). Warnings and notes collect here."""

    def __init__(
        self,
        meter: Meter,
        msgs: Sequence[Message],
        decision: CompactionDecision,
        *,
        budget: Budget,
        split: Split,
        smallest: Split,
        state: str,
        system: str,
        tools: Sequence[dict[str, Any]],
        instructions: str | None = None,
        api_summary: ApiSummary | None = None,
        preserved: HookOutput | None = None,
    ) -> None:
        self.meter = meter
        self.settings = meter.settings
        self.msgs = msgs
        self.decision = decision
        self.budget = budget
        self.split = split
        self.smallest = smallest
        self.state = state
        """The preserved state as the compacted context's opening renders it (ledger first)."""
        self.preserved = preserved
        """The same in parts (what the hooks rendered, the ledger), when the job has them."""
        self.system = system
        self.tools = tools
        self.instructions = instructions
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.spent: list[Usage] = []
        self._api_summary = api_summary

    @property
    def offers_api_summary(self) -> bool:
        """Whether the API can write this compaction's summary (the model offers on-demand
        compaction and no other model is to summarize)."""
        return self._api_summary is not None and self._api_summary.available()

    def api_summary(self) -> Steps[Built | str]:
        """The compaction by the API's own summary (the block first, the kept turns with their
        thinking), measured; or why there is none (the strategy then compacts itself)."""
        if self._api_summary is None or not self._api_summary.available():
            return NOT_OFFERED
        return (yield from self._api_summary(self))

    def local(self, candidate: Sequence[Message]) -> int:
        """The local estimate of a whole candidate request (no API figure in it)."""
        meter = self.meter
        return meter.fixed_tokens(self.system, self.tools) + sum(meter.count(m) for m in candidate)

    def estimate(self, candidate: Sequence[Message], local: int) -> int:
        """The calibrated estimate of ``local`` (what a cheap check compares with the target)."""
        return self.meter.calibrate(local, len(candidate))

    def measure(self, candidate: Sequence[Message], local: int) -> Steps[Measured]:
        """A candidate's size as the API counts it, or the calibrated estimate of ``local``
        when the model cannot count. Every count also teaches the calibration."""
        meter = self.meter
        request = ModelRequest(
            model=meter.model_name,
            messages=tuple(candidate),
            system=self.system,
            tools=tuple(self.tools),
            max_tokens=meter.max_output_tokens,
            metadata={"purpose": "count"},
        )
        counted = yield from perform(CountTokens(request))
        if counted is None:
            return Measured(self.estimate(candidate, local), False)
        meter.record_usage(counted, local, len(candidate))
        return Measured(counted, True)

    def assembled(
        self, cut: Split, text: str, *, request_chars: int | None, tighten: bool
    ) -> Steps[tuple[list[Message], Measured]]:
        """Prefix (``text``) + the verbatim tail from ``cut``, validated and measured."""
        compacted = assemble(
            self.msgs,
            cut,
            text=text,
            state=self.state,
            request_max_chars=request_chars,
            prune_tail=tighten,
        )
        return (yield from self.finished(compacted))

    def finished(self, candidate: Sequence[Message]) -> Steps[tuple[list[Message], Measured]]:
        """A history agentloop edited itself, as it may be sent: without the thinking the edit
        invalidated (every client-side result passes here), validated and measured."""
        compacted, removed = unbound_thinking(self.msgs, candidate)
        validate_messages(compacted, allow_pending_tool_use=False)
        measured = yield from self.measure(compacted, self.local(compacted))
        return compacted, replace(measured, thinking_removed=removed)

    def whole_summary(self) -> Steps[WholeSummary]:
        """The summary of the whole history (see ``whole_summary.py``)."""
        meter = self.meter
        text, label, fallback, continued = yield from whole_summary_steps(
            self.msgs,
            self.decision.usage.tokens,
            settings=self.settings,
            model_name=meter.model_name,
            window=meter.context_window,
            summarizer=meter.summarizer,
            system=self.system,
            tools=self.tools,
            instructions=self.instructions,
            spent=self.spent,
            count_text=meter.counter_text,
        )
        return WholeSummary(text, label, fallback, continued)

    def summary_tokens(self, text: str) -> int:
        return self.meter.counter_text(text)

    def condense(self, text: str) -> Steps[str]:
        """The summary asked for again, shorter (raises when the summarizer fails)."""
        target, settings = self.budget.target, self.settings
        condensed: str = yield from condense_steps(
            text,
            model_name=settings.summary_model or self.meter.model_name,
            target_tokens=max(256, target // 3),
            max_tokens=max(256, min(settings.summary_max_tokens, target // 2)),
            model=self.meter.summarizer,
            spent=self.spent,
        )
        return condensed


class PreviewJob(Job):
    """A job for the preview: no model call and no count. Candidates are measured by the local
    estimate, scaled by what the API's last figure says of it (``scale``); a summary, not
    written yet, counts as ``allowance`` tokens, so the preview can run at each end of the
    summary's possible size (``plan.py``)."""

    def __init__(
        self,
        meter: Meter,
        msgs: Sequence[Message],
        decision: CompactionDecision,
        *,
        budget: Budget,
        split: Split,
        smallest: Split,
        state: str,
        system: str,
        tools: Sequence[dict[str, Any]],
        allowance: int = 0,
        scale: float = 1.0,
    ) -> None:
        super().__init__(
            meter,
            msgs,
            decision,
            budget=budget,
            split=split,
            smallest=smallest,
            state=state,
            system=system,
            tools=tools,
        )
        self.allowance = allowance
        self.scale = scale
        self.asked_summary = False

    def local(self, candidate: Sequence[Message]) -> int:
        # A pruned message's estimate is scaled from the original's (cheap, and the API's
        # count corrects it); the preview, which has no count, counts it again.
        originals = {id(message) for message in self.msgs}
        recounted = [
            m if id(m) in originals or m.tokens is None else replace(m, tokens=None)
            for m in candidate
        ]
        return Job.local(self, recounted)

    def estimate(self, candidate: Sequence[Message], local: int) -> int:
        own = self.meter.calibrate(local, len(candidate))
        # The summary's allowance is in the API's units already.
        extra = self.allowance if candidate and candidate[0].summary is not None else 0
        return round(own * self.scale) + (extra if self.asked_summary else 0)

    def measure(self, candidate: Sequence[Message], local: int) -> Steps[Measured]:
        return Measured(self.estimate(candidate, local), False)
        yield  # a generator with no effect

    def whole_summary(self) -> Steps[WholeSummary]:
        if self.meter.summarizer is None:  # the digest: written here, as the compaction would
            return (yield from Job.whole_summary(self))
        self.asked_summary = True
        return WholeSummary("", "summarize", None, False)

    def summary_tokens(self, text: str) -> int:
        return self.allowance if self.asked_summary else Job.summary_tokens(self, text)

    def condense(self, text: str) -> Steps[str]:
        settings, target = self.settings, self.budget.target
        condensed = max(256, min(settings.summary_max_tokens, target // 2))
        self.allowance = min(self.allowance, condensed)
        return text
        yield  # a generator with no effect


class Strategy(Protocol):
    """A compaction strategy. See :class:`BaseStrategy` for the usual answers."""

    name: str
    compacts: bool
    """False: never compacts (``none``)."""
    automatic: bool
    """False: only a compaction asked for runs here (the API compacts at the trigger)."""
    prepares: bool
    """A summary prepared in the background can stand for this strategy's result."""
    api_summary: bool
    """Its :meth:`build` asks for the API's summary where the job offers it
    (:meth:`Job.api_summary`), so a summary prepared ahead is the API's too."""
    summarizes: bool
    """Uses the summarizer model (a compacter without one is told so)."""

    def runs_as(self) -> Strategy:
        """What runs here when this strategy compacts locally."""
        ...

    def max_tail_messages(self, settings: CompactionSettings) -> int | None:
        """What it keeps: at most this many messages verbatim (None: the tail's token budget)."""
        ...

    def edit(self, meter: Meter) -> ServerCompaction | None:
        """What every request asks the model to do (the API's compaction), if anything."""
        ...

    def build(self, job: Job) -> Steps[Built | str]:
        """The compacted history, measured; or why there is none (the breaker then waits)."""
        ...


class BaseStrategy:
    """The usual answers: compacts automatically, locally, keeps the tail's token budget."""

    name: str = ""
    compacts: bool = True
    automatic: bool = True
    prepares: bool = False
    summarizes: bool = False
    api_summary: bool = False

    def runs_as(self) -> Strategy:
        return self

    def max_tail_messages(self, settings: CompactionSettings) -> int | None:
        return None

    def edit(self, meter: Meter) -> ServerCompaction | None:
        return None

    def build(self, job: Job) -> Steps[Built | str]:
        return "this strategy does not compact"
        yield  # a generator with no effect


def levels_steps(job: Job, text_for: Callable[[Split], str], label: str) -> Steps[Built]:
    """Prefix + verbatim tail, tightened until it reaches the target: the planned tail, then
    old content in it pruned and the carried request capped, then the smallest tail."""
    levels = dict.fromkeys(((job.split, False), (job.split, True), (job.smallest, True)))
    result: Built | None = None
    for cut, tighten in levels:
        request_chars = job.budget.request_chars if tighten else None
        text = text_for(cut)
        compacted, measured = yield from job.assembled(
            cut, text, request_chars=request_chars, tighten=tighten
        )
        result = Built(compacted, measured, label, text, cut)
        if measured.tokens <= job.budget.target:
            break
    assert result is not None
    return result


def cut_points(
    meter: Meter, msgs: Sequence[Message], budget: Budget, strategy: Strategy
) -> tuple[Split, Split] | None:
    """The planned tail and the smallest one; None when there is no safe cut point."""
    split = choose_tail_start(
        msgs,
        tail_tokens=budget.tail_tokens,
        count=lambda message: meter.calibrate(meter.count(message), 1),
        max_messages=strategy.max_tail_messages(meter.settings),
    )
    if split is None:
        return None
    smallest = choose_tail_start(msgs, tail_tokens=0, count=meter.count)
    assert smallest is not None  # a cut exists, so the last cut does
    return split, smallest


_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Make ``strategy`` available by its name (``CompactionSettings(strategy=name)``)."""
    _REGISTRY[strategy.name] = strategy
    register_name(strategy.name)
    return strategy


def strategy_named(name: str) -> Strategy:
    """The registered strategy called ``name``."""
    found = _REGISTRY.get(name)
    if found is None:
        raise ConfigurationError(f"no compaction strategy is registered as {name!r}")
    return found
