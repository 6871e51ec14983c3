"""``ConversationCompacter``: the compaction core with its default wiring and drivers.

The core (:class:`~agentloop._core.compaction_core.CompactionCore`) decides and plans; this class
supplies what it needs from outside (the tiktoken counter, the summarizer model, session ids,
the clock, the hook runner) and runs its effects, synchronously or on an event loop.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from agentloop._core.compaction.effects import CallModel, NewSessionId, ReadClock, Steps, perform
from agentloop._core.compaction.on_demand import adopted_steps, api_instructions
from agentloop._core.compaction.plan import plan_steps
from agentloop._core.compaction.prepared import PreparedSummary, PrepareJob, next_job
from agentloop._core.compaction.results import (
    CompactionOutcome,
    CompactionPlan,
    CompactionTransition,
)
from agentloop._core.compaction.strategy import strategy_named
from agentloop._core.compaction_core import CompactionCore, CompactionSettings
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.measuring.context import Calibrator, CompactionDecision, TokenCounter
from agentloop._core.values.messages import ContentBlock, Message, ResponseLike, Usage
from agentloop._core.values.model import AsyncModel, Model, ModelResponse
from agentloop._core.values.profile_table import profile_of
from agentloop._core.values.tool import Tool
from agentloop._core.values.tool_facts import ToolFacts
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS
from agentloop._errors import ConfigurationError
from agentloop._loop.drive import Runtime, Wiring, adrive, drive
from agentloop._loop.inputs import Inputs
from agentloop._loop.next_turn import NextTurn

History = Sequence[Message | Mapping[str, Any] | ResponseLike]
"""A conversation as a loop keeps it: our messages, API dicts, the SDK's responses."""


class ConversationCompacter(CompactionCore):
    """Measures context usage at safe boundaries and compacts when the threshold is reached.

    One compacter follows one conversation (its circuit breaker and estimate cache are per
    conversation). ``model`` is the summarizer; without one, summaries are deterministic
    digests. ``counter`` (default: tiktoken, offline), ``clock`` and ``new_session_id`` are
    injectable; ``tool_facts`` says what each tool call did (default: the recognizers that
    ship, :func:`~agentloop.default_tool_facts`).

    Given to an :class:`~agentloop.AgentLoop`, it takes what it was not told from the loop:
    without ``model_name`` the loop's model name, model (the summarizer) and ``max_tokens``
    (said once, to the loop). ``context_window`` defaults to the model's known window.
    """

    def __init__(
        self,
        *,
        model_name: str | None = None,
        context_window: int | None = None,
        model: Model | AsyncModel | None = None,
        max_output_tokens: int | None = None,
        settings: CompactionSettings | None = None,
        counter: TokenCounter | None = None,
        calibration: Calibrator | None = None,
        hooks: Sequence[PreservedStateHook] = (),
        clock: Callable[[], datetime] | None = None,
        new_session_id: Callable[[], str] | None = None,
        window_source: str = "override",
        tool_facts: ToolFacts | None = None,
    ) -> None:
        if counter is None:
            from agentloop._adapters.tokens import TokenEstimator

            counter = TokenEstimator()
        strategy = strategy_named((settings or CompactionSettings()).strategy)
        # Without a model name it waits for a loop, whose model will summarize.
        self._joins_loop = model_name is None
        self._window_given = context_window is not None
        self._output_given = max_output_tokens is not None
        if model is None and not self._joins_loop and strategy.summarizes:
            warnings.warn(
                "ConversationCompacter has no model: summaries will be deterministic digests "
                "(pass model=AnthropicModel() for real summaries)",
                stacklevel=2,
            )
        if context_window is None:  # (0 is a window given, and refused as invalid)
            context_window, window_source = _known_window(model, model_name)
        output = DEFAULT_MAX_TOKENS if max_output_tokens is None else max_output_tokens
        super().__init__(
            model_name=model_name or "",
            context_window=context_window,
            counter=counter,
            summarizer=model,
            max_output_tokens=output,
            settings=settings,
            calibration=calibration,
            hooks=hooks,
            window_source=window_source,
        )
        if tool_facts is None:
            from agentloop._adapters.tool_recognizers import default_tool_facts

            tool_facts = default_tool_facts()
        self.tool_facts = tool_facts
        """What each tool call did, as facts (the ledger and the receipt read them): the
        recognizers that ship with agentloop unless given; add your own tool's with
        ``compacter.tool_facts.register(name, recognizer)``."""
        self.wiring = Wiring()
        """Ids, clock and hook runner, shared with the loop this compacter serves."""
        if clock is not None:
            self.wiring.clock = clock
        if new_session_id is not None:
            self.wiring.new_session_id = new_session_id
        self.runtime = Runtime(model=model, wiring=self.wiring)
        self._inputs = Inputs()
        self.next_turn: NextTurn[Message] = NextTurn()
        """What the newest compaction carries over but could not place yet (its child ends
        with a reply): placed after the next user message (:meth:`carried`)."""

    @property
    def later(self) -> Message | None:
        """What waits for the next user turn (:attr:`next_turn`), read-only."""
        return self.next_turn.peek()

    @later.setter
    def later(self, message: Message | None) -> None:
        warnings.warn(
            "setting ConversationCompacter.later is deprecated: use "
            "compacter.next_turn.hold(message) (or .drop())",
            DeprecationWarning,
            stacklevel=2,
        )
        self.next_turn.hold(message)

    @property
    def model(self) -> Model | AsyncModel | None:
        """The summarizer model (None: deterministic digests)."""
        return self.summarizer

    def adopt(
        self,
        model_name: str,
        model: Model | AsyncModel | None,
        *,
        max_output_tokens: int,
        tools: Sequence[Tool] = (),
    ) -> None:
        """Take a loop's settings for what this compacter was not given (the loop calls it),
        and the facts its tools declare (a tool with a ``facts`` method: see
        :class:`~agentloop.ToolFacts`)."""
        for tool in tools:
            declared = getattr(tool, "facts", None)
            if callable(declared):
                self.tool_facts.register(tool.name, declared)
        if self._joins_loop:
            self._joins_loop = False
            self.model_name = model_name
            if self.summarizer is None:
                self.summarizer = self.runtime.model = model
            if not self._window_given:
                known = _known_window(self.summarizer, model_name)
                self.context_window, self.window_source = known
        if not self._output_given:
            self.max_output_tokens = min(max_output_tokens, self.context_window)

    def messages_of(self, messages: History) -> Sequence[Message]:
        """Our messages from a loop's history: dicts and the SDK's responses converted once
        each, consecutive same-role messages merged (the API combines them)."""
        if self._joins_loop:
            raise ConfigurationError(
                "ConversationCompacter needs model_name= (or an AgentLoop to take it from)"
            )
        return self._inputs.messages(messages, super().messages_of)

    def prepare_job(
        self,
        session_id: str,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        decision: CompactionDecision | None = None,
    ) -> PrepareJob | None:
        """The summary request to send in the background now, or None: not past the early mark,
        prepared recently enough, or not a history a summary can continue (it must end with a
        user turn, at a safe boundary, on the conversation's own model)."""
        msgs = self.messages_of(messages)
        if not self.strategy.prepares or self.summarizer is None:
            return None
        if not msgs or msgs[-1].role != "user":
            return None
        if decision is None:
            decision = self.should_compact(msgs, system=system, tools=tools)
        job = next_job(
            session_id,
            msgs,
            decision,
            settings=self.settings,
            model_name=self.model_name,
            window=self.context_window,
            key=self.prepare_key(),
            ready=self.preparation.ready,
            system=system,
            tools=tools,
            count_text=self.counter_text,
            on_demand=self.strategy.runs_as().uses_on_demand and self.on_demand_available(),
            fixed=self.calibrate(self.fixed_tokens(system, tools)),
            started=self.preparation.since_compaction,
        )
        if job is not None:
            self.preparation.started += 1
            self.preparation.since_compaction += 1
        return job

    def accept_prepared(
        self,
        job: PrepareJob,
        answer: ModelResponse | BaseException,
        session_id: str,
        messages: History,
    ) -> str | None:
        """Keep the background answer to ``job`` as the newest prepared summary; else say why
        not (it failed, is no summary, or what it covers changed: counted as discarded)."""
        msgs = self.messages_of(messages)
        return self.preparation.accept(job, answer, session_id, msgs, self.prepare_key())

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
        """The core's compaction (:meth:`CompactionCore.steps`); what its child carries but
        cannot place yet (``outcome.later``) waits in :attr:`next_turn` from then on."""
        outcome = yield from super().steps(
            session_id,
            messages,
            system=system,
            tools=tools,
            instructions=instructions,
            force=force,
            decision=decision,
        )
        if outcome.transition is not None:
            self.next_turn.hold(outcome.later)
        return outcome

    def carried(self, message: Message) -> list[Message]:
        """``message`` (a new user message) and what the newest compaction carries over but
        could not place when it ran (its child ended with a reply: ``/compact`` between
        turns): a system message after it, or, on a model without them, a text block at its
        end. Just ``[message]`` when nothing waits; what waited is placed once."""
        later = self.next_turn.take() if message.role == "user" else None
        if later is None:
            return [message]
        if self.profile.system_messages:
            return [message, later]
        joined = (*message.content, *later.content)
        return [replace(message, content=joined, tokens=None, carried=later.carried)]

    def discard_prepared(self, reason: str) -> None:
        """Throw the prepared summary (and what was spent on it) away, counted."""
        self.preparation.discard(reason)

    def checkpoint(self) -> Callable[[], None]:
        """What puts this compacter back as it is now, for a compaction worked out and not
        applied (``/compact --review`` dropped): what waits to be carried, the circuit breaker
        and the summary prepared ahead (usable again), with the counts; and the calibration,
        which the draft's token counts taught: kept, they would change the figures the next
        draft's cut and ledger are sized by, so that asking again with other instructions
        would show another ledger for the same conversation."""
        state = (self._last_output, self._breaker_until, self._undone_hold)
        preparation, calibration = copy.copy(self.preparation), self.calibration
        waiting = self.next_turn.checkpoint()

        def restore() -> None:
            self._last_output, self._breaker_until, self._undone_hold = state
            self.preparation, self.calibration = preparation, calibration
            waiting()

        return restore

    @property
    def prepared(self) -> PreparedSummary | None:
        """The newest summary prepared ahead and not yet applied, if any."""
        return self.preparation.ready

    def prepare(
        self,
        session_id: str,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
    ) -> bool:
        """Prepare the summary ahead now, if one is due (see :meth:`prepare_job`): a blocking
        summarizer call, for your own background thread. The next
        :meth:`compact_and_transition` of this conversation applies it without a model call
        while what it covers is unchanged. True when a prepared summary is ready."""
        steps = self._prepare_steps(session_id, messages, system, tools)
        return drive(steps, self.runtime.perform)

    async def aprepare(
        self,
        session_id: str,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
    ) -> bool:
        """The async form of :meth:`prepare` (for a task of your own)."""
        steps = self._prepare_steps(session_id, messages, system, tools)
        return await adrive(steps, self.runtime.aperform)

    def _prepare_steps(
        self, session_id: str, messages: History, system: str, tools: Sequence[dict[str, Any]]
    ) -> Steps[bool]:
        job = self.prepare_job(session_id, messages, system=system, tools=tools)
        if job is None:
            return False
        answer: ModelResponse | BaseException
        try:
            answer = yield from perform(CallModel(job.request, model=self.summarizer))
        except Exception as error:  # a failed summary is counted, never raised
            answer = error
        return self.accept_prepared(job, answer, session_id, messages) is None

    def plan(
        self,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        force: bool = True,
    ) -> CompactionPlan:
        """What compacting now would do — which messages would be summarized, pruned or kept
        verbatim, the preserved state, the expected size (an estimate, or a range while the
        summary is not written) — without a model call or a write. It runs the compaction's
        own strategy under the same budget. ``force`` (the default) previews a compaction asked
        for; False, an automatic one."""
        msgs = self.messages_of(messages)
        steps = plan_steps(self, msgs, system=system, tools=_dicts(tools), force=force)
        return drive(steps, self.runtime.perform)

    def compact_and_transition(
        self,
        session_id: str,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionTransition | None:
        """None when no compaction is needed or possible; otherwise the transition to a child.

        Why nothing happened is in :meth:`should_compact`'s decision, or in the
        :class:`CompactionOutcome` that driving :meth:`steps` yourself returns.
        """
        msgs = self.messages_of(messages)
        steps = self.steps(
            session_id,
            msgs,
            system=system,
            tools=_dicts(tools),
            instructions=instructions,
            force=force,
        )
        return drive(steps, self.runtime.perform).transition

    async def acompact_and_transition(
        self,
        session_id: str,
        messages: History,
        *,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        instructions: str | None = None,
        force: bool = False,
    ) -> CompactionTransition | None:
        """The async form of :meth:`compact_and_transition` (blocking work runs in threads)."""
        msgs = self.messages_of(messages)
        steps = self.steps(
            session_id,
            msgs,
            system=system,
            tools=_dicts(tools),
            instructions=instructions,
            force=force,
        )
        return (await adrive(steps, self.runtime.aperform)).transition

    def summary_instructions(self, instructions: str | None = None) -> str:
        """The ``instructions`` of an on-demand compaction request agentloop would send:
        its summarizer prompt, the standing instructions and ``instructions`` (within the
        API's cap). For a loop that has the API summarize by itself (the SDK's tool runner)."""
        return api_instructions(self.settings.standing_instructions, instructions)

    def adopt_api_summary(
        self,
        session_id: str,
        messages: History,
        block: ContentBlock,
        *,
        decision: CompactionDecision,
        system: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        spent: Usage | None = None,
    ) -> CompactionOutcome:
        """Record a compaction the caller's loop had the API write: ``block`` summarizes all of
        ``messages`` (the parent), the child is ``[block]``. What agentloop carries (ledger,
        preserved state, pins, the latest request) waits in :attr:`next_turn` for the next user
        turn; the child is measured (``count_tokens`` where the model counts), the circuit
        breaker set as after a compaction of agentloop's, ``spent`` is the request's usage."""
        msgs = self.messages_of(messages)
        steps = self._adopt_steps(session_id, msgs, block, decision, system, _dicts(tools), spent)
        return drive(steps, self.runtime.perform)

    def _adopt_steps(
        self,
        session_id: str,
        msgs: Sequence[Message],
        block: ContentBlock,
        decision: CompactionDecision,
        system: str,
        tools: list[dict[str, Any]],
        spent: Usage | None,
    ) -> Steps[CompactionOutcome]:
        job, built = yield from adopted_steps(
            self, msgs, block, decision=decision, system=system, tools=tools, spent=spent
        )
        refused = self._judge(job, built.measured)  # sets the breaker as after our own
        if refused is not None:  # the loop has swapped already: recorded all the same
            job.warnings.append(refused.replace("kept the conversation as it is", "swapped in"))
        self.next_turn.hold(built.later)
        self._estimates.clear()
        self._converted.clear()
        compacted = built.messages
        if built.measured.by_api:
            compacted[-1] = replace(compacted[-1], counted=built.measured.tokens)
        created_at = yield from perform(ReadClock())
        summary = self._record(job, built, created_at)
        self._last_output = (compacted[0], len(compacted))
        child_id = yield from perform(NewSessionId())
        transition = CompactionTransition(
            original_session_id=session_id,
            new_session_id=child_id,
            compacted_messages=compacted,
            summary=summary,
        )
        return CompactionOutcome(decision=decision, transition=transition, later=built.later)


def _dicts(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions as dicts: the SDK's ``ToolParam`` TypedDicts are taken as they are."""
    return [tool if isinstance(tool, dict) else dict(tool) for tool in tools]


def _known_window(model: object, model_name: str | None) -> tuple[int, str]:
    """The window of the model's profile (``profile_of``: the model adapter's own, else the
    shipped table; 200k if unknown), and where it came from."""
    from agentloop._adapters.windows import default_limits

    name = model_name or ""
    profile = profile_of(model, name)
    if profile.context_window is None:
        return default_limits(name).context_window, "default"
    return profile.context_window, profile.source


def count_within(
    compacter: CompactionCore, message: Message, fixed: int, window: int
) -> tuple[int, bool]:
    """The local estimate of ``message`` and whether it is whole. Counting stops once the
    message, with ``fixed`` (system prompt and tools), is past ``window`` in the API's units
    whatever the calibration says: a huge message is refused from its size, its tokens never
    all in memory. A counter without ``count_message_within`` counts it whole."""
    if message.tokens is not None:
        return message.tokens, True
    within = getattr(compacter.counter, "count_message_within", None)
    if within is None:
        return compacter.count(message), True
    limit = max(1, window - fixed)
    for _ in range(64):  # the calibration is monotonic: double until it is certainly past
        if compacter.calibrate(fixed + limit, 1) > window:
            break
        limit *= 2
    counted, whole = within(message, limit)
    return int(counted), bool(whole)
