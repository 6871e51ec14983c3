"""The artifact ledger's facts as values: the paths touched, the commands run, the errors,
the failing tests, the todo list and the user's requests (``facts/ledger.py`` derives them from
a history's tool calls, renders and reads them; a carried context holds them as they are)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

Last = Literal["read", "written", "edited", "partial", "deleted"]


@dataclass(frozen=True, slots=True)
class FileFact:
    """One path a tool touched: what was done to it, and what was done last."""

    path: str
    created: bool = False
    modified: bool = False
    read: bool = False
    last: Last = "read"

    @property
    def state(self) -> str:
        """Whether the content the model last saw in full is still current (as far as the
        tools know)."""
        if self.last == "read":
            return "unchanged since read"
        if self.last == "written":
            return "unchanged since written"
        if self.last == "partial":
            return "partly read"
        if self.last == "deleted":
            return "deleted"
        return "changed since read" if self.read else ""


@dataclass(frozen=True, slots=True)
class CommandFact:
    """A command line, how its latest run ended (``exit 0``, ``ok``, ``timed out``...), and
    how many runs the ledger has replayed (repeats are folded into one line)."""

    command: str
    outcome: str
    runs: int = 1

    @property
    def failed(self) -> bool:
        return self.outcome not in ("exit 0", "ok")


@dataclass(frozen=True, slots=True)
class Ledger:
    """The ledger's facts. Files newest first; commands, errors and requests oldest first."""

    files: tuple[FileFact, ...] = ()
    commands: tuple[CommandFact, ...] = ()
    errors: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()
    """The failing tests of the newest failing test run (cleared when it passes again)."""
    failing_command: str = ""
    todos: tuple[tuple[str, str], ...] = ()
    """``(status, content)`` of the latest todo list."""
    requests: tuple[str, ...] = ()
    omitted: Mapping[str, int] = field(default_factory=dict)
    """How many entries of each section the budget left out (they stay searchable)."""
    hints: Mapping[str, str] = field(default_factory=dict)
    """Per section with entries left out: the search that finds them."""
    counted_through: str = ""
    """The id of the last tool call whose run the commands' counts include: a later replay
    of the same calls (kept turns, a pruned history) counts none of them twice."""

    @property
    def empty(self) -> bool:
        return not (self.files or self.commands or self.errors or self.todos or self.requests)


_LASTS: tuple[Last, ...] = ("read", "written", "edited", "partial", "deleted")


def ledger_to_dict(ledger: Ledger) -> dict[str, Any]:
    """``ledger`` as JSON-ready data (kept beside the text that renders it)."""
    return {
        "files": [[f.path, f.created, f.modified, f.read, f.last] for f in ledger.files],
        "commands": [[c.command, c.outcome, c.runs] for c in ledger.commands],
        "errors": list(ledger.errors),
        "failing": list(ledger.failing),
        "failing_command": ledger.failing_command,
        "todos": [list(todo) for todo in ledger.todos],
        "requests": list(ledger.requests),
        "omitted": dict(ledger.omitted),
        "hints": dict(ledger.hints),
        "counted_through": ledger.counted_through,
    }


def ledger_from_dict(data: Mapping[str, Any]) -> Ledger:
    """The ledger :func:`ledger_to_dict` wrote (``ValueError``/``TypeError``/``KeyError``
    when it is not one)."""
    files = []
    for path, created, modified, read, last in data["files"]:
        if last not in _LASTS:
            raise ValueError(f"not a file's last action: {last!r}")
        files.append(FileFact(str(path), bool(created), bool(modified), bool(read), last))
    return Ledger(
        files=tuple(files),
        commands=tuple(CommandFact(str(c), str(o), int(r)) for c, o, r in data["commands"]),
        errors=tuple(str(e) for e in data["errors"]),
        failing=tuple(str(t) for t in data["failing"]),
        failing_command=str(data["failing_command"]),
        todos=tuple((str(s), str(c)) for s, c in data["todos"]),
        requests=tuple(str(r) for r in data["requests"]),
        omitted={str(k): int(v) for k, v in cast(Mapping[str, Any], data["omitted"]).items()},
        hints={str(k): str(v) for k, v in cast(Mapping[str, Any], data["hints"]).items()},
        counted_through=str(data["counted_through"]),
    )
