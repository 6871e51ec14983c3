"""Preserved-state hooks: named sources of markdown injected into every compacted context.

The core only describes them; ``agentloop._adapters.hook_runner`` runs them (each with a time limit)
when the core yields a :class:`~agentloop._core.effects.RunHooks` effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PreservedStateHook:
    """A named source of state (todos, workflow phase, error strikes, recent tools...)."""

    name: str
    render: Callable[[], str]
    timeout: float = 2.0


@dataclass(frozen=True, slots=True)
class HookOutput:
    """What the hooks rendered, joined, and a warning for each hook that failed or overran."""

    state: str = ""
    warnings: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    """The names of the hooks that gave state."""
