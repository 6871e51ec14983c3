"""Strategy ``sliding_window``: the older messages are dropped, a note says how many; no model
call. ``window_messages`` caps the tail by count (else the tail's token budget)."""

from __future__ import annotations

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job, levels_steps
from agentloop._core.cutting.cut_and_prune import window_note
from agentloop._core.values.settings import CompactionSettings


class SlidingWindowStrategy(BaseStrategy):
    name = "sliding_window"

    def max_tail_messages(self, settings: CompactionSettings) -> int | None:
        return settings.window_messages

    def build(self, job: Job) -> Steps[Built | str]:
        built: Built = yield from levels_steps(
            job, lambda cut: window_note(job.msgs, cut), self.name
        )
        return built
