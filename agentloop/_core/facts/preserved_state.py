"""Preserved state: what every compacted context carries besides the summary.

Two sources. The artifact ledger (``ledger.py``), derived from the history's own tool calls and
results (files, commands and exit codes, errors, failing tests, todos, the user's requests),
never from the summarizer; and named hooks, sources of markdown the caller registers (the files
brought back, a workflow phase...). The core only describes the hooks; ``agentloop._adapters.
hook_runner`` runs them (each with a time limit) when the core yields a
``RunHooks`` effect, and :func:`with_ledger` puts the ledger first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentloop._core.facts.ledger_fit import ledger_budget, ledger_text
from agentloop._core.values.messages import Message
from agentloop._core.values.tool_facts import ToolFacts

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


class LedgerSource(Protocol):
    """What the ledger of a compaction reads of its compacter."""

    context_window: int
    tool_facts: ToolFacts

    def counter_text(self, text: str) -> int: ...


def ledger_of(
    messages: Sequence[Message], source: LedgerSource, kept_from: int | None = None
) -> str:
    """The artifact ledger a compaction of ``messages`` carries ('' when there is none), within
    its budget (:func:`~agentloop._core.facts.ledger_fit.ledger_budget`); ``kept_from``: where the
    tail the compaction keeps verbatim starts."""
    budget = ledger_budget(source.context_window)
    return ledger_text(
        messages, budget, source.counter_text, facts=source.tool_facts, kept_from=kept_from
    )


def with_ledger(
    hooks: HookOutput,
    messages: Sequence[Message],
    source: LedgerSource,
    kept_from: int | None = None,
) -> HookOutput:
    """The preserved state of a compaction of ``messages``: the ledger (see :func:`ledger_of`),
    then what the hooks rendered."""
    text = ledger_of(messages, source, kept_from)
    if not text:
        return hooks
    state = f"{text}\n\n{hooks.state}" if hooks.state.strip() else text
    return HookOutput(state, hooks.warnings, (LEDGER_SECTION, *hooks.sections))
