"""Server-side compaction (strategy ``server``) in the loop: the edit a request carries, the
fall-back to local compaction where the API does not offer it, and the child a pause on the
API's compaction block becomes. A part :class:`~agentloop.AgentLoop` holds (its own module so
that the loop's file stays small)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.compaction.server_compaction import server_compaction_steps
from agentloop._core.values.messages import Message, compaction_block
from agentloop._core.values.model import (
    AsyncModel,
    Model,
    ModelRequest,
    ModelResponse,
    ServerCompaction,
)
from agentloop._core.values.profile_table import profile_of
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.events import LoopEvents
from agentloop._loop.fit import ContextFullError


class ServerSteps:
    """What the loop does for strategy ``server``, with the loop's compacter (None: the loop
    never compacts, and no request carries an edit) and its events."""

    def __init__(self, compacter: ConversationCompacter | None, events: LoopEvents) -> None:
        self._compacter = compacter
        self._events = events

    def edit(self, messages: Sequence[Message]) -> ServerCompaction | None:
        """The edit a request carries when the API is to compact (strategy ``server``)."""
        return None if self._compacter is None else self._compacter.request_edit(messages)

    def check(
        self, model: Model | AsyncModel, model_name: str, messages: Sequence[Message]
    ) -> None:
        """A model adapter without server-side compaction (a test double, another provider)
        makes the loop compact locally, once told."""
        if self.edit(messages) is None:
            return
        if not profile_of(model, model_name).server_compaction:
            self.fall_back(
                f"the model adapter {type(model).__name__} does not offer it for {model_name}"
            )

    def fall_back(self, reason: str) -> None:
        """Compact locally (strategy ``auto``) from now on, the user told why."""
        compacter = self._compacter
        assert compacter is not None  # only a request that carried an edit falls back
        compacter.settings = replace(compacter.settings, strategy="auto")
        self._events.on_warning(
            f"server-side compaction is not available: {reason}; compacting locally with "
            "strategy 'auto' instead"
        )

    def compacted(
        self,
        session_id: str,
        parent: Sequence[Message],
        request: ModelRequest,
        response: ModelResponse,
        *,
        again: bool = False,
    ) -> Steps[CompactionTransition | None]:
        """The API paused on a compaction of what ``request`` sent: the child takes its
        block, the parent stays whole (see ``_core/compaction/server_compaction.py``); the
        loop applies the transition. None when the API wrote no summary (the loop compacts
        locally from now on). ``again``: it compacted just before, with no reply between:
        the conversation is still above the trigger, :class:`ContextFullError`."""
        assert self._compacter is not None
        summary = compaction_block(response.content)
        if summary is None or not summary.get("content"):
            # A failed compaction (null content) is a no-op for the API: nothing of the
            # parent may be dropped. This conversation compacts here from now on.
            self.fall_back("the API's compaction failed (it returned no summary)")
            return None
        if again:
            raise ContextFullError(
                "the API compacted the conversation twice in a row and it is still above the "
                "trigger; run /compact with instructions to keep less, or start a new session"
            )
        outcome = yield from server_compaction_steps(
            self._compacter,
            session_id=session_id,
            parent=list(parent),
            response=response,
            request=request,
        )
        assert outcome.transition is not None
        self._events.on_compaction_start(outcome.decision)
        return outcome.transition
