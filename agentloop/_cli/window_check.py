"""The context window a run uses: refused up front when it is too small for the system prompt,
the tools, a minimal reply and some conversation; kept in the session for ``-c``/``-r``."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from agentloop._core.values.validation import DEFAULT_THRESHOLD
from agentloop._errors import ConfigurationError

if TYPE_CHECKING:
    from agentloop._adapters.windows import ModelLimits
    from agentloop._agent.agent import CodingAgent
    from agentloop._core.compaction.results import CompactionTransition
    from agentloop._core.values.model import ModelResponse
    from agentloop._sessions import SessionStore

MIN_CONVERSATION_TOKENS = 1_000
"""Room a window must leave beside the system prompt and tools for the conversation itself
(below the trigger)."""


def check_window(agent: CodingAgent, limits: ModelLimits) -> None:
    """Refuse, in one line, a window too small for the system prompt and tools, a minimal reply
    and some conversation before compaction triggers."""
    from agentloop._core.measuring.context import MIN_REPLY_TOKENS

    window, source = limits.context_window, limits.source
    decision = agent.context()
    threshold = decision.threshold if decision is not None else DEFAULT_THRESHOLD
    fixed = agent.fixed_tokens()
    needed = smallest_window(fixed, threshold, limits.max_output_tokens)
    if window < needed:
        what = {
            "override": "--context-window",
            "session": "the context window this session was started with (--context-window)",
        }.get(source, f"the context window ({source})")
        raise ConfigurationError(
            f"{what} of {window:,} tokens is too small: the system prompt and tool definitions "
            f"alone take about {fixed:,}, a reply needs at least {MIN_REPLY_TOKENS:,} and the "
            f"conversation {MIN_CONVERSATION_TOKENS:,} before compaction triggers; give at "
            f"least {needed:,}"
        )


def smallest_window(fixed: int, threshold: float, max_output_tokens: int) -> int:
    """The smallest window that leaves, beside ``fixed`` tokens (system prompt and tools), a
    reply reserve of at least :data:`MIN_REPLY_TOKENS` and :data:`MIN_CONVERSATION_TOKENS`
    of conversation below the trigger."""
    from agentloop._core.measuring.context import MIN_REPLY_TOKENS, reply_reserve, trigger_tokens

    least_reply = min(MIN_REPLY_TOKENS, max_output_tokens)  # a model's own limit is its limit

    def fits(window: int) -> bool:
        reserve = reply_reserve(window, max_output_tokens)
        trigger = trigger_tokens(window, threshold, max_output_tokens)[0]
        return reserve >= least_reply and trigger - fixed >= MIN_CONVERSATION_TOKENS

    low, high = 1, max(2, 2 * (fixed + MIN_CONVERSATION_TOKENS + MIN_REPLY_TOKENS))
    while not fits(high):  # the trigger grows with the window: a large enough one fits
        high *= 2
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


WINDOW_KEY = "context_window"
"""Session metadata: the ``--context-window`` a session was started with (``-c``/``-r`` keep it)."""


def remembered_window(store: SessionStore, session_id: str) -> int | None:
    """The ``--context-window`` given when ``session_id``'s conversation ran (None: none)."""
    value = store.get_session(session_id).metadata.get(WINDOW_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def session_choices(store: SessionStore, agent: CodingAgent, window: int | None) -> SessionChoices:
    """The :class:`SessionChoices` of this run, listening to the agent."""
    from agentloop._loop.events import LoopEvents

    class _Listener(LoopEvents):
        def on_reply(self, response: ModelResponse) -> None:
            choices.sync()

        def on_transition(self, transition: CompactionTransition) -> None:
            choices.sync()

    choices = SessionChoices(store, agent, window)
    agent.subscribe(_Listener())
    return choices


class SessionChoices:
    """What the user chose for this run, written into every session it runs on as soon as the
    session exists (its first reply, a compaction's child, ``/clear``'s fresh conversation,
    ``/model``): the window given with ``--context-window`` (or kept from the resumed session)
    and the model the session runs on. ``-c``/``-r`` read them back; a crash loses nothing
    that was written."""

    def __init__(self, store: SessionStore, agent: CodingAgent, window: int | None) -> None:
        self._store = store
        self._agent = agent
        self._window = window
        self._written: set[tuple[str, str]] = set()

    def sync(self) -> None:
        """Write the choices into the session the agent is on, once per session and model."""
        from agentloop._sessions import SessionError

        agent = self._agent
        if not agent.saved or agent.unsaved:
            return
        key = (agent.session_id, agent.model_name)
        if key in self._written:
            return
        with contextlib.suppress(SessionError):  # only a convenience for the next -c/-r
            session = self._store.get_session(agent.session_id)
            changes: dict[str, Any] = {}
            if self._window is not None and session.metadata.get(WINDOW_KEY) != self._window:
                changes["metadata"] = {WINDOW_KEY: self._window}
            if session.model != agent.model_name:
                changes["model"] = agent.model_name
            if changes:
                self._store.update_session(agent.session_id, **changes)
            self._written.add(key)
