"""Strategies: one module each, registered by name (+ every room below).

`strategy_auto` (the default: prune first, summarize when pruning does not reach the target) ·
`strategy_summary` · `strategy_window` · `strategy_prune` · `strategy_server` · `strategy_none`.
"""

from agentloop._core.compaction.strategy import Strategy
from agentloop._core.strategies.strategy_auto import AutoStrategy
from agentloop._core.strategies.strategy_none import NoStrategy
from agentloop._core.strategies.strategy_prune import PruneStrategy
from agentloop._core.strategies.strategy_server import ServerStrategy
from agentloop._core.strategies.strategy_summary import SummarizeStrategy
from agentloop._core.strategies.strategy_window import SlidingWindowStrategy

BUILTIN: tuple[Strategy, ...] = (
    AutoStrategy(),
    SummarizeStrategy(),
    SlidingWindowStrategy(),
    PruneStrategy(),
    ServerStrategy(),
    NoStrategy(),
)
"""The strategies every compacter knows (``compaction_core`` registers them); a new one is a
module and one entry here."""
