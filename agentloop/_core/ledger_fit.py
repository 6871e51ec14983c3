"""The ledger within its budget: what goes first when it does not fit, and the search that
finds what went.

The rule: the budget is spent where it keeps the most facts. A fact is one entry (a path, a
command with its outcome, an error line, a request); what costs many characters for one fact
goes before what costs few, and what the model needs to act goes last. In order, oldest first
within each step unless said: error lines beyond the newest 10; requests beyond the newest 3
(each is long); error lines beyond the newest 3; requests beyond the newest; then paths only
read and commands that ended well, the longest first (one long line costs the room of several
short facts); then commands that failed beyond the newest 10, the last error lines, the last
failed commands. Never cut: paths created, modified or
deleted, the todo list, the failing tests and the newest request. Each section with entries
left out names the searches that find them (``search_history "pytest" · "ruff check"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from agentloop._core.ledger import (
    FileFact,
    Ledger,
    derive,
    query_words,
    render,
)
from agentloop._core.messages import Message
from agentloop._core.tool_facts import ToolFacts

__all__ = ["ledger_budget", "ledger_text", "within"]

_MAX_HINTS = 4


def ledger_budget(context_window: int) -> int:
    """The ledger's default token budget: 4 % of the window, at most 8,000 tokens (a small
    window gives it little: what the budget cuts stays searchable)."""
    return min(8_000, context_window // 25)


def _tokens(text: str) -> int:
    return len(text) // 3 + 1  # deliberately high (3 characters a token): no tokenizer here


def _only_read(fact: FileFact) -> bool:
    return fact.read and not (fact.created or fact.modified) and fact.last != "deleted"


class _Cuts:
    """The ledger being cut, and what was cut from each section (for the searches)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.cut: dict[str, list[str]] = {}

    def _drop(self, section: str, label: str, cut: Ledger) -> None:
        omitted = dict(self.ledger.omitted)
        omitted[section] = omitted.get(section, 0) + 1
        self.cut.setdefault(section, []).append(label)
        self.ledger = replace(cut, omitted=omitted)

    def errors(self, keep: int) -> bool:
        if len(self.ledger.errors) <= keep:
            return False
        self._drop(
            "Errors", self.ledger.errors[0], replace(self.ledger, errors=self.ledger.errors[1:])
        )
        return True

    def requests(self, keep: int) -> bool:
        if len(self.ledger.requests) <= keep:
            return False
        self._drop(
            "User requests",
            self.ledger.requests[0],
            replace(self.ledger, requests=self.ledger.requests[1:]),
        )
        return True

    def cheap(self) -> bool:
        """The longest of the paths only read and the commands that ended well."""
        files, commands = self.ledger.files, self.ledger.commands
        best: tuple[int, str, int] | None = None  # (length, section, index)
        for i in range(len(files) - 1, -1, -1):  # oldest first among equals
            if _only_read(files[i]) and (best is None or len(files[i].path) > best[0]):
                best = (len(files[i].path), "Files", i)
        for i, command in enumerate(commands):
            if not command.failed and (best is None or len(command.command) > best[0]):
                best = (len(command.command), "Commands", i)
        if best is None:
            return False
        _, section, i = best
        if section == "Files":
            self._drop(
                "Files", files[i].path, replace(self.ledger, files=files[:i] + files[i + 1 :])
            )
        else:
            self._drop(
                "Commands",
                commands[i].command,
                replace(self.ledger, commands=commands[:i] + commands[i + 1 :]),
            )
        return True

    def failed(self, keep: int) -> bool:
        commands = self.ledger.commands
        if len(commands) <= keep:
            return False
        self._drop("Commands", commands[0].command, replace(self.ledger, commands=commands[1:]))
        return True

    def with_hints(self) -> Ledger:
        if not self.cut:
            return self.ledger
        hints = dict(self.ledger.hints)
        for section, labels in self.cut.items():
            hints[section] = _searches(section, labels, hints.get(section, ""))
        return replace(self.ledger, hints=hints)


def _searches(section: str, labels: Sequence[str], earlier: str) -> str:
    """The searches that find the entries cut from ``section``: the words most of them share
    (a command's program, a path's directory), newest first, at most a few."""
    if section == "Commands":
        keys = [query_words(label, 2) for label in labels]
    elif section == "Files":
        keys = [query_words(label.rsplit("/", 1)[-1].replace(".", " "), 2) for label in labels]
    else:
        keys = [query_words(label) for label in labels]
    common = [k for k, _ in Counter(k for k in reversed(keys) if k).most_common(_MAX_HINTS)]
    quoted = [f'"{k}"' for k in common]
    if earlier:
        quoted += [q for q in earlier.split(" · ") if q not in quoted]
    return " · ".join(quoted[:_MAX_HINTS]) or earlier


def within(ledger: Ledger, budget_tokens: int, count: Callable[[str], int] = _tokens) -> Ledger:
    """``ledger`` cut to ``budget_tokens`` by the module's rule; what is cut is counted in the
    ledger ("… N older left out: search_history ...") and stays searchable."""
    cuts = _Cuts(ledger)
    steps: tuple[Callable[[], bool], ...] = (
        lambda: cuts.errors(10),
        lambda: cuts.requests(3),
        lambda: cuts.errors(3),
        lambda: cuts.requests(1),
        cuts.cheap,
        lambda: cuts.failed(10),
        lambda: cuts.errors(0),
        lambda: cuts.failed(0),
    )
    for step in steps:
        while count(render(cuts.with_hints())) > budget_tokens:
            if not step():
                break
    return cuts.with_hints()


def ledger_text(
    messages: Sequence[Message],
    budget_tokens: int,
    count: Callable[[str], int] = _tokens,
    *,
    facts: ToolFacts | None = None,
    kept_from: int | None = None,
) -> str:
    """The rendered ledger of ``messages`` within ``budget_tokens`` ('' when there is none)."""
    return render(within(derive(messages, facts=facts, kept_from=kept_from), budget_tokens, count))
