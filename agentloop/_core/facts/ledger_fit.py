"""The ledger within its budget: what goes first when it does not fit, and the search that
finds what went.

The rule: the budget is spent where it keeps the most facts. A fact is one entry (a path, a
command with its outcome, an error line, a request); what costs many characters for one fact
goes before what costs few, and what the model needs to act goes last. In order, oldest first
within each step unless said: error lines beyond the newest 10; requests beyond the newest 3
(each is long); error lines beyond the newest 3; requests beyond the newest; then paths only
read and commands that ended well, the longest first (one long line costs the room of several
short facts); then commands that failed beyond the newest 10, error lines but the newest,
the last failed commands, the newest error line. Never cut: paths created, modified or
deleted, the todo list, the failing tests and the newest request. Each section with entries
left out names the searches that find them (``search_history "pytest" · "ruff check"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from agentloop._core.facts.ledger import (
    FileFact,
    Ledger,
    derive,
    query_words,
    render,
)
from agentloop._core.values.messages import Message
from agentloop._core.values.tool_facts import ToolFacts

__all__ = ["ledger_budget", "ledger_fitted", "ledger_text", "within"]

_SHARE = {"Commands": 2, "Files": 1}
"""How the searches' room is shared, in thirds: the commands and paths cut are each found by
their own search; the other sections name one."""
_MIN_ROOM = 120
"""The characters a section's searches may take at least (else: three quarters of a character
per token of the ledger's budget, a fifth of it or so)."""
_WORD = re.compile(r"[A-Za-z0-9]+")  # words as the search splits them
_LAUNCHERS = frozenset({"env", "sudo", "time", "nice", "exec"})
_STOP_HINT = frozenset({"src", "py", "the", "and", "dev", "null"})


def ledger_budget(context_window: int) -> int:
    """The ledger's default token budget: 4 % of the window, at most 8,000 tokens; a small
    window gives it up to 1,200 tokens (at most a twelfth of it), since its facts are what
    stays of the work when a compaction keeps little else. What the budget cuts stays
    searchable."""
    return min(8_000, max(context_window // 25, min(1_200, context_window // 12)))


def _tokens(text: str) -> int:
    return len(text) // 3 + 1  # deliberately high (3 characters a token): no tokenizer here


def _only_read(fact: FileFact) -> bool:
    return fact.read and not (fact.created or fact.modified) and fact.last != "deleted"


class _Cuts:
    """The ledger being cut, and what was cut from each section (for the searches)."""

    def __init__(self, ledger: Ledger, room: int) -> None:
        self.ledger = ledger
        self.room = room
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
            room = self.room * _SHARE.get(section, 0) // 3  # the others: their newest search
            hints[section] = _searches(section, labels, hints.get(section, ""), room)
        return replace(self.ledger, hints=hints)


def _words(label: str) -> list[str]:
    """The searchable words of a command, lowercased as the search matches them: what stands
    after its last ``&&`` (a ``cd dir &&`` dropped), without flags, one-letter words and a
    leading ``env``, ``sudo`` or ``time``."""
    tokens = [t for t in label.split("&&")[-1].split() if not t.startswith("-")]
    words = [w.lower() for t in tokens for w in _WORD.findall(t) if len(w) > 1]
    while len(words) > 1 and words[0] in _LAUNCHERS:
        words = words[1:]
    return words


def _command_search(label: str, words_kept: int) -> str:
    """A search that finds a command: its program and the words that tell it from the
    program's other runs (the longest; ``words_kept`` 0: the first two words, the family)."""
    words = _words(label)
    if not words_kept:
        return " ".join(words[:2])
    rest = sorted(dict.fromkeys(w for w in words[1:] if w not in _STOP_HINT), key=len)
    keep = rest[-words_kept:]
    return " ".join([*words[:1], *(w for w in words[1:] if w in keep)])


def _searches(section: str, labels: Sequence[str], earlier: str, room: int) -> str:
    """The searches that find the entries cut from ``section``, newest first, within ``room``
    characters: for a command its program and the words that tell it apart (a search shows
    a few hits, and the common words of a session's commands would fill them), the oldest
    ones by their family (program and subcommand) where all do not fit; for a path its name."""
    newest = list(reversed(labels))
    if section == "Commands":
        precise = [_command_search(label, 2) for label in newest]
        family = [_command_search(label, 0) for label in newest]
    elif section == "Files":
        precise = family = [
            query_words(label.rsplit("/", 1)[-1].replace(".", " "), 2) for label in newest
        ]
    else:
        precise = family = [query_words(label) for label in newest]
    older = [q.strip('"') for q in earlier.split(" · ") if q] if earlier else []

    def joined(keys: Sequence[str]) -> str:
        return " · ".join(f'"{k}"' for k in dict.fromkeys([*keys, *older]) if k)

    keys = list(precise)
    for at in range(len(keys) - 1, -1, -1):  # the oldest first take their family's search
        if len(joined(keys)) <= room:
            break
        keys[at] = family[at]
    while older and len(joined(keys)) > room:
        older.pop()  # the oldest: the count still says how many are left out
    while len(keys) > 1 and len(joined(keys)) > room:
        keys.pop()
    return joined(keys) or earlier


def within(ledger: Ledger, budget_tokens: int, count: Callable[[str], int] = _tokens) -> Ledger:
    """``ledger`` cut to ``budget_tokens`` by the module's rule; what is cut is counted in the
    ledger ("… N older left out: search_history ...") and stays searchable."""
    cuts = _Cuts(ledger, room=max(_MIN_ROOM, budget_tokens * 3 // 4))
    steps: tuple[Callable[[], bool], ...] = (
        lambda: cuts.errors(10),
        lambda: cuts.requests(3),
        lambda: cuts.errors(3),
        lambda: cuts.requests(1),
        cuts.cheap,
        lambda: cuts.failed(10),
        lambda: cuts.errors(1),
        lambda: cuts.failed(0),
        lambda: cuts.errors(0),
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
    fitted = ledger_fitted(messages, budget_tokens, count, facts=facts, kept_from=kept_from)
    return render(fitted)


def ledger_fitted(
    messages: Sequence[Message],
    budget_tokens: int,
    count: Callable[[str], int] = _tokens,
    *,
    facts: ToolFacts | None = None,
    kept_from: int | None = None,
) -> Ledger:
    """The ledger of ``messages`` within ``budget_tokens``, as structure."""
    return within(derive(messages, facts=facts, kept_from=kept_from), budget_tokens, count)
