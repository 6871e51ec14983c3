"""Server-side compaction (strategy ``server``) in the loop: the edit a request carries, the
fall-back to local compaction where the API does not offer it, and the child a pause on the
API's compaction block becomes. A mixin of :class:`~agentloop.AgentLoop` (its own module so
that the loop's file stays small)."""

from __future__ import annotations

from dataclasses import replace

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.compaction.server_compaction import server_compaction_steps
from agentloop._core.values.messages import Message
from agentloop._core.values.model import (
    AsyncModel,
    Model,
    ModelRequest,
    ModelResponse,
    ServerCompactingModel,
    ServerCompaction,
)
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.events import EventFanOut


class ServerSteps:
    """What the loop does for strategy ``server`` (mixed into :class:`AgentLoop`)."""

    model: Model | AsyncModel
    model_name: str
    compacter: ConversationCompacter | None
    events: EventFanOut
    session_id: str
    messages: list[Message]

    def _apply(self, transition: CompactionTransition, *, emergency: bool) -> Steps[None]:
        raise NotImplementedError  # the loop's

    def _server_edit(self) -> ServerCompaction | None:
        """The edit a request carries when the API is to compact (strategy ``server``)."""
        return None if self.compacter is None else self.compacter.request_edit(self.messages)

    def _check_server_compaction(self) -> None:
        """A model adapter without server-side compaction (a test double, another provider)
        makes the loop compact locally, once told."""
        if self._server_edit() is None:
            return
        model = self.model
        if not isinstance(model, ServerCompactingModel):
            self._fall_back(f"the model adapter {type(model).__name__} does not offer it")
        elif not model.supports_server_compaction(self.model_name):
            self._fall_back(f"{self.model_name} does not offer it")

    def _fall_back(self, reason: str) -> None:
        compacter = self.compacter
        assert compacter is not None
        compacter.settings = replace(compacter.settings, strategy="auto")
        self.events.on_warning(
            f"server-side compaction is not available: {reason}; compacting locally with "
            "strategy 'auto' instead"
        )

    def _server_compacted(
        self, request: ModelRequest, response: ModelResponse
    ) -> Steps[CompactionTransition]:
        """The API paused on a compaction of what ``request`` sent: the child takes its
        block, the parent stays whole (see ``_core/compaction/server_compaction.py``)."""
        assert self.compacter is not None
        outcome = yield from server_compaction_steps(
            self.compacter,
            session_id=self.session_id,
            parent=list(self.messages),
            response=response,
            request=request,
        )
        assert outcome.transition is not None
        self.events.on_compaction_start(outcome.decision)
        yield from self._apply(outcome.transition, emergency=False)
        return outcome.transition
