"""Strategy ``auto`` (the default): prune old tool outputs first, and summarize only when
pruning alone does not reach the target: by the API's own summary where the job offers it,
else agentloop's (strategy ``summarize``'s steps)."""

from __future__ import annotations

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job
from agentloop._core.strategies.strategy_prune import prune_steps
from agentloop._core.strategies.strategy_summary import summarized_steps


class AutoStrategy(BaseStrategy):
    name = "auto"
    prepares = True
    summarizes = True
    api_summary = True

    def build(self, job: Job) -> Steps[Built | str]:
        pruned = yield from prune_steps(job, settle=True)
        if pruned is not None:
            return pruned
        return (yield from summarized_steps(job))
