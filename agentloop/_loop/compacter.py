"""``ConversationCompacter``: the compaction core with its default wiring and drivers.

The core (:class:`~agentloop._core.compacter.CompactionCore`) decides and plans; this class
supplies what it needs from outside (the tiktoken counter, the summarizer model, session ids,
the clock, the hook runner) and runs its effects, synchronously or on an event loop.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from agentloop._core.compacter import CompactionCore, CompactionSettings
from agentloop._core.context import Calibrator, TokenCounter
from agentloop._core.hooks import PreservedStateHook
from agentloop._core.messages import Message
from agentloop._core.model import AsyncModel, Model
from agentloop._core.plan import plan_steps
from agentloop._core.results import CompactionPlan, CompactionTransition
from agentloop._core.validation import DEFAULT_MAX_TOKENS
from agentloop._loop.drive import Runtime, adrive, drive


class ConversationCompacter(CompactionCore):
    """Measures context usage at safe boundaries and compacts when the threshold is reached.

    One compacter follows one conversation (its circuit breaker and estimate cache are per
    conversation). ``model`` is the summarizer; without one, summaries are deterministic
    digests. ``counter`` (default: tiktoken, offline), ``clock`` and ``new_session_id`` are
    injectable.
    """

    def __init__(
        self,
        *,
        model_name: str,
        context_window: int,
        model: Model | AsyncModel | None = None,
        max_output_tokens: int = DEFAULT_MAX_TOKENS,
        settings: CompactionSettings | None = None,
        counter: TokenCounter | None = None,
        calibration: Calibrator | None = None,
        hooks: Sequence[PreservedStateHook] = (),
        clock: Callable[[], datetime] | None = None,
        new_session_id: Callable[[], str] | None = None,
        window_source: str = "override",
    ) -> None:
        if counter is None:
            from agentloop._adapters.tokens import TokenEstimator

            counter = TokenEstimator()
        strategy = (settings or CompactionSettings()).strategy
        if model is None and strategy in ("auto", "summarize", "server"):
            warnings.warn(
                "ConversationCompacter has no model: summaries will be deterministic digests "
                "(pass model=AnthropicModel() for real summaries)",
                stacklevel=2,
            )
        super().__init__(
            model_name=model_name,
            context_window=context_window,
            counter=counter,
            summarizer=model,
            max_output_tokens=max_output_tokens,
            settings=settings,
            calibration=calibration,
            hooks=hooks,
            window_source=window_source,
        )
        self.runtime = Runtime(model=model)
        if clock is not None:
            self.runtime.clock = clock
        if new_session_id is not None:
            self.runtime.new_session_id = new_session_id

    @property
    def model(self) -> Model | AsyncModel | None:
        """The summarizer model (None: deterministic digests)."""
        return self.summarizer

    def plan(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        system: str = "",
        tools: Sequence[dict[str, Any]] = (),
        force: bool = True,
    ) -> CompactionPlan:
        """What compacting now would do — which messages would be summarized, pruned or kept
        verbatim, the preserved state, the expected size — without a model call or a write.
        ``force`` (the default) previews a compaction asked for; False, an automatic one."""
        msgs = self.messages_of(messages)
        steps = plan_steps(self, msgs, system=system, tools=tools, force=force)
        return drive(steps, self.runtime.perform)

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
        """None when no compaction is needed or possible; otherwise the transition to a child.

        Why nothing happened is in :meth:`should_compact`'s decision, or in the
        :class:`CompactionOutcome` that driving :meth:`steps` yourself returns.
        """
        steps = self.steps(
            session_id, messages, system=system, tools=tools, instructions=instructions, force=force
        )
        return drive(steps, self.runtime.perform).transition

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
        """The async form of :meth:`compact_and_transition` (blocking work runs in threads)."""
        steps = self.steps(
            session_id, messages, system=system, tools=tools, instructions=instructions, force=force
        )
        return (await adrive(steps, self.runtime.aperform)).transition
