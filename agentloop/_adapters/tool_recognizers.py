"""The recognizers that ship with agentloop: the facts of the tools people already run."""

from __future__ import annotations

from agentloop._adapters.own_tool_facts import OWN_TOOLS
from agentloop._core.tool_facts import ToolFacts

__all__ = ["default_tool_facts"]


def default_tool_facts() -> ToolFacts:
    """A fresh registry of the recognizers that ship with agentloop."""
    return ToolFacts(OWN_TOOLS)
