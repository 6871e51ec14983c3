"""The artifact ledger: what the agent did, derived from the tool calls, never from a summarizer.

Files created, modified and read (and whether each changed since the model last saw it),
commands run with how they ended, the last failing tests and error lines, the todo list, and the
user's own requests in their words. :func:`derive` replays a history's tool calls and results on
top of the ledger an earlier compaction left in it (:func:`find_ledger`: the one a carried
message holds as structure, or one read back from the prefix's preserved state), so a file
read three compactions ago is still listed. :func:`render` writes it
byte-stable: the same facts in the same order give the same bytes, and :func:`parse` reads
those bytes back to the same ledger.

Pure functions, no I/O. "Unchanged" means no file tool changed the file since; the file tools
check the disk itself before saying so (``agentloop._agent.files``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentloop._core.cutting.cut_and_prune import PRUNED_MARKER
from agentloop._core.cutting.prefix import STATE_OPEN
from agentloop._core.values.blocks import is_text, is_tool_result, is_tool_use, tool_result_text
from agentloop._core.values.carried import CARRIED_OPEN
from agentloop._core.values.ledger_values import CommandFact, FileFact, Last, Ledger
from agentloop._core.values.messages import Message
from agentloop._core.values.shorten import one_line
from agentloop._core.values.tool_facts import CommandRan, FileTouched, ToolCall, ToolFact, ToolFacts

__all__ = [
    "LEDGER_CLOSE",
    "LEDGER_OPEN",
    "CommandFact",
    "FileFact",
    "Ledger",
    "derive",
    "find_ledger",
    "parse",
    "render",
    "shorten_request",
]

LEDGER_OPEN = "<ledger>"
LEDGER_CLOSE = "</ledger>"
_HEAD = (
    "## Ledger (kept from the tool calls, not from the summary)\n"
    "'unchanged' means no file tool changed the file since (a command may have); "
    "search_history finds every full output and request."
)
REQUEST_CHARS = 400
"""A request longer than this is shown by its head, with a search that finds the rest."""
COMMAND_CHARS = 240

_SHORTENED = re.compile(r' \[… [\d,]+ more characters: search_history "[^"]*"\]$')
_QUERY_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "the and for that this with from you your are was were have has not but can will into "
        "also just then than them they what when where which who why how all any our out use "
        "please could would should there their about again",
    )
)


def query_words(text: str, words: int = 5) -> str:
    """A search that finds ``text``: its first distinctive words (no stop words, no fragments
    shorter than three letters)."""
    found = [w for w in _QUERY_WORD.findall(text[:600]) if w.lower() not in _STOP]
    return " ".join(dict.fromkeys(found[:words]))


def shorten_request(text: str, limit: int = REQUEST_CHARS) -> str:
    """The user's words, whole when short; else the head and a search that finds the rest
    (a request shortened already stays as it is)."""
    text = text.strip()
    if len(text) <= limit or _SHORTENED.search(text):
        return text
    head = text[: limit - 100].rstrip()
    more = len(text) - len(head)
    return f'{head} [… {more:,} more characters: search_history "{query_words(text)}"]'


# -- replaying a history --------------------------------------------------------------------


_LAST_OF: dict[str, Last] = {"read": "read", "edited": "edited", "deleted": "deleted"}


class _Builder:
    def __init__(self, start: Ledger) -> None:
        self.files = {f.path: f for f in reversed(start.files)}  # oldest first
        self.commands = {c.command: c for c in start.commands}
        self.errors = dict.fromkeys(start.errors)
        self.failing, self.failing_command = start.failing, start.failing_command
        self.todos = start.todos
        self.requests = dict.fromkeys(start.requests)
        self.omitted = dict(start.omitted)
        self.hints = dict(start.hints)
        self.counted_through = start.counted_through

    def file(self, touched: FileTouched, kept: bool) -> None:
        path, action = touched.path, touched.action
        old = self.files.get(path)
        if kept and old is None:
            return  # the kept tail shows it verbatim
        if action == "read_part":
            fact = old or FileFact(path, last="partial")
            self.files.pop(path, None)
            last: Last = "partial" if fact.last == "partial" or old is None else fact.last
            self.files[path] = replace(fact, read=True, last=last)
            return
        last = _LAST_OF.get(action, "written")
        created = action == "created" or (action == "written" and old is None)
        old = self.files.pop(path, None) or FileFact(path)
        # a write of unknown kind to a file created here is that file written again
        changed = action in ("overwritten", "edited", "deleted") or (
            action == "written" and not old.created
        )
        self.files[path] = replace(
            old,
            created=old.created or created,
            modified=old.modified or (changed and not created),
            read=old.read or last == "read",
            last=last,
        )

    def command(self, ran: CommandRan, pruned: bool, kept: bool, counts: bool) -> None:
        command = one_line(ran.command, COMMAND_CHARS)
        old = self.commands.get(command)
        if kept and old is None:
            return  # the kept tail shows it verbatim
        outcome = old.outcome if pruned and old is not None else ran.outcome
        runs = (old.runs if old is not None else 0) + (1 if counts else 0)
        self.commands.pop(command, None)
        self.commands[command] = CommandFact(command, outcome, max(runs, 1))
        if pruned:
            return
        if not kept:
            for line in ran.errors:
                self.errors.pop(line, None)
                self.errors[line] = None
        if ran.tests:
            if not kept:
                self.failing, self.failing_command = ran.tests, command
        elif command == self.failing_command and (ran.tests == () or ran.succeeded):
            self.failing, self.failing_command = (), ""

    def tool(self, facts: tuple[ToolFact, ...], pruned: bool, kept: bool, counts: bool) -> None:
        for fact in facts:
            if isinstance(fact, FileTouched):
                self.file(fact, kept)
            elif isinstance(fact, CommandRan):
                self.command(fact, pruned, kept, counts and not kept)
            else:
                self.todos = tuple((s, one_line(c, 300)) for s, c in fact.items)

    def request(self, text: str) -> None:
        if text.strip():
            shown = shorten_request(text)  # as a ledger read back holds it
            self.requests.pop(shown, None)
            self.requests[shown] = None

    def ledger(self) -> Ledger:
        return Ledger(
            files=tuple(reversed(self.files.values())),
            commands=tuple(self.commands.values()),
            errors=tuple(self.errors),
            failing=self.failing,
            failing_command=self.failing_command,
            todos=self.todos,
            requests=tuple(self.requests),
            omitted=self.omitted,
            hints=self.hints,
            counted_through=self.counted_through,
        )


def calls(messages: Sequence[Message]) -> Iterator[tuple[int, ToolCall]]:
    """Every answered tool call of ``messages`` outside agentloop's own carried messages: the
    index of the message holding its result, and the call."""
    pending: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for index, message in enumerate(messages):
        if message.summary is not None or message.role not in ("user", "assistant"):
            continue  # a compaction prefix or a system message: agentloop's, not the user's
        for block in message.content:
            if is_tool_use(block):
                tool_input = block.get("input")
                pending[str(block.get("id"))] = (
                    str(block.get("name")),
                    tool_input if isinstance(tool_input, Mapping) else {},
                )
            elif is_tool_result(block):
                call = pending.pop(str(block.get("tool_use_id")), None)
                if call is not None:
                    text = tool_result_text(block)
                    is_error, call_id = bool(block.get("is_error")), str(block.get("tool_use_id"))
                    yield index, ToolCall(call[0], call[1], text, is_error, call_id)


def is_ours(text: str) -> bool:
    """Whether a user message's text block is agentloop's own carried state (the preserved
    state, a ledger, a carried context joined to the turn), which no person said."""
    return LEDGER_OPEN in text or text.startswith((STATE_OPEN, CARRIED_OPEN))


PRUNED_PREFIX = PRUNED_MARKER.partition(":")[0]


def is_pruned(call: ToolCall) -> bool:
    """Whether agentloop pruned the call's result in an earlier compaction (its outcome is
    then the one the ledger already holds)."""
    return call.result.startswith(PRUNED_PREFIX)


def derive(
    messages: Sequence[Message],
    start: Ledger | None = None,
    *,
    facts: ToolFacts | None = None,
    kept_from: int | None = None,
) -> Ledger:
    """The ledger of ``messages``, on top of ``start`` (default: the ledger an earlier
    compaction left in them, see :func:`find_ledger`), from what ``facts`` recognizes of each
    tool call. From ``kept_from`` on (the tail a compaction keeps verbatim) nothing new is
    added and nothing counted: only the state of what the ledger already lists is brought up
    to date (a file edited since, a command's latest outcome, the todo list). Replaying the
    kept tail again later counts it once, when it is compacted in turn."""
    builder = _Builder(start if start is not None else find_ledger(messages) or Ledger())
    registry = facts if facts is not None else ToolFacts()
    tail = len(messages) if kept_from is None else kept_from
    answered = list(calls(messages))
    marker = builder.counted_through
    counting = not any(call.id == marker for _, call in answered)  # else: from the marker on
    for index, call in answered:
        recognized = registry.recognize(call)
        if recognized:
            builder.tool(recognized, is_pruned(call), index >= tail, counting)
        counting = counting or call.id == marker
        if index < tail:
            builder.counted_through = call.id
    for message in messages[:tail]:
        if message.summary is not None or message.role != "user":
            continue
        for block in message.content:
            if is_text(block):
                text = str(block.get("text", ""))
                if not is_ours(text):
                    builder.request(text)
    return builder.ledger()


# -- rendering, reading back ---------------------------------------------------------------

TODO_MARKS = {"completed": "[x]", "in_progress": "[ ] (in progress)", "pending": "[ ]"}
"""How a todo's state is written where the model reads it (the ledger, the receipt)."""
SECTIONS = ("Files", "Commands", "Errors", "Failing tests", "Todos", "User requests")
DEFAULT_HINTS = {"Errors": "Error", "Failing tests": "FAILED"}
"""The search for a section's left-out entries when the budget named none."""


def _file_line(fact: FileFact) -> str:
    done = [w for w, on in (("created", fact.created), ("modified", fact.modified)) if on]
    done += ["read"] if fact.read else []
    state = f" · {fact.state}" if fact.state else ""
    return f"- {', '.join(done) or 'read'}{state}: {fact.path}"


def command_line(fact: CommandFact) -> str:
    """A command as the ledger lists it: repeats folded into one line."""
    if fact.runs > 1:
        return f"- ×{fact.runs}, last {fact.outcome}: {fact.command}"
    return f"- {fact.outcome}: {fact.command}"


def _lines(ledger: Ledger) -> dict[str, list[str]]:
    failing = [f"- {test}" for test in ledger.failing]
    if failing:
        failing.insert(0, f"- by: {ledger.failing_command}")
    return {
        "Files": [_file_line(f) for f in ledger.files],
        "Commands": [command_line(c) for c in ledger.commands],
        "Errors": [f"- {line}" for line in ledger.errors],
        "Failing tests": failing,
        "Todos": [f"- {TODO_MARKS.get(s, '[ ]')} {c}" for s, c in ledger.todos],
        "User requests": ["- " + shorten_request(r).replace("\n", "\n  ") for r in ledger.requests],
    }


def render(ledger: Ledger) -> str:
    """The ledger as markdown between :data:`LEDGER_OPEN` and :data:`LEDGER_CLOSE` ('' when
    empty): fixed sections in a fixed order, each in the ledger's own order."""
    if ledger.empty:
        return ""
    parts = [LEDGER_OPEN, _HEAD]
    if ledger.counted_through and ledger.commands:
        parts.append(f"(runs counted through call {ledger.counted_through})")
    for name, lines in _lines(ledger).items():
        left = ledger.omitted.get(name, 0)
        if not lines and not left:
            continue
        parts.append(f"### {name}")
        parts.extend(lines)
        if left:
            hint = ledger.hints.get(name) or DEFAULT_HINTS.get(name, name.lower())
            parts.append(f"- … {left} older left out: search_history {hint}")
    parts.append(LEDGER_CLOSE)
    return "\n".join(parts)


_FILE = re.compile(
    r"^- (?P<done>(?:created|modified|read)(?:, (?:modified|read))*)"
    r"(?: · (?P<state>unchanged since read|unchanged since written|changed since read"
    r"|partly read|deleted))?"
    r": (?P<path>.+)$"
)
_COMMAND = re.compile(r"^- (?:×(?P<runs>\d+), last )?(?P<outcome>[a-z][\w -]*?): (?P<command>.+)$")
_COUNTED = re.compile(r"^\(runs counted through call (\S+)\)$", re.M)
_OMITTED = re.compile(r"^- … (\d+) older left out: search_history (.+)$")
_TODO = re.compile(r"^- \[(?P<x>[x ])\] (?P<progress>\(in progress\) )?(?P<content>.+)$")
_FOUND = re.compile(re.escape(LEDGER_OPEN) + r"\n(.*?)\n" + re.escape(LEDGER_CLOSE), re.S)


def parse(text: str) -> Ledger | None:
    """The ledger :func:`render` wrote into ``text`` (None when there is none)."""
    found = _FOUND.findall(text)
    if not found:
        return None
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in found[-1].split("\n"):
        if line.startswith("### "):
            current = sections.setdefault(line[4:], [])
        elif current is not None and line.startswith("  ") and current:
            current[-1] += "\n" + line[2:]
        elif current is not None and line.startswith("- "):
            current.append(line)
    counted = _COUNTED.search(found[-1])
    omitted: dict[str, int] = {}
    hints: dict[str, str] = {}
    for name, lines in sections.items():
        for line in list(lines):
            if (match := _OMITTED.match(line)) is not None:
                omitted[name], hints[name] = int(match[1]), match[2]
                lines.remove(line)
    failing = sections.get("Failing tests", [])
    return Ledger(
        files=tuple(_read_file(line) for line in sections.get("Files", []) if _FILE.match(line)),
        commands=tuple(
            CommandFact(m["command"], m["outcome"], int(m["runs"] or 1))
            for m in map(_COMMAND.match, sections.get("Commands", []))
            if m is not None
        ),
        errors=tuple(line[2:] for line in sections.get("Errors", [])),
        failing=tuple(x[2:] for x in failing if not x.startswith("- by: ")),
        failing_command=next((x[6:] for x in failing if x.startswith("- by: ")), ""),
        todos=tuple(
            (
                "completed" if m["x"] == "x" else "in_progress" if m["progress"] else "pending",
                m["content"],
            )
            for m in map(_TODO.match, sections.get("Todos", []))
            if m is not None
        ),
        requests=tuple(line[2:] for line in sections.get("User requests", [])),
        omitted=omitted,
        hints=hints,
        counted_through=counted[1] if counted else "",
    )


_LAST: dict[str, Last] = {
    "unchanged since read": "read",
    "unchanged since written": "written",
    "partly read": "partial",
    "deleted": "deleted",
}


def _read_file(line: str) -> FileFact:
    match = _FILE.match(line)
    assert match is not None
    done, state = match["done"].split(", "), match["state"] or ""
    last = _LAST.get(state, "edited")
    return FileFact(match["path"], "created" in done, "modified" in done, "read" in done, last)


def find_ledger(messages: Iterable[Message]) -> Ledger | None:
    """The newest ledger a compaction left in ``messages``: the one a carried message holds as
    structure (``Message.carried``), else one rendered into a text block (the compaction
    prefix's preserved state, a history kept as text alone) read back by :func:`parse`; never
    one inside a tool result (a file the agent read that holds a ledger is not one)."""
    found: Ledger | None = None
    for message in messages:
        if message.carried is not None:
            found = message.carried.ledger or found
            continue
        for block in message.content:
            if is_text(block) and LEDGER_OPEN in str(block.get("text", "")):
                found = parse(str(block.get("text", ""))) or found
    return found
