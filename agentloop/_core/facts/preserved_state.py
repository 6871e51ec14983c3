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

from agentloop._core.facts.ledger import render
from agentloop._core.facts.ledger_fit import ledger_budget, ledger_fitted
from agentloop._core.values.ledger_values import Ledger
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
    ledger: Ledger | None = None
    """The artifact ledger that opens ``state`` (:func:`with_ledger`), as structure."""
    hooks_state: str | None = None
    """What the hooks rendered, when the ledger opens ``state`` (None: ``state`` is theirs)."""

    @property
    def parts(self) -> tuple[str, Ledger | None]:
        """What the hooks rendered, and the ledger (a carried context holds them apart)."""
        return (self.state if self.hooks_state is None else self.hooks_state), self.ledger


class LedgerSource(Protocol):
    """What the ledger of a compaction reads of its compacter."""

    context_window: int
    tool_facts: ToolFacts

    def counter_text(self, text: str) -> int: ...


def fitted_ledger(
    messages: Sequence[Message], source: LedgerSource, kept_from: int | None = None
) -> Ledger:
    """The artifact ledger a compaction of ``messages`` carries, within its budget
    (:func:`~agentloop._core.facts.ledger_fit.ledger_budget`); ``kept_from``: where the tail
    the compaction keeps verbatim starts."""
    budget = ledger_budget(source.context_window)
    return ledger_fitted(
        messages, budget, source.counter_text, facts=source.tool_facts, kept_from=kept_from
    )


def with_ledger(
    hooks: HookOutput,
    messages: Sequence[Message],
    source: LedgerSource,
    kept_from: int | None = None,
) -> HookOutput:
    """The preserved state of a compaction of ``messages``: the ledger (see
    :func:`fitted_ledger`), then what the hooks rendered; the parts kept apart too."""
    ledger = fitted_ledger(messages, source, kept_from)
    text = render(ledger)
    if not text:
        return hooks
    state = f"{text}\n\n{hooks.state}" if hooks.state.strip() else text
    sections = (LEDGER_SECTION, *hooks.sections)
    return HookOutput(state, hooks.warnings, sections, ledger=ledger, hooks_state=hooks.state)
