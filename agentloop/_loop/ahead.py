"""The loop's side of a summary prepared ahead: at most one request in flight, started and
collected at safe boundaries, waited for only where the compaction needs it.

The request itself runs where the driver puts it (a worker thread for ``run_turn``, a task for
``arun_turn``: ``drive.py``); what comes back is judged by the compacter (``prepared.py``),
never written to the store by the background.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop._core.compaction.effects import (
    CancelBackground,
    CollectBackground,
    StartBackground,
    Steps,
    perform,
)
from agentloop._core.compaction.prepared import PrepareJob
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.messages import Message
from agentloop._loop.conversation_compacter import ConversationCompacter

CLOSE_ENOUGH = 0.25
"""A ready summary is applied without waiting for a fresher one in flight when what follows it
is at most this share of the trigger (the child then stays under half of it)."""
CLIENT_USABLE = 0.4
"""Our own ready summary is applied without waiting for the refresh in flight when the summary
and what follows it come to at most this share of the trigger: under the half the compaction
allows, with room for the system prompt and tools (it checks, and one request folds in what
the summary missed if not)."""


class Ahead:
    """Summaries prepared ahead for one loop (its compacter judges and keeps them)."""

    def __init__(self, compacter: ConversationCompacter) -> None:
        self.compacter = compacter
        self.job: PrepareJob | None = None

    def collect(self, session_id: str, messages: Sequence[Message], *, wait: bool) -> Steps[None]:
        """Take the background answer, if it is there (``wait``: wait for it)."""
        job = self.job
        if job is None:
            return
        answer = yield from perform(CollectBackground(wait=wait))
        if answer is None:
            if wait:  # the driver lost it (another event loop ended): nothing runs any more
                self.job = None
            return
        self.job = None
        self.compacter.accept_prepared(job, answer, session_id, messages)

    def before_compaction(
        self, session_id: str, messages: Sequence[Message], decision: CompactionDecision
    ) -> Steps[None]:
        """At the trigger: wait for the request in flight only when no ready summary is
        usable (nobody waits for a refresh: what is in flight is then discarded when it
        comes back, counted); never a second request."""
        if self.job is None:
            return
        ready = self.compacter.prepared
        key = self.compacter.prepare_key()
        if ready is not None and ready.fits(session_id, messages, key) is not None:
            ready = None
        if ready is None:
            yield from self.collect(session_id, messages, wait=True)
            return
        behind = decision.usage.tokens - ready.tokens
        trigger = decision.trigger_tokens
        if behind <= trigger * CLOSE_ENOUGH:
            return
        child = behind + self.compacter.counter_text(ready.text)
        if ready.block is not None:
            # The API's summary is usable while its child (the summary, then every turn since
            # what it covers) saves what a compaction must: nobody waits for a refresh.
            if child <= trigger * (1 - self.compacter.settings.min_savings):
                return
        elif child <= trigger * CLIENT_USABLE:
            return  # ours: its child fits the half the compaction allows (no wait)
        yield from self.collect(session_id, messages, wait=True)

    def maybe_start(
        self,
        session_id: str,
        messages: Sequence[Message],
        decision: CompactionDecision,
        system: str,
        tools: Sequence[dict[str, Any]],
    ) -> Steps[None]:
        """Send the summary request due now in the background (none while one is in flight)."""
        if self.job is not None:
            return
        job = self.compacter.prepare_job(
            session_id, messages, system=system, tools=tools, decision=decision
        )
        if job is None:
            return
        try:
            yield from perform(StartBackground(job.request, model=self.compacter.summarizer))
        except Exception as error:  # no background here (no event loop...): the ordinary path
            self.compacter.accept_prepared(job, error, session_id, messages)
            return
        self.job = job

    def cancel(self, reason: str) -> Steps[None]:
        """Stop what runs in the background and throw away what was prepared (counted)."""
        if self.job is not None:
            self.job = None
            self.compacter.preparation.cancelled += 1
            yield from perform(CancelBackground())
        self.compacter.discard_prepared(reason)
