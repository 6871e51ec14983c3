"""The artifact ledger: what the agent did, derived from the tool calls, never from a summarizer.

Files created, modified and read (and whether each changed since the model last saw it),
commands run with how they ended, the last failing tests and error lines, the todo list, and the
user's own requests in their words. :func:`derive` replays a history's tool calls and results on
top of the ledger an earlier compaction left in it (:func:`find_ledger` reads it back from the
text, wherever it travelled: the prefix's preserved state, or a message appended after kept
turns), so a file read three compactions ago is still listed. :func:`render` writes it
byte-stable: the same facts in the same order give the same bytes, and :func:`parse` reads
those bytes back to the same ledger.

Pure functions, no I/O. "Unchanged" means no file tool changed the file since; the file tools
check the disk itself before saying so (``agentloop._agent.files``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agentloop._core.blocks import is_text, is_tool_result, is_tool_use, tool_result_text
from agentloop._core.messages import Message

__all__ = [
    "LEDGER_CLOSE",
    "LEDGER_OPEN",
    "CommandFact",
    "FileFact",
    "Ledger",
    "command_outcome",
    "derive",
    "error_lines",
    "find_ledger",
    "ledger_budget",
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
ERROR_CHARS = 300
_PRUNED = "[tool output pruned during compaction"

Last = Literal["read", "written", "edited", "partial"]


@dataclass(frozen=True, slots=True)
class FileFact:
    """One file a file tool touched: what was done to it, and what was done last."""

    path: str
    created: bool = False
    modified: bool = False
    read: bool = False
    last: Last = "read"

    @property
    def state(self) -> str:
        """Whether the content the model last saw in full is still current (as far as the
        file tools know)."""
        if self.last == "read":
            return "unchanged since read"
        if self.last == "written":
            return "unchanged since written"
        if self.last == "partial":
            return "partly read"
        return "changed since read" if self.read else ""


@dataclass(frozen=True, slots=True)
class CommandFact:
    """A command line and how its latest run ended (``exit 0``, ``ok``, ``timed out``...).
    Runs are not counted: replaying turns a ledger already holds must change nothing."""

    command: str
    outcome: str


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

    @property
    def empty(self) -> bool:
        return not (self.files or self.commands or self.errors or self.todos or self.requests)


# -- what tool results say ------------------------------------------------------------------

_EXIT = re.compile(r"\[exit code (-?\d+)\]\s*$")
_KILLED = re.compile(r"\[killed by (\w+)\]\s*$")
_ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:\S+:\d+(?::\d+)?: (?:error|[A-Z]{1,4}\d{2,4})\b.*"
    r"|FAILED \S.*"
    r"|[\w.]*(?:Error|Exception)\b: .*)$"
)
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+, in \S+$')
_FAILED = re.compile(r"^FAILED (\S+)")


def command_outcome(text: str, is_error: bool) -> str:
    """How a command ended, read from its result (the shell tool's own markers)."""
    tail = text.rstrip()[-200:]
    if (match := _EXIT.search(tail)) is not None:
        return f"exit {match[1]}"
    if (match := _KILLED.search(tail)) is not None:
        return f"killed by {match[1]}"
    if "[timed out after " in tail:
        return "timed out"
    if text.startswith(("the user declined to run:", "not run:")):
        return "not run"
    return "error" if is_error else "ok"


def error_lines(text: str) -> list[str]:
    """The lines of a tool output that name an error: exception lines, ``FAILED`` tests,
    linter and type-checker errors, and the deepest frame of each traceback."""
    out: list[str] = []
    frame: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if _FRAME.match(raw):
            frame = line
            continue
        if _ERROR_LINE.match(line):
            if frame is not None:
                out.append(frame)
            out.append(re.sub(r"^E\s+", "", line)[:ERROR_CHARS])
            frame = None
        elif frame is not None and not raw.startswith("    "):
            out.append(frame)  # a traceback whose error line is not one we recognise
            frame = None
    if frame is not None:
        out.append(frame)
    return list(dict.fromkeys(out))


_SHORTENED = re.compile(r' \[… [\d,]+ more characters: search_history "[^"]*"\]$')


def shorten_request(text: str, limit: int = REQUEST_CHARS) -> str:
    """The user's words, whole when short; else the head and a search that finds the rest
    (a request shortened already stays as it is)."""
    text = text.strip()
    if len(text) <= limit or _SHORTENED.search(text):
        return text
    head = text[: limit - 100].rstrip()
    words = re.findall(r"[A-Za-z0-9_]{3,}", text[:200])[:5]
    return (
        f'{head} [… {len(text) - len(head):,} more characters: search_history "{" ".join(words)}"]'
    )


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- replaying a history --------------------------------------------------------------------


class _Builder:
    def __init__(self, start: Ledger) -> None:
        self.files = {f.path: f for f in reversed(start.files)}  # oldest first
        self.commands = {c.command: c for c in start.commands}
        self.errors = dict.fromkeys(start.errors)
        self.failing, self.failing_command = start.failing, start.failing_command
        self.todos = start.todos
        self.requests = dict.fromkeys(start.requests)
        self.omitted = dict(start.omitted)

    def file(self, path: str, last: Last, *, created: bool = False) -> None:
        old = self.files.pop(path, None) or FileFact(path)
        self.files[path] = replace(
            old,
            created=old.created or created,
            modified=old.modified or (last in ("written", "edited") and not created),
            read=old.read or last in ("read", "partial"),
            last=last,
        )

    def tool(self, name: str, tool_input: Mapping[str, Any], text: str, is_error: bool) -> None:
        path = tool_input.get("path")
        pruned = text.startswith(_PRUNED)
        if name in ("read_file", "write_file", "edit_file") and isinstance(path, str):
            if is_error:
                return
            if name == "read_file":
                whole = tool_input.get("offset") in (None, 1) and tool_input.get("limit") is None
                old = self.files.get(path)
                self.file(path, "read" if whole else "partial")
                if not whole and old is not None and old.last != "partial":
                    self.files[path] = replace(self.files[path], last=old.last)
            elif name == "write_file":
                if "overwrote existing file" in text:
                    new = False
                elif "new file" in text or "created successfully" in text:
                    new = True
                else:
                    new = path not in self.files
                self.file(path, "written", created=new)
            else:
                self.file(path, "edited")
        elif name == "run_command" and isinstance(tool_input.get("command"), str):
            command = _one_line(tool_input["command"], COMMAND_CHARS)
            ran = self.commands.pop(command, None)
            outcome = command_outcome(text, is_error)
            if pruned and ran is not None:
                outcome = ran.outcome
            self.commands[command] = CommandFact(command, outcome)
            if pruned:
                return
            for line in error_lines(text):
                self.errors.pop(line, None)
                self.errors[line] = None
            failed = tuple(dict.fromkeys(m[1] for m in map(_FAILED.match, text.splitlines()) if m))
            if failed:
                self.failing, self.failing_command = failed, command
            elif command == self.failing_command and outcome in ("exit 0", "ok"):
                self.failing, self.failing_command = (), ""
        elif name == "todo_write" and not is_error:
            todos = tool_input.get("todos")
            if isinstance(todos, list):
                self.todos = tuple(
                    (str(t.get("status", "pending")), _one_line(str(t.get("content", "")), 300))
                    for t in todos
                    if isinstance(t, Mapping)
                )

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
        )


def derive(messages: Sequence[Message], start: Ledger | None = None) -> Ledger:
    """The ledger of ``messages``, on top of ``start`` (default: the ledger an earlier
    compaction left in them, see :func:`find_ledger`). Replaying what an earlier ledger already
    holds changes nothing, so the whole history can be replayed every time."""
    builder = _Builder(start if start is not None else find_ledger(messages) or Ledger())
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for message in messages:
        if message.summary is not None or message.role not in ("user", "assistant"):
            continue  # a compaction prefix or a system message: agentloop's, not the user's
        for block in message.content:
            if is_tool_use(block):
                tool_input = block.get("input")
                calls[str(block.get("id"))] = (
                    str(block.get("name")),
                    tool_input if isinstance(tool_input, Mapping) else {},
                )
            elif is_tool_result(block):
                call = calls.pop(str(block.get("tool_use_id")), None)
                if call is not None:
                    text = tool_result_text(block)
                    builder.tool(call[0], call[1], text, bool(block.get("is_error")))
            elif message.role == "user" and is_text(block):
                text = str(block.get("text", ""))
                # agentloop's own carried state is no request, whatever its role
                if LEDGER_OPEN not in text and not text.startswith("<preserved-state>"):
                    builder.request(text)
    return builder.ledger()


# -- rendering, reading back, the budget ----------------------------------------------------

TODO_MARKS = {"completed": "[x]", "in_progress": "[ ] (in progress)", "pending": "[ ]"}
"""How a todo's state is written where the model reads it (the ledger, the receipt)."""
_SECTIONS = ("Files", "Commands", "Errors", "Failing tests", "Todos", "User requests")


def _file_line(fact: FileFact) -> str:
    done = [w for w, on in (("created", fact.created), ("modified", fact.modified)) if on]
    done += ["read"] if fact.read else []
    state = f" · {fact.state}" if fact.state else ""
    return f"- {', '.join(done) or 'read'}{state}: {fact.path}"


def _lines(ledger: Ledger) -> dict[str, list[str]]:
    failing = [f"- {test}" for test in ledger.failing]
    if failing:
        failing.insert(0, f"- by: {ledger.failing_command}")
    return {
        "Files": [_file_line(f) for f in ledger.files],
        "Commands": [f"- {c.outcome}: {c.command}" for c in ledger.commands],
        "Errors": [f"- {line}" for line in ledger.errors],
        "Failing tests": failing,
        "Todos": [f"- {TODO_MARKS.get(s, '[ ]')} {c}" for s, c in ledger.todos],
        "User requests": ["- " + shorten_request(r).replace("\n", "\n  ") for r in ledger.requests],
    }


_SEARCH = {
    "Files": "read_file",
    "Commands": "run_command",
    "Errors": "Error",
    "Failing tests": "FAILED",
    "Todos": "todo_write",
    "User requests": "search_history with the user's words",
}


def render(ledger: Ledger) -> str:
    """The ledger as markdown between :data:`LEDGER_OPEN` and :data:`LEDGER_CLOSE` ('' when
    empty): fixed sections in a fixed order, each in the ledger's own order."""
    if ledger.empty:
        return ""
    parts = [LEDGER_OPEN, _HEAD]
    for name, lines in _lines(ledger).items():
        left = ledger.omitted.get(name, 0)
        if not lines and not left:
            continue
        parts.append(f"### {name}")
        parts.extend(lines)
        if left:
            parts.append(f"- … {left} older left out: search_history {_SEARCH[name]!r}")
    parts.append(LEDGER_CLOSE)
    return "\n".join(parts)


_FILE = re.compile(
    r"^- (?P<done>(?:created|modified|read)(?:, (?:modified|read))*)"
    r"(?: · (?P<state>unchanged since read|unchanged since written|changed since read"
    r"|partly read))?"
    r": (?P<path>.+)$"
)
_COMMAND = re.compile(r"^- (?P<outcome>[a-z][\w -]*?): (?P<command>.+)$")
_OMITTED = re.compile(r"^- … (\d+) older left out: search_history ")
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
    omitted: dict[str, int] = {}
    for name, lines in sections.items():
        for line in list(lines):
            if (match := _OMITTED.match(line)) is not None:
                omitted[name] = int(match[1])
                lines.remove(line)
    failing = sections.get("Failing tests", [])
    return Ledger(
        files=tuple(_read_file(line) for line in sections.get("Files", []) if _FILE.match(line)),
        commands=tuple(
            CommandFact(m["command"], m["outcome"])
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
    )


_LAST: dict[str, Last] = {
    "unchanged since read": "read",
    "unchanged since written": "written",
    "partly read": "partial",
}


def _read_file(line: str) -> FileFact:
    match = _FILE.match(line)
    assert match is not None
    done, state = match["done"].split(", "), match["state"] or ""
    last = _LAST.get(state, "edited")
    return FileFact(match["path"], "created" in done, "modified" in done, "read" in done, last)


def find_ledger(messages: Iterable[Message]) -> Ledger | None:
    """The newest ledger a compaction left in ``messages`` (in text blocks of messages that are
    not tool results: a file the agent read that holds a ledger is not one)."""
    found: Ledger | None = None
    for message in messages:
        for block in message.content:
            if is_text(block) and LEDGER_OPEN in str(block.get("text", "")):
                found = parse(str(block.get("text", ""))) or found
    return found


def ledger_budget(context_window: int) -> int:
    """The ledger's default token budget: 4 % of the window, at most 8,000 tokens (a small
    window gives it little: what the budget cuts stays searchable)."""
    return min(8_000, context_window // 25)


def _tokens(text: str) -> int:
    return len(text) // 3 + 1  # deliberately high (3 characters a token): no tokenizer here


def within(ledger: Ledger, budget_tokens: int, count: Callable[[str], int] = _tokens) -> Ledger:
    """``ledger`` cut to ``budget_tokens``. What goes first, oldest first within each step:
    error lines beyond the newest 10, commands beyond the newest 10, requests beyond the newest
    5, files only read, then the rest of the errors and commands. Files created or modified,
    the todo list, the failing tests and the newest request are never cut. What is cut is
    counted in the ledger ("… N older left out") and stays searchable."""
    steps: tuple[tuple[str, int], ...] = (
        ("errors", 10),
        ("commands", 10),
        ("requests", 5),
        ("reads", 0),
        ("errors", 0),
        ("commands", 0),
        ("requests", 1),
    )
    for section, keep in steps:
        while count(render(ledger)) > budget_tokens:
            cut = _cut_one(ledger, section, keep)
            if cut is None:
                break
            ledger = cut
    return ledger


def _cut_one(ledger: Ledger, section: str, keep: int) -> Ledger | None:
    omitted = dict(ledger.omitted)
    if section == "reads":
        index = next(
            (i for i in range(len(ledger.files) - 1, -1, -1) if _only_read(ledger.files[i])),
            None,
        )
        if index is None:
            return None
        omitted["Files"] = omitted.get("Files", 0) + 1
        files = ledger.files[:index] + ledger.files[index + 1 :]
        return replace(ledger, files=files, omitted=omitted)
    name = {"errors": "Errors", "commands": "Commands", "requests": "User requests"}[section]
    values: tuple[Any, ...] = getattr(ledger, section)
    if len(values) <= keep:
        return None
    omitted[name] = omitted.get(name, 0) + 1
    if section == "errors":
        return replace(ledger, errors=ledger.errors[1:], omitted=omitted)
    if section == "commands":
        return replace(ledger, commands=ledger.commands[1:], omitted=omitted)
    return replace(ledger, requests=ledger.requests[1:], omitted=omitted)


def _only_read(fact: FileFact) -> bool:
    return fact.read and not (fact.created or fact.modified)


def ledger_text(
    messages: Sequence[Message],
    budget_tokens: int,
    count: Callable[[str], int] = _tokens,
) -> str:
    """The rendered ledger of ``messages`` within ``budget_tokens`` ('' when there is none)."""
    return render(within(derive(messages), budget_tokens, count))
