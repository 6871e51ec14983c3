"""Strategy ``server``: the Messages API compacts at the trigger (every request carries its
context edit, see ``server_compaction.py``); a compaction asked for (``/compact``, an emergency)
cannot be made to happen there, so it runs here as ``auto``."""

from __future__ import annotations

from agentloop._core.compaction.server_compaction import SERVER, server_edit
from agentloop._core.compaction.strategy import BaseStrategy, Meter, Strategy, strategy_named
from agentloop._core.values.model import ServerCompaction


class ServerStrategy(BaseStrategy):
    name = SERVER
    automatic = False
    summarizes = True

    def runs_as(self) -> Strategy:
        return strategy_named("auto")

    def edit(self, meter: Meter) -> ServerCompaction | None:
        return server_edit(meter)
