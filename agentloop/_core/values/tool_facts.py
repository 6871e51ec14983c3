"""What a tool call did, as facts: the one seam between anyone's tools and what survives a
compaction.

A *recognizer* turns one answered call (:class:`ToolCall`: the tool's name, its input, the
result's text and error flag) into facts: a path read (whole or in part), created, written,
edited or deleted (:class:`FileTouched`); a command run and how it ended, with the error lines
and failing tests its output names (:class:`CommandRan`); the todo list as it now stands
(:class:`TodoState`). A recognizer returns ``None`` when it does not know the call ("declared
no facts": counted, never guessed at) and ``()`` when it knows the call did nothing worth
keeping (a search, a failed edit).

:class:`ToolFacts` is a registry of recognizers by tool name, plus fallbacks asked in order for
names no recognizer claims. The ledger, the receipt and everything that reads "what the agent
did" read facts only: this module names no tool and reads no tool's wording. Recognizers for
the tools people already run ship in ``agentloop._adapters`` (see
:func:`agentloop.default_tool_facts`); a library user adds their own in one line::

    compacter.tool_facts.register("deploy", lambda call: [CommandRan(call.input["target"])])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "CommandRan",
    "FileAction",
    "FileTouched",
    "Recognizer",
    "TodoState",
    "ToolCall",
    "ToolFact",
    "ToolFacts",
    "exited",
]

FileAction = Literal["read", "read_part", "created", "overwritten", "written", "edited", "deleted"]
"""What a call did to a path. ``written``: the tool does not say whether the file was new
(the ledger then calls it created when no earlier call touched it); ``read_part``: an offset,
a line range, a head or tail."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One answered tool call as a recognizer sees it."""

    name: str
    input: Mapping[str, Any]
    result: str
    is_error: bool = False
    id: str = ""


@dataclass(frozen=True, slots=True)
class FileTouched:
    """A path a call read, created, wrote, edited or deleted (a move is a delete and a write)."""

    path: str
    action: FileAction


def exited(code: int) -> str:
    """The outcome of a command that ended with ``code`` (``"exit 1"``)."""
    return f"exit {code}"


@dataclass(frozen=True, slots=True)
class CommandRan:
    """A command line and how it ended: ``exit N`` (see :func:`exited`), ``error`` (failed with
    no code shown), ``timed out``, ``killed by SIGNAL``, ``not run`` (declined, refused), or
    ``ok`` (ended with no code shown and no error). ``errors``: the lines of its output that
    name an error; ``tests``: the failing tests its output reports, ``()`` when it reports a
    test run that passed, ``None`` when it reports no test run."""

    command: str
    outcome: str = "ok"
    errors: tuple[str, ...] = ()
    tests: tuple[str, ...] | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome in ("exit 0", "ok")


@dataclass(frozen=True, slots=True)
class TodoState:
    """The whole todo list after the call: ``(status, content)`` per item, in order (status:
    ``pending``, ``in_progress``, ``completed``, or the tool's own word)."""

    items: tuple[tuple[str, str], ...]


ToolFact: TypeAlias = FileTouched | CommandRan | TodoState
_KINDS = (FileTouched, CommandRan, TodoState)
Recognizer: TypeAlias = Callable[[ToolCall], Iterable[ToolFact] | None]
"""A call's facts; ``None`` when the recognizer does not know the call."""


class ToolFacts:
    """Recognizers by tool name, and fallbacks for the names none claims.

    ``register`` returns the registry, so registrations chain. A recognizer that raises is
    treated as one that declared nothing: a user's recognizer never breaks a compaction.
    """

    def __init__(
        self,
        recognizers: Mapping[str, Recognizer] | None = None,
        fallbacks: Sequence[Recognizer] = (),
    ) -> None:
        self._by_name: dict[str, Recognizer] = dict(recognizers or {})
        self._fallbacks: list[Recognizer] = list(fallbacks)

    def register(self, name: str, recognizer: Recognizer) -> ToolFacts:
        """Recognize calls of the tool called ``name`` with ``recognizer`` (replacing any)."""
        self._by_name[name] = recognizer
        return self

    def register_fallback(self, recognizer: Recognizer) -> ToolFacts:
        """Ask ``recognizer`` about calls of tools no name claims, before the earlier ones."""
        self._fallbacks.insert(0, recognizer)
        return self

    def copy(self) -> ToolFacts:
        return ToolFacts(self._by_name, self._fallbacks)

    @property
    def names(self) -> frozenset[str]:
        """The tool names registered by name."""
        return frozenset(self._by_name)

    def recognize(self, call: ToolCall) -> tuple[ToolFact, ...] | None:
        """The facts of ``call``; ``None`` when no recognizer knows it."""
        named = self._by_name.get(call.name)
        for recognizer in (named,) if named is not None else self._fallbacks:
            try:
                found = recognizer(call)
            except Exception:  # a recognizer's bug costs its facts, never the compaction
                found = None
            if found is not None:
                return tuple(f for f in found if isinstance(f, _KINDS))
        return None
