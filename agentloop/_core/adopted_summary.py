"""A compaction the caller's own loop had the API write: agentloop's record of it.

The SDK's tool runner (``compact_before_next_turn()``) sends the on-demand compaction request
itself and swaps its history for ``[the block, *messages appended since]``: the whole history
is summarized, nothing is kept. agentloop did not send that request, but it must still do what
its own compaction does around it: the preserved state (the artifact ledger first, the hooks),
pinned messages and the latest request carried in a ``role: "system"`` message placed after the
next user turn (the child ends with the block, a reply: ``core.later``); the child measured
(``count_tokens`` when the model can count, else the calibrated estimate); the circuit breaker
judged on the figures; the summary recorded with its figures and their sources.

The same parts as the core's own on-demand path (``api_compaction.swapped_steps``, the
``Job``, ``_judge`` and ``_record`` of :class:`~agentloop._core.compaction_core.CompactionCore`);
only the model call is not made here. A result the judge would not commit is recorded all the
same (the runner has swapped already): its reason becomes a warning, and the breaker is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentloop._core.api_compaction import swapped_steps
from agentloop._core.context import CompactionDecision
from agentloop._core.cut_and_prune import Split
from agentloop._core.effects import NewSessionId, ReadClock, RunHooks, Steps, perform
from agentloop._core.messages import ContentBlock, Message, Usage
from agentloop._core.preserved_state import with_ledger
from agentloop._core.results import CompactionOutcome, CompactionTransition
from agentloop._core.strategy import Budget, Job

if TYPE_CHECKING:
    from agentloop._core.compaction_core import CompactionCore

__all__ = ["ADOPTED_NOTE", "adopted_steps"]

ADOPTED_NOTE = (
    "the summary was written by the API at the request of the caller's loop (the SDK's tool "
    "runner): the whole history was summarized, nothing kept"
)


def adopted_steps(
    core: CompactionCore,
    session_id: str,
    msgs: Sequence[Message],
    block: ContentBlock,
    *,
    decision: CompactionDecision,
    system: str,
    tools: Sequence[dict[str, Any]],
    spent: Usage | None,
) -> Steps[CompactionOutcome]:
    """The transition of ``msgs`` (the parent: every message the block summarizes) to the
    child ``[block]``; what is carried waits in ``core.later`` for the next user turn."""
    budget = Budget.of(decision, core.settings, core.context_window)
    split = Split(len(msgs))
    hooks = yield from perform(RunHooks(tuple(core.hooks)))
    hooks = with_ledger(hooks, msgs, core.context_window, core.counter_text)
    job = Job(
        core,
        msgs,
        decision,
        budget=budget,
        split=split,
        smallest=split,
        state=hooks.state,
        system=system,
        tools=tools,
    )
    job.warnings.extend(hooks.warnings)
    if spent is not None:
        job.spent.append(spent)
    built = yield from swapped_steps(job, len(msgs), block)
    job.notes.append(ADOPTED_NOTE)
    refused = core._judge(job, built.measured)  # sets the breaker as the core's own would
    if refused is not None:
        job.warnings.append(refused.replace("kept the conversation as it is", "it was swapped in"))
    core.later = built.later
    core._estimates.clear()
    core._converted.clear()
    compacted = built.messages
    if built.measured.by_api:
        compacted[-1] = replace(compacted[-1], counted=built.measured.tokens)
    created_at = yield from perform(ReadClock())
    summary = core._record(job, built, created_at)
    core._last_output = (compacted[0], len(compacted))
    child_id = yield from perform(NewSessionId())
    transition = CompactionTransition(
        original_session_id=session_id,
        new_session_id=child_id,
        compacted_messages=compacted,
        summary=summary,
    )
    return CompactionOutcome(decision=decision, transition=transition)
