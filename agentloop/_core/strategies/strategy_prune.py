"""Strategy ``prune``: old tool outputs, long tool inputs and media become short markers; every
message stays (the conversation keeps its shape), the newest exchange is untouched."""

from __future__ import annotations

from agentloop._core.compaction.api_compaction import carried_message, job_carried, with_carried
from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job
from agentloop._core.cutting.cut_and_prune import prune_tool_outputs, with_state
from agentloop._core.values.carried import Carried
from agentloop._core.values.messages import Message

NOTHING_TO_PRUNE = "nothing to prune: no old tool output, input or image is large enough"


class PruneStrategy(BaseStrategy):
    name = "prune"

    def build(self, job: Job) -> Steps[Built | str]:
        pruned = yield from prune_steps(job, settle=False)
        return NOTHING_TO_PRUNE if pruned is None else pruned


def prune_steps(job: Job, *, settle: bool) -> Steps[Built | None]:
    """The history pruned before the planned tail, then before the smallest one while over the
    target. ``settle`` (for ``auto``): a pruning counts only if it reaches the target, and one
    whose cheap estimate is far from it is never measured. None when nothing was pruned."""
    msgs, target = job.msgs, job.budget.target
    result: Built | None = None
    pruned_to, so_far = 0, list(msgs)
    for keep_from in dict.fromkeys((job.split.tail_start, job.smallest.tail_start)):
        # The smallest tail prunes further than the planned one: only the difference.
        so_far = prune_tool_outputs(so_far, keep_from=keep_from, start=pruned_to)
        pruned_to = keep_from
        # Pruning that replaced nothing is no compaction, whatever the figures say.
        if all(p.content is m.content for p, m in zip(so_far, msgs, strict=True)):
            continue
        pruned, later = placed_state(job, so_far)
        local = job.local(pruned)
        if settle and job.estimate(pruned, local) > target * 1.2:
            break
        pruned, measured = yield from job.finished(pruned)
        if not settle or measured.tokens <= target:
            result = Built(pruned, measured, "prune", "old tool outputs were pruned", later=later)
        if measured.tokens <= target:
            break
    return result


def placed_state(job: Job, pruned: list[Message]) -> tuple[list[Message], Message | None]:
    """The preserved state placed in a pruned history: into its first message; but in a
    history the API's summary opens (a signed block, never edited) in a message appended
    after the newest user turn, as the API's own compaction carries it, or waiting for the
    next user turn (returned) when the history ends with a reply."""
    if not (pruned and pruned[0].is_compaction_only):
        return with_state(pruned, job.state), None
    carried = Carried(*job_carried(job))
    placed = with_carried(pruned, carried, job.meter.profile.system_messages)
    waits = bool(carried) and placed[-1].role == "assistant"
    return placed, carried_message(carried) if waits else None
