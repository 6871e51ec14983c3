"""What a compaction left behind: the facts of the compacted span, by kind, and which of them the
new context still holds.

:func:`span_facts` lists the facts of a span of a history (paths touched, commands and how they
ended, error lines, numbers the user gave, the user's requests, todo states), each with its
values as of the whole history (the latest exit code, the latest todo state) and the
``search_history`` query that finds it. :func:`receipt` keeps those the compacted context does
not hold: what the user is shown after a compaction (``/context``, ``sessions show``). The
survival benchmark (``benchmarks/bench_survival.py``) measures with the same facts. Pure
functions, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloop._core.facts.ledger import TODO_MARKS, calls, is_ours, is_pruned
from agentloop._core.values.blocks import (
    is_compaction,
    is_text,
    is_tool_result,
    is_tool_use,
    tool_result_text,
)
from agentloop._core.values.messages import Message
from agentloop._core.values.shorten import one_line
from agentloop._core.values.tool_facts import CommandRan, FileTouched, ToolFacts

__all__ = [
    "KINDS",
    "LABELS",
    "Fact",
    "Receipt",
    "context_text",
    "present",
    "receipt",
    "span_facts",
]

Kind = Literal["paths", "commands", "errors", "numbers", "requests", "todos"]
KINDS: tuple[Kind, ...] = ("paths", "commands", "errors", "numbers", "requests", "todos")
LABELS: dict[Kind, str] = {
    "paths": "paths touched",
    "commands": "commands and exit codes",
    "errors": "error lines",
    "numbers": "numbers the user gave",
    "requests": "user requests",
    "todos": "todo states",
}
REQUEST_HEAD = 300
"""A request counts by its first characters (whitespace collapsed): a pasted log is not
expected whole in a context."""
TYPED_MAX = 2_000
"""Numbers are taken from requests up to this long (what a person typed, not a paste)."""
_NUMBER = re.compile(r"\d[\d,._:]*\d|\d|\d+(?:s|ms|kb|mb|gb|%)", re.I)
_WORD = re.compile(r"[A-Za-z0-9_]{2,}")
_TERM = re.compile(r"[^\W_]+")
"""A word as the store's search splits them (``_`` separates)."""
FINDABLE_BEFORE = 370
"""How far before a line's end a query word may first occur: the search's excerpt runs from a
third of its width before the first word it meets to two thirds after (600 characters here,
some kept for cutting at a space)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact: what must stand on one line of a context for it to be there, and the query
    that finds it in the stored history."""

    kind: Kind
    needles: tuple[str, ...]
    query: str

    @property
    def label(self) -> str:
        return " → ".join(self.needles)


_COMMON = frozenset({"src", "app", "tests", "test", "the", "and", "for", "not", "such"})
"""Words that most outputs hold (with every short lowercase word): a search cuts its excerpt
around the first word it finds, so a common one would put the excerpt elsewhere."""


def _query(text: str, words: int = 6) -> str:
    """The first ``words`` words of ``text``: a request or a command is found by its start."""
    return " ".join(_WORD.findall(text)[:words])


def _findable(line: str, flat: str, low: str, words: int = 10) -> str:
    """A query for ``line`` of an output (``flat``: its whitespace collapsed, ``low``: that
    lowercased): the words of the line and of what precedes it (as the search splits words)
    but the common ones and those the output holds too far before the line. Every word must
    match, so the line's message is found; the search cuts its excerpt around the first word
    it meets, so the line is in it."""
    shown = " ".join(line.split())
    at = flat.find(shown)
    if at < 0:
        return _query(line)
    before = low[: max(0, at + len(shown) - FINDABLE_BEFORE)]
    near = flat[max(0, at - 80) : at]  # what stands before the line makes it precise
    found: list[str] = []
    for word in dict.fromkeys(_TERM.findall(f"{near} {shown}")):
        lowered = word.lower()
        if lowered in _COMMON or (len(word) <= 3 and word.isalpha() and word.islower()):
            continue
        if _has_word(before, lowered, _TERM_CHAR):
            continue  # the excerpt would be cut around this earlier occurrence
        found.append(word)
    return " ".join(found[:words]) or _query(line)


def _requests(message: Message) -> list[str]:
    if message.role != "user" or message.summary is not None:
        return []
    return [
        str(b.get("text", ""))
        for b in message.content
        if is_text(b) and str(b.get("text", "")).strip() and not is_ours(str(b.get("text", "")))
    ]


@dataclass(frozen=True, slots=True)
class SpanFacts:
    """The facts of a span, and the calls in it that no recognizer knew (by tool name)."""

    facts: list[Fact]
    undeclared: dict[str, int]


def span_facts(
    history: Sequence[Message], start: int, end: int, facts: ToolFacts | None = None
) -> list[Fact]:
    """The facts of ``history[start:end]``, with the values the whole ``history`` gives them
    (a command's latest outcome, a todo's latest state), deduplicated, in order: what
    ``facts`` recognizes of each tool call, and the user's requests."""
    return span_and_undeclared(history, start, end, facts).facts


def span_and_undeclared(
    history: Sequence[Message], start: int, end: int, facts: ToolFacts | None = None
) -> SpanFacts:
    """:func:`span_facts`, and how many calls of each tool in the span declared no facts."""
    registry = facts if facts is not None else ToolFacts()
    outcomes: dict[str, str] = {}
    todos: dict[str, str] = {}
    span_todos: set[str] = set()
    found: dict[tuple[Kind, tuple[str, ...]], Fact] = {}
    undeclared: dict[str, int] = {}

    def add(kind: Kind, needles: tuple[str, ...], query: str) -> None:
        found.setdefault((kind, needles), Fact(kind, needles, query))

    commands: list[str] = []
    for index, call in calls(history):
        inside = start <= index < end
        recognized = registry.recognize(call)
        if recognized is None:
            if inside:
                undeclared[call.name] = undeclared.get(call.name, 0) + 1
            continue
        pruned = is_pruned(call)
        for fact in recognized:
            if isinstance(fact, FileTouched):
                if inside:
                    add("paths", (fact.path,), fact.path)
            elif isinstance(fact, CommandRan):
                command = one_line(fact.command)
                if not pruned:
                    outcomes[command] = fact.outcome
                if inside:
                    commands.append(command)
                    if fact.errors and not pruned:
                        flat = " ".join(call.result.split())
                        low = flat.lower()
                        for line in fact.errors:
                            add("errors", (line,), _findable(line, flat, low))
            else:
                todos = {one_line(c): s for s, c in fact.items}
                if inside:
                    span_todos.update(todos)
    for command in commands:
        add("commands", (command, outcomes.get(command, "ok")), command)
    for content in sorted(span_todos):
        if content in todos:  # an item dropped from the list since has no state left
            add("todos", (f"{TODO_MARKS.get(todos[content], '[ ]')} {content}",), content)
    for message in history[start:end]:
        for text in _requests(message):
            words = one_line(text)
            add("requests", (words[:REQUEST_HEAD].rstrip(),), _query(words))
            if len(words) <= TYPED_MAX:
                tokens = words.split()
                for at, token in enumerate(tokens):
                    if _NUMBER.fullmatch(token.strip(".,;:!?()\"'`")):
                        phrase = " ".join(tokens[max(0, at - 1) : at + 1])
                        around = " ".join(tokens[max(0, at - 2) : at + 2])
                        add("numbers", (phrase,), " ".join(re.findall(r"\w+", around)))
    order = {kind: n for n, kind in enumerate(KINDS)}
    ordered = sorted(found.values(), key=lambda f: order[f.kind])
    return SpanFacts(ordered, undeclared)


@dataclass(frozen=True, slots=True)
class Context:
    """A context's text, ready to be searched: its lines, and all of it whitespace-collapsed."""

    text: str
    flat: str


def context_text(messages: Sequence[Message], *, without: Iterable[str] = ()) -> Context:
    """What the model reads of ``messages`` as text (tool inputs as their JSON and their
    string values), with each of ``without`` removed (e.g. a summary, to measure the rest)."""
    parts: list[str] = []
    for message in messages:
        for block in message.content:
            if is_text(block):
                parts.append(str(block.get("text", "")))
            elif is_tool_result(block):
                parts.append(tool_result_text(block))
            elif is_tool_use(block):
                value = block.get("input")
                parts.append(json.dumps(value, ensure_ascii=False))
                if isinstance(value, Mapping):
                    parts.extend(str(v) for v in value.values() if isinstance(v, str))
            elif is_compaction(block):
                parts.append(str(block.get("content") or ""))
    text = "\n".join(parts)
    for removed in without:
        if removed.strip():
            text = text.replace(removed.strip(), "")
    return Context(text, one_line(text))


def _term_char(char: str) -> bool:
    return char.isalnum()  # the search splits words at ``_`` too


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


_TERM_CHAR, _WORD_CHAR = _term_char, _word_char


def _has_word(text: str, word: str, inside: Callable[[str], bool]) -> bool:
    """Whether ``word`` stands in ``text`` as a whole word (``inside``: what a word is made
    of). Plain searches, no pattern compiled per word: the receipt must be quick."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not inside(text[at - 1])) and (end == len(text) or not inside(text[end])):
            return True
        at = text.find(word, at + 1)
    return False


def present(fact: Fact, context: Context) -> bool:
    """Whether ``context`` holds ``fact``: its one needle anywhere (whitespace collapsed), or
    all its needles on one line (a command with its outcome)."""
    if len(fact.needles) == 1:
        return one_line(fact.needles[0]) in context.flat
    first, rest = fact.needles[0], fact.needles[1:]
    text = context.text
    at = text.find(first)
    while at >= 0:
        line = text[text.rfind("\n", 0, at) + 1 : (text.find("\n", at) + 1 or len(text) + 1) - 1]
        if all(_has_word(line, n, _WORD_CHAR) for n in rest):
            return True
        at = text.find(first, at + 1)
    return False


@dataclass(frozen=True, slots=True)
class Receipt:
    """The facts of a compacted span that its compacted context does not hold, by kind."""

    facts: Mapping[Kind, int] = field(default_factory=dict)
    """How many facts of each kind the span had."""
    missing: Mapping[Kind, tuple[Fact, ...]] = field(default_factory=dict)
    undeclared: Mapping[str, int] = field(default_factory=dict)
    """Per tool whose calls in the span no recognizer knew: how many calls (their facts, if
    any, are not in these counts: never guessed at)."""

    @property
    def left_out(self) -> int:
        return sum(len(v) for v in self.missing.values())

    def lines(self, per_kind: int = 5) -> list[str]:
        """For a person: each kind with what is left out and the search that finds it."""
        total = sum(self.facts.values())
        if not total and not self.undeclared:
            return ["Nothing was compacted."]
        if not self.left_out:
            every = "the one fact" if total == 1 else f"all {total} facts"
            out = [f"The last compaction left nothing out of the context: {every}"]
        else:
            out = [
                f"Left out of the context by the last compaction: {self.left_out} of {total} "
                "facts (search_history finds each)"
            ]
        for kind in KINDS:
            missing = self.missing.get(kind, ())
            if not self.facts.get(kind):
                continue
            kept = self.facts[kind] - len(missing)
            out.append(f"  {LABELS[kind]}: {kept} of {self.facts[kind]} in context")
            for fact in missing[:per_kind]:
                out.append(f"    - {_short(fact.label)}  (search_history {fact.query!r})")
            if len(missing) > per_kind:
                out.append(f"    … {len(missing) - per_kind} more")
        if self.undeclared:
            out.append(f"  {undeclared_line(self.undeclared)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            kind: {
                "facts": self.facts.get(kind, 0),
                "left_out": [
                    {"fact": list(f.needles), "search": f.query} for f in self.missing.get(kind, ())
                ],
            }
            for kind in KINDS
        } | {"undeclared": dict(self.undeclared)}


def undeclared_line(undeclared: Mapping[str, int]) -> str:
    """``4 calls of 2 tools declared no facts: deploy ×3, lookup``."""
    calls_, tools = sum(undeclared.values()), len(undeclared)
    named = ", ".join(
        name if n == 1 else f"{name} ×{n}" for name, n in sorted(undeclared.items())[:6]
    )
    more = ", …" if tools > 6 else ""
    call_word = "call" if calls_ == 1 else "calls"
    tool_word = "tool" if tools == 1 else "tools"
    return f"{calls_} {call_word} of {tools} {tool_word} declared no facts: {named}{more}"


def _short(text: str, limit: int = 100) -> str:
    return one_line(text, limit)


def receipt(
    parent: Sequence[Message],
    replaced: int,
    child: Sequence[Message],
    facts: ToolFacts | None = None,
) -> Receipt:
    """What of ``parent[:replaced]`` (the span a compaction replaced) ``child`` (the compacted
    context) does not hold, by kind, as ``facts`` recognizes the calls. Pinned messages travel
    in the child, so they count as held; the summary counts too (it is in the context)."""
    span = span_and_undeclared(parent, 0, replaced, facts)
    context = context_text(child)
    counts: dict[Kind, int] = {}
    missing: dict[Kind, list[Fact]] = {}
    for fact in span.facts:
        counts[fact.kind] = counts.get(fact.kind, 0) + 1
        if not present(fact, context):
            missing.setdefault(fact.kind, []).append(fact)
    return Receipt(counts, {k: tuple(v) for k, v in missing.items()}, span.undeclared)
