"""A manual compaction reviewed before it applies (``/compact --review``).

The compaction runs as ``/compact`` runs it, effect by effect, up to its one write
(``SaveTransition``), and waits there: the summary is written (or
the one prepared in the background is taken, with no model call), the child is built, nothing is
stored. :meth:`CompactionDraft.apply` goes on from that write with exactly that child: no second
summary request. :meth:`CompactionDraft.drop` forgets it: the loop never changed, and the
compacter is as it was before (a summary prepared ahead is usable again); what the summary
requests of a dropped draft used is counted as discarded, as any summary not applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from agentloop._core.compaction.effects import CallModel, Effect, SaveTransition, Steps
from agentloop._core.compaction.results import (
    CompactionOutcome,
    CompactionSummary,
    CompactionTransition,
)
from agentloop._core.facts.ledger import find_ledger, render
from agentloop._core.values.messages import Message, Usage
from agentloop._loop.ahead import Ahead
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.drive import drive, drive_until

Perform = Callable[[Effect[Any]], object]
NOT_APPLIED = "the reviewed compaction was not applied"


class CompactionDraft:
    """A compaction worked out to its write and waiting for a word: apply it, or drop it."""

    def __init__(
        self,
        steps: Steps[CompactionOutcome | None],
        save: SaveTransition,
        perform: Perform,
        restore: Callable[[CompactionSummary | None], None],
        ledger: str,
        requests: int,
    ) -> None:
        self._steps = steps
        self._save = save
        self._perform = perform
        self._restore = restore
        self._open = True
        self.ledger = ledger
        """The artifact ledger as the child carries it ('' when there is none)."""
        self.requests = requests
        """The model calls made to work it out (0: the summary prepared ahead, no call)."""

    @property
    def transition(self) -> CompactionTransition:
        """The child as it would be saved, with its summary (``transition.summary.summary``)."""
        return self._save.transition

    @property
    def signed(self) -> bool:
        """Whether the API wrote the summary (on-demand compaction): the child opens with its
        signed block, which can be shown and applied or asked for again, never edited."""
        child = self.transition.compacted_messages
        return bool(child) and child[0].is_compaction_only

    def apply(self) -> CompactionOutcome | None:
        """Write the child and continue in it, exactly as drafted (no model call)."""
        if not self._open:
            raise RuntimeError("this compaction draft was already applied or dropped")
        self._open = False
        return drive(self._steps, self._perform, first=self._save)

    def drop(self) -> None:
        """Forget the draft: nothing is written, the compacter is as it was before it."""
        if not self._open:
            return
        self._open = False
        self._steps.close()
        self._restore(self.transition.summary)


class CompactionDrafts:
    """``draft_compaction`` of :class:`~agentloop.AgentLoop`: a part the loop holds (with a
    compacter), given the compacter, the summary prepared ahead and how effects are carried
    out (the loop's: requests think as the session does)."""

    def __init__(self, compacter: ConversationCompacter, ahead: Ahead, perform: Perform) -> None:
        self._compacter = compacter
        self._ahead = ahead
        self._perform = perform

    def draft(
        self,
        session_id: str,
        sent: Sequence[Message],
        steps: Steps[CompactionOutcome | None],
    ) -> CompactionDraft | CompactionOutcome | None:
        """``steps`` (the loop's manual compaction of ``sent``, its history as sent, not
        started) worked out and not applied: a :class:`CompactionDraft`; the outcome instead
        when nothing would be compacted. Ctrl-C while it is worked out leaves the compacter as
        it was."""
        compacter = self._compacter
        # A summary in flight is taken first (the compaction would wait for it too), so that
        # dropping the draft keeps it ready with its cost, not lost with the draft.
        wait = compacter.prepared is None
        drive(self._ahead.collect(session_id, sent, wait=wait), self._perform)
        restore = _restore_point(compacter)
        calls = 0

        def perform(effect: Effect[Any]) -> object:
            nonlocal calls
            calls += isinstance(effect, CallModel)
            return self._perform(effect)

        try:
            reached = _until_save(steps, perform)
        except BaseException:
            steps.close()
            restore(None)
            raise
        if isinstance(reached, SaveTransition):
            ledger = carried_ledger(reached.transition, compacter.next_turn.peek())
            return CompactionDraft(steps, reached, self._perform, restore, ledger, calls)
        return reached


def carried_ledger(transition: CompactionTransition, later: Message | None) -> str:
    """The ledger the compacted context carries, as it carries it ('' when none): in the
    message that waits for the next user turn, else in the one that ends the child (the API's
    summary: its parts), else in the compacted context's opening."""
    child = transition.compacted_messages
    where = [later] if later is not None else child[-1:] if child[-1].carried else child[:1]
    found = find_ledger(where)
    return render(found) if found is not None else ""


def _restore_point(
    compacter: ConversationCompacter,
) -> Callable[[CompactionSummary | None], None]:
    """What puts ``compacter`` back as it is now (:meth:`ConversationCompacter.checkpoint`),
    counting the summary requests of the compaction not applied as discarded, with their cost
    (those of the summary prepared ahead it took stay the prepared work's, usable again)."""
    restore = compacter.checkpoint()
    before = compacter.preparation
    spent, calls = before.spent, before.calls

    def restored(summary: CompactionSummary | None) -> None:
        restore()
        if summary is None:
            return
        usage, made = summary.summary_usage, summary.summary_calls
        if summary.prepared:
            usage, made = _minus(usage, spent), made - calls
        if made > 0:
            compacter.preparation.count_discarded(usage, made, NOT_APPLIED)

    return restored


def _minus(usage: Usage, part: Usage) -> Usage:
    return Usage(
        input_tokens=max(0, usage.input_tokens - part.input_tokens),
        output_tokens=max(0, usage.output_tokens - part.output_tokens),
        cache_creation_input_tokens=max(
            0, usage.cache_creation_input_tokens - part.cache_creation_input_tokens
        ),
        cache_read_input_tokens=max(
            0, usage.cache_read_input_tokens - part.cache_read_input_tokens
        ),
        estimated=usage.estimated,
    )


def _until_save(
    steps: Steps[CompactionOutcome | None], perform: Perform
) -> SaveTransition | CompactionOutcome | None:
    """Drive ``steps`` up to its :class:`SaveTransition`, not performed; or to its end when it
    has none."""
    reached = drive_until(steps, perform, lambda effect: isinstance(effect, SaveTransition))
    if isinstance(reached, SaveTransition):
        return reached
    return cast(CompactionOutcome | None, reached)
