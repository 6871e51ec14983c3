"""What survives a compaction in sessions of other agents' tools.

    python benchmarks/bench_survival.py --agents [--size 320] [--seeds 0]
        [--windows 200000 60000 16000]

The corpus (``tests/transcripts/other_agents.py``) writes the same work in the shapes of Claude
Code, pi, OpenHands and Codex. Each session is compacted 5 times in succession through the
public ``ConversationCompacter.compact_and_transition`` (strategy ``summarize``) with a
summarizer that writes nothing useful (one bare sentence), at each window. For every
compaction, the facts of the span it replaced are looked for in the compacted context, the
summary left out:

* paths: every path a call read, created, overwrote, edited or deleted, as the call gave it;
* commands: every distinct command, with the exit code of its latest run (the latest run kept
  verbatim with its result, or a line naming the command and that exit code);
* todos: every item of the span still on the latest list, in its latest state;
* stale: a line of the context (not a kept call) showing a command with another exit code, a
  todo in another state, or a path "unchanged" that an edit changed since;
* for a fact the context lacks: whether the one search the context names for its kind
  (``search_history '<query>'`` in that section) finds it in the stored history.

The truth is the generator's own record of what happened (which file each call touched and how,
which command exited how), never what the code under test recognizes: this module names no
tool of agentloop's nor of the agents'. "after 5": the facts of every span, looked for in the
context left by the fifth compaction.
"""

from __future__ import annotations

import json
import re
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transcripts.other_agents import OTHER_AGENTS, AgentSession, Happened

from agentloop import (
    CompactionSettings,
    ConversationCompacter,
    Message,
    as_messages,
    default_tool_facts,
)
from agentloop._adapters.records import to_record
from agentloop._agent.search_history import SearchHistoryTool
from agentloop._sessions import SessionStore, open_store
from agentloop.testing import FunctionModel

MODEL = "claude-sonnet-4-6"
WINDOWS = (200_000, 60_000, 16_000)
COMPACTIONS = 5
SIZE = 320
BARE = "The agent worked on the repository."
"""The summary: one bare sentence that names no fact."""
FULL_TARGET_WINDOW = 40_000
KINDS = ("paths", "commands", "todos")
SEARCH_LIMIT, SEARCH_EXCERPT = 20, 600
"""The one search as a model would run it: the most results and a wide excerpt."""


@dataclass
class Tally:
    facts: int = 0
    in_context: int = 0
    cut: int = 0
    found: int = 0
    missed: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """Cut and not found by the search the context names."""


@dataclass
class Measure:
    """One shape at one window: per kind, every compaction's span and all after the last."""

    shape: str
    window: int
    each: dict[str, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    after: dict[str, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    stale: list[str] = field(default_factory=list)
    compactions: int = 0

    def misses(self) -> list[str]:
        """The targets not met, said: at windows of 40k and more, paths and commands 95 % in
        context, todos 100 %, none stale; at every window, every cut fact found."""
        out: list[str] = []
        where = f"{self.shape} @ {self.window:,}"
        for label, part in (("each", self.each), ("after 5", self.after)):
            for kind in KINDS:
                t = part[kind]
                need = 1.0 if kind == "todos" else 0.95
                if self.window >= FULL_TARGET_WINDOW and t.in_context < need * t.facts:
                    out.append(f"{where} {label}: {kind} {t.in_context}/{t.facts} in context")
                if t.found < t.cut:
                    out.append(f"{where} {label}: {kind} {t.cut - t.found}/{t.cut} cut, not found")
        if self.stale:
            out.append(f"{where}: {len(self.stale)} stale")
        return out


# -- the truth: the generator's record --------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    """The facts of a span, with their values as of the history up to the cut."""

    paths: tuple[str, ...]
    commands: Mapping[str, tuple[int, str]]
    """command → (exit code of its latest run, the tool_use id of that run)."""
    todos: Mapping[str, str]
    """content → latest status (items of the span still on the latest list)."""
    todo_call: str
    """The tool_use id of the call that left the latest list."""
    changed: Mapping[str, bool]
    """path → changed by a file tool's edit (or deletion) since a whole read or write showed
    it (what "unchanged" in a context denies)."""


def truth(record: Sequence[Happened], start: int, end: int, cut: int) -> Truth:
    before = [h for h in record if h.message_index < cut]
    inside = [h for h in before if start <= h.message_index < end]
    latest: dict[str, tuple[int, str]] = {}
    changed: dict[str, bool] = {}
    todos: tuple[tuple[str, str], ...] = ()
    todo_call = ""
    shell = {h.tool_use_id for h in before if h.kind == "command"}
    for h in before:
        if h.kind == "command":
            latest[h.command] = (h.exit_code, h.tool_use_id)
        elif h.kind == "todo":
            todos, todo_call = h.todos, h.tool_use_id
        elif h.tool_use_id in shell:
            continue  # "unchanged" speaks of file tools: a command may change a file unseen
        elif h.action in ("edited", "deleted"):
            changed[h.path] = True
        elif h.action in ("read", "created", "overwritten"):
            changed[h.path] = False
    now = dict(todos)
    span_items = {c for h in inside if h.kind == "todo" for c, _ in h.todos}
    return Truth(
        paths=tuple(dict.fromkeys(h.path for h in inside if h.kind == "path")),
        commands={h.command: latest[h.command] for h in inside if h.kind == "command"},
        todos={c: now[c] for c in now if c in span_items},
        todo_call=todo_call,
        changed=changed,
    )


# -- the context ------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


@dataclass(frozen=True)
class Context:
    """A compacted context as text: ``notes`` every text the model reads that is not a kept
    call (the prefix, a ledger, the agent's and the user's words), the summary removed;
    ``all`` the notes and the kept calls' inputs and results; ``kept`` the ids of the calls
    kept with their results."""

    notes: str
    all: str
    kept: frozenset[str]


PRUNED = "[tool output pruned"


def context_of(messages: Sequence[Message], summary: str) -> Context:
    notes: list[str] = []
    calls: list[str] = []
    uses: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for block in message.content:
            kind = block.get("type")
            if kind == "tool_use":
                uses.add(str(block.get("id")))
                calls.append(json.dumps(block.get("input"), ensure_ascii=False))
            elif kind == "tool_result":
                text = _text(block.get("content"))
                calls.append(text)
                if not text.startswith(PRUNED):
                    answered.add(str(block.get("tool_use_id")))
            elif kind == "text":
                notes.append(str(block.get("text", "")))
            elif kind == "compaction":
                notes.append(str(block.get("content") or ""))
    text = "\n".join(notes)
    if summary.strip():
        text = text.replace(summary.strip(), "")
    return Context(text, text + "\n" + "\n".join(calls), frozenset(uses & answered))


_EDGE = r"A-Za-z0-9_./\-"


def _mentions(text: str, what: str) -> list[str]:
    """The lines of ``text`` that name ``what`` whole (not a longer path or command: what
    follows is the line's end, punctuation, or a space before something no argument starts
    with)."""
    pattern = re.compile(
        rf"(?<![{_EDGE}]){re.escape(what)}(?![{_EDGE}])(?! [-{_EDGE}'\"|&<>$])", re.M
    )
    return [
        text[
            text.rfind("\n", 0, m.start()) + 1 : (text.find("\n", m.end()) + 1 or len(text) + 1) - 1
        ]
        for m in pattern.finditer(text)
    ]


_EXIT = re.compile(r"\bexit(?:ed)?(?: code| with code)?:? ?(-?\d+)", re.I)


def _shown_exit(line: str) -> int | None:
    """The exit code a line gives a command: its last ``exit N``; 0 for a bare ``ok``."""
    found = _EXIT.findall(line)
    if found:
        return int(found[-1])
    return 0 if re.search(r"\bok\b", line) else None


_STATES = (
    ("in_progress", re.compile(r"in[ _]progress|\[~\]|\[>\]", re.I)),
    ("completed", re.compile(r"\[x\]|\bcompleted\b|\bdone\b|✓|✔", re.I)),
    ("pending", re.compile(r"\[ \]|\bpending\b|\btodo\b", re.I)),
)


def _shown_state(line: str) -> str | None:
    return next((state for state, pattern in _STATES if pattern.search(line)), None)


def _flat(text: str) -> str:
    return " ".join(text.split())


def command_held(command: str, code: int, use_id: str, context: Context) -> bool:
    if use_id in context.kept:
        return True
    return any(_shown_exit(line) == code for line in _mentions(context.notes, command))


def todo_held(content: str, status: str, call_id: str, context: Context) -> bool:
    if call_id in context.kept:
        return True
    return any(_shown_state(line) == status for line in _mentions(context.notes, content))


def stale(t: Truth, context: Context) -> list[str]:
    out: list[str] = []
    for command, (code, _) in t.commands.items():
        for line in _mentions(context.notes, command):
            shown = _shown_exit(line)
            if shown is not None and shown != code:
                out.append(
                    f"command {command!r} shown exit {shown}, last exit {code}: {line[:160]}"
                )
    for content, status in t.todos.items():
        for line in _mentions(context.notes, content):
            state = _shown_state(line)
            if state is not None and state != status:
                out.append(f"todo {content!r} shown {state}, is {status}")
    for path in t.paths:
        if t.changed.get(path):
            for line in _mentions(context.notes, path):
                if "unchanged" in line:
                    out.append(f"path {path} shown unchanged, changed since: {line[:160]}")
    return out


# -- the one search the context names ---------------------------------------------------------

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|`([^`]+)`")
_SECTION = {"paths": ("file", "path"), "commands": ("command",), "todos": ("todo", "plan")}


def hints(notes: str) -> dict[str, list[str]]:
    """Per kind: the queries the context names in that kind's section (the nearest heading
    above the hint names the section)."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    heading = ""
    for line in notes.split("\n"):
        if line.lstrip().startswith("#"):
            heading = line.lower()
        if "search_history" not in line:
            continue
        named = line.split("search_history", 1)[1]  # every query the line names after it
        for match in _QUOTED.finditer(named):
            query = next(g for g in match.groups() if g)
            for kind, words in _SECTION.items():
                if any(w in heading for w in words):
                    out[kind].append(query)
    return out


class Searcher:
    def __init__(self, store: SessionStore, history: Sequence[Message]) -> None:
        session = store.create_session(model=MODEL, workspace="/bench/survival-agents")
        store.append_messages(session.id, [to_record(m) for m in history])
        self.tool = SearchHistoryTool(store, session.id)
        self.results: dict[str, str] = {}

    def finds(self, queries: Iterable[str], needle: str) -> bool:
        for query in queries:
            if query not in self.results:
                result = self.tool.run(
                    {"query": query, "limit": SEARCH_LIMIT, "excerpt_chars": SEARCH_EXCERPT}
                )
                self.results[query] = _flat(result.content)
            if _flat(needle) in self.results[query]:
                return True
        return False


# -- the run ----------------------------------------------------------------------------------


def cuts(messages: Sequence[Message], count: int) -> list[int]:
    """``count`` points that split ``messages`` evenly, each where a history may end (after a
    user message, before an assistant one)."""
    out: list[int] = []
    for step in range(1, count + 1):
        index = len(messages) * step // (count + 1)
        while index < len(messages) and not (
            messages[index - 1].role == "user" and messages[index].role == "assistant"
        ):
            index += 1
        if index < len(messages) and (not out or index > out[-1] + 4):
            out.append(index)
    return [*out, len(messages)]


def compacter_for(window: int) -> ConversationCompacter:
    """The public compacter with a summarizer that answers one bare sentence and the
    recognizers that ship with agentloop."""
    return ConversationCompacter(
        model_name=MODEL,
        context_window=window,
        model=FunctionModel(lambda request: BARE),
        settings=CompactionSettings(strategy="summarize"),
        tool_facts=default_tool_facts(),
    )


def tally(
    measure: dict[str, Tally], t: Truth, context: Context, searcher: Searcher, where: str
) -> None:
    named = hints(context.notes)
    flat = _flat(context.all)

    def count(kind: str, label: str, held: bool, needle: str) -> None:
        into = measure[kind]
        into.facts += 1
        if held:
            into.in_context += 1
            return
        into.missed.append(f"{where}: {label}")
        into.cut += 1
        if searcher.finds(named[kind], needle):
            into.found += 1
        else:
            into.lost.append(f"{where}: {label} (searches named: {named[kind] or 'none'})")

    for path in t.paths:
        held = re.search(rf"(?<![{_EDGE}]){re.escape(path)}(?![{_EDGE}])", flat) is not None
        count("paths", path, held, path)
    for command, (code, use_id) in t.commands.items():
        count(
            "commands",
            f"{command} (exit {code})",
            command_held(command, code, use_id, context),
            command,
        )
    for content, status in t.todos.items():
        count(
            "todos",
            f"{content} ({status})",
            todo_held(content, status, t.todo_call, context),
            content,
        )


def measure_session(
    session: AgentSession, window: int, store: SessionStore, compactions: int = COMPACTIONS
) -> Measure:
    original = as_messages(session.transcript.messages)
    record = session.record
    searcher = Searcher(store, original)
    compacter = compacter_for(window)
    result = Measure(session.shape, window)
    context: list[Message] = []
    index: list[int | None] = []  # each context message's index in the original (None: prefix)
    done = 0
    spans: list[tuple[int, int]] = []
    summary = ""
    for cut in cuts(original, compactions)[:compactions]:
        context += original[done:cut]
        index += list(range(done, cut))
        done = cut
        transition = compacter.compact_and_transition(
            "agents",
            context,
            system=session.transcript.system,
            tools=session.transcript.tools,
            force=True,
        )
        if transition is None:
            continue
        child = list(transition.compacted_messages)
        tail = len(child) - 1
        replaced = [i for i in index[: len(index) - tail] if i is not None]
        if not replaced:
            continue
        start, end = replaced[0], replaced[-1] + 1
        spans.append((start, end))
        summary = transition.summary.summary
        seen = context_of(child, summary)
        t = truth(record, start, end, cut)
        where = f"{session.shape}@{window // 1000}k #{len(spans)}"
        tally(result.each, t, seen, searcher, where)
        result.stale += [f"{where}: {s}" for s in stale(t, seen)]
        context = child
        index = [None, *index[len(index) - tail :]]
        result.compactions += 1
    if spans:
        seen = context_of(context, summary)
        t = truth(record, spans[0][0], spans[-1][1], done)
        where = f"{session.shape}@{window // 1000}k after {len(spans)}"
        tally(result.after, t, seen, searcher, where)
        result.stale += [f"{where}: {s}" for s in stale(t, seen)]
    return result


def measure(
    seeds: Sequence[int] = (0,),
    size: int = SIZE,
    windows: Sequence[int] = WINDOWS,
    shapes: Sequence[str] = tuple(OTHER_AGENTS),
    compactions: int = COMPACTIONS,
) -> list[Measure]:
    """Every shape at every window (see the module's docstring); a row per shape and window,
    the seeds added up."""
    rows: list[Measure] = []
    with tempfile.TemporaryDirectory() as home, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(Path(home) / "agents.db")
        try:
            sessions = [OTHER_AGENTS[s](seed, size) for s in shapes for seed in seeds]  # type: ignore[index]
            for window in windows:
                for shape in shapes:
                    row = Measure(shape, window)
                    for session in (s for s in sessions if s.shape == shape):
                        one = measure_session(session, window, store, compactions)
                        for part, into in ((one.each, row.each), (one.after, row.after)):
                            for kind in KINDS:
                                _add(into[kind], part[kind])
                        row.stale += one.stale
                        row.compactions += one.compactions
                    rows.append(row)
        finally:
            store.close()
    return rows


def _add(into: Tally, part: Tally) -> None:
    into.facts += part.facts
    into.in_context += part.in_context
    into.cut += part.cut
    into.found += part.found
    into.missed += part.missed
    into.lost += part.lost


def _share(t: Tally) -> str:
    return f"{100 * t.in_context / t.facts:.0f} % ({t.in_context}/{t.facts})" if t.facts else "—"


def _found(rows: Iterable[Tally]) -> str:
    cut = sum(t.cut for t in rows)
    found = sum(t.found for t in rows)
    return f"{found}/{cut}" if cut else "none cut"


def table(rows: Sequence[Measure]) -> str:
    """The table as Markdown (the README's): per shape and window, each compaction's span ·
    every span after the fifth."""
    out = [
        "| agent shape | window | paths in context | commands, right exit code | todo states "
        "| stale | cut facts found by the search named |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [
            f"{_share(row.each[k])} · {_share(row.after[k])}" if row.each[k].facts else "—"
            for k in KINDS
        ]
        found = _found([*row.each.values(), *row.after.values()])
        out.append(
            f"| {row.shape} | {row.window // 1000}k | {' | '.join(cells)} | {len(row.stale)} "
            f"| {found} |"
        )
    return "\n".join(out)
