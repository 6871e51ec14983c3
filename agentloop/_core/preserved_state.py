"""Preserved state: what every compacted context carries besides the summary.

Two sources. The artifact ledger (``ledger.py``), derived from the history's own tool calls and
results (files, commands and exit codes, errors, failing tests, todos, the user's requests),
never from the summarizer; and named hooks, sources of markdown the caller registers (the files
brought back, a workflow phase...). The core only describes the hooks; ``agentloop._adapters.
hook_runner`` runs them (each with a time limit) when the core yields a
:class:`~agentloop._core.effects.RunHooks` effect, and :func:`with_ledger` puts the ledger first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentloop._core.ledger import ledger_budget, ledger_text
from agentloop._core.messages import Message

LEDGER_SECTION = "ledger"


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


def with_ledger(
    hooks: HookOutput,
    messages: Sequence[Message],
    context_window: int,
    count: Callable[[str], int] | None = None,
) -> HookOutput:
    """The preserved state of a compaction of ``messages``: the ledger (within its budget, see
    :func:`~agentloop._core.ledger.ledger_budget`), then what the hooks rendered."""
    budget = ledger_budget(context_window)
    text = ledger_text(messages, budget) if count is None else ledger_text(messages, budget, count)
    if not text:
        return hooks
    state = f"{text}\n\n{hooks.state}" if hooks.state.strip() else text
    return HookOutput(state, hooks.warnings, (LEDGER_SECTION, *hooks.sections))
