"""Strategy ``none``: never compacts (the context grows until the model's window refuses)."""

from __future__ import annotations

from agentloop._core.compaction.strategy import BaseStrategy


class NoStrategy(BaseStrategy):
    name = "none"
    compacts = False
