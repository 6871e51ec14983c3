"""Transcripts recorded through agentloop's own tools: every tool result is what the real
``read_file``, ``write_file``, ``edit_file``, ``run_command`` (bash, real exit codes and Python
tracebacks) and ``todo_write`` returned in a scratch workspace, the workspace's path written as
``/home/dev/calc`` so the transcript is the same on every machine.

A session is a run of tasks on a small calculator package: the user asks for a change (with
numbers: limits, places, timeouts) and sometimes steers while tools run; the agent plans with
``todo_write``, reads the module (whole, and sometimes a few lines), runs the check script,
which fails with a traceback until the change is made, edits, runs it again, writes a test
file, and marks its todos done. Deterministic per ``seed``; ``size`` is the number of messages
to reach (the last task is finished, so a transcript overshoots a little).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloop._agent.files import EditFileTool, ReadFileTool, WriteFileTool
from agentloop._agent.shell import RunCommandTool, always_allow
from agentloop._agent.todos import TodoList, TodoWriteTool
from agentloop._agent.workspace import Workspace
from transcripts.facts import Facts, Request, Transcript
from transcripts.session import TOOLS

__all__ = ["RECORDED", "calculator_session"]

ROOT = "/home/dev/calc"
SYSTEM = (
    "You are a coding agent working in the repository at /home/dev/calc (a small Python "
    "calculator package). Plan with todo_write, read before editing, run check.py after every "
    "change and report failures honestly."
)
TODO_TOOL: dict[str, Any] = {
    "name": "todo_write",
    "description": "Replace the todo list (send the complete list every time).",
    "input_schema": {
        "type": "object",
        "properties": {"todos": {"type": "array", "items": {"type": "object"}}},
        "required": ["todos"],
    },
}
CALC = '''"""A small calculator."""


def add(a: float, b: float) -> float:
    return a + b
'''
CHECK = '''"""Checks one task of the calculator: python3 check.py <task>."""

import sys

sys.path.insert(0, ".")
import calc  # noqa: E402

TASK = sys.argv[1]
EXPECTED = {EXPECTED}
name, args, want = EXPECTED[TASK]
got = getattr(calc, name)(*args)
if got != want:
    raise AssertionError(f"{name}{args} returned {got!r}, expected {want!r}")
print(f"ok: {name}{args} == {want!r}")
'''
# name, the request (with its numbers), the function's code, its check: args and result.
Want = Callable[[dict[str, str]], Any]
TASKS: tuple[tuple[str, str, str, tuple[Any, ...], Want], ...] = (
    (
        "clamp",
        "Add clamp(value, low, high) to calc.py; the default limit is {n} and it must never "
        "return more than {n}.",
        "def clamp(value: float, low: float = 0, high: float = {n}) -> float:\n"
        "    return max(low, min(high, value))\n",
        (1000,),
        lambda v: int(v["n"]),
    ),
    (
        "round_to",
        "We need round_to(value) rounding to {p} decimal places, half away from zero, for "
        "invoices over {n} EUR.",
        "def round_to(value: float, places: int = {p}) -> float:\n"
        "    scale = 10 ** places\n"
        "    return int(value * scale + (0.5 if value >= 0 else -0.5)) / scale\n",
        (2.71828,),
        lambda v: round(2.71828, int(v["p"])),
    ),
    (
        "percent",
        "Add percent(part, whole) returning a percentage with {p} decimals; whole=0 must give "
        "0, not a crash (ticket #{t}).",
        "def percent(part: float, whole: float) -> float:\n"
        "    return 0.0 if whole == 0 else round(100 * part / whole, {p})\n",
        (1, 0),
        lambda v: 0.0,
    ),
    (
        "timeout_for",
        "The retry helper needs timeout_for(attempt): {s} seconds times the attempt, capped at "
        "{n} seconds.",
        "def timeout_for(attempt: int) -> int:\n    return min({n}, {s} * attempt)\n",
        (10_000,),
        lambda v: int(v["n"]),
    ),
    (
        "mean",
        "Add mean(values) for the dashboard; an empty list returns 0 and lists over {n} items "
        "are fine.",
        "def mean(values: list[float]) -> float:\n"
        "    return sum(values) / len(values) if values else 0.0\n",
        ([],),
        lambda v: 0.0,
    ),
)
STEERING = (
    "actually keep everything in calc.py, no new modules except the tests",
    "please don't touch check.py, it is shared with CI",
    "use plain functions, no classes, the plugin loader expects functions",
)


class Recorder:
    def __init__(self, seed: int, size: int, root: Path) -> None:
        self.rng = random.Random(f"recorded:{seed}")
        self.size = size
        self.root = root
        space = Workspace(root)
        self.todo_list = TodoList()
        self.tools = {
            "read_file": ReadFileTool(space),
            "write_file": WriteFileTool(space),
            "edit_file": EditFileTool(space),
            "run_command": RunCommandTool(space, always_allow),
            "todo_write": TodoWriteTool(self.todo_list),
        }
        self.messages: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        self.paths: list[str] = []
        self.written: list[str] = []
        self.count = 0
        self.expected: dict[str, tuple[str, tuple[Any, ...], Any]] = {}
        self.finished: list[str] = []

    def call(self, name: str, tool_input: dict[str, Any], steering: str | None = None) -> str:
        self.count += 1
        use_id = f"toolu_rec{self.count:05d}"
        use = {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}
        self.messages.append({"role": "assistant", "content": [use]})
        result = self.tools[name].run(tool_input)
        text = result.content.replace(str(self.root), ROOT)
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": text}
        if result.is_error:
            block["is_error"] = True
        blocks: list[dict[str, Any]] = [block]
        if steering is not None:
            blocks.append({"type": "text", "text": steering})
            self.requests.append(Request(steering, len(self.messages), "steering"))
        self.messages.append({"role": "user", "content": blocks})
        if name in ("read_file", "write_file", "edit_file") and not result.is_error:
            self.paths.append(tool_input["path"])
            if name != "read_file":
                self.written.append(tool_input["path"])
        return text

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})

    def ask(self, text: str) -> None:
        self.requests.append(Request(text, len(self.messages), "typed"))
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def write_check(self) -> None:
        (self.root / "check.py").write_text(CHECK.replace("{EXPECTED}", repr(self.expected)))

    def todos(self, items: list[str], done: int) -> None:
        """The whole list: the earlier tasks' items (done, the last few kept) and this one's."""
        todos = [{"content": item, "status": "completed"} for item in self.finished[-9:]]
        todos += [
            {
                "content": item,
                "status": "completed" if n < done else "in_progress" if n == done else "pending",
            }
            for n, item in enumerate(items)
        ]
        self.call("todo_write", {"todos": todos})
        if done == len(items):
            self.finished += items

    def task(self, number: int) -> None:
        name, request, code, args, want = TASKS[number % len(TASKS)]
        values = {
            "n": str(self.rng.choice((50, 120, 250, 500, 900))),
            "p": str(self.rng.choice((2, 3, 4))),
            "s": str(self.rng.choice((2, 5, 15))),
            "t": str(self.rng.randint(1000, 9999)),
        }
        fill: Callable[[str], str] = lambda text: text.format(**values)  # noqa: E731
        function = f"{name}_{number}" if number >= len(TASKS) else name
        self.ask(fill(request).replace(f"{name}(", f"{function}("))
        key = f"task{number}"
        self.expected[key] = (function, args, want(values))
        self.write_check()
        plan = [f"read calc.py for {function}", f"implement {function}", f"test {function}"]
        self.todos(plan, 0)
        self.call("read_file", {"path": "calc.py"})
        self.call("run_command", {"command": f"python3 check.py {key}"})
        self.todos(plan, 1)
        source = (self.root / "calc.py").read_text()
        last = source.rstrip("\n").rsplit("\n", 1)[-1]
        body = fill(code).replace(f"def {name}(", f"def {function}(")
        steering = None
        if self.rng.random() < 0.35:
            steering = STEERING[number % len(STEERING)] + f" (task {number})"
        self.call(
            "edit_file",
            {"path": "calc.py", "old_string": last, "new_string": f"{last}\n\n\n{body.rstrip()}"},
            steering,
        )
        if self.rng.random() < 0.4:
            self.call("read_file", {"path": "calc.py", "offset": 1, "limit": 6})
        self.call("run_command", {"command": f"python3 check.py {key}"})
        self.todos(plan, 2)
        test = f"tests/test_{function}.py"
        self.call(
            "write_file",
            {
                "path": test,
                "content": f"import calc\n\n\ndef test_{function}() -> None:\n"
                f"    assert calc.{function}(*{args!r}) == {self.expected[key][2]!r}\n",
            },
        )
        self.call("run_command", {"command": f"grep -c def {test}"})
        if self.rng.random() < 0.3:
            self.call("run_command", {"command": f"python3 -c 'import calc; calc.{function}()'"})
        self.todos(plan, 3)
        self.say(f"Done: {function} is in calc.py, checked by check.py {key} and {test}.")

    def build(self) -> Transcript:
        (self.root / "calc.py").write_text(CALC)
        self.expected = {}
        self.write_check()
        number = 0
        while len(self.messages) < self.size:
            self.task(number)
            number += 1
        self.ask("Thanks. Summarize what changed in calc.py.")
        facts = Facts(
            paths=tuple(dict.fromkeys(self.paths)),
            written_paths=tuple(dict.fromkeys(self.written)),
            requests=tuple(self.requests),
            errors=(),
            searches=(),
            documents=(),
            images=(),
            thinking_blocks=0,
            redacted_thinking_blocks=0,
            interrupted_tool_use_ids=(),
            placeholder_indexes=(),
        )
        tools = [tool for tool in TOOLS if tool["name"] != "web_search"] + [TODO_TOOL]
        return Transcript("calculator", 0, self.messages, SYSTEM, tools, facts)


def calculator_session(seed: int = 0, size: int = 120) -> Transcript:
    """A session recorded through the real tools (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="agentloop-recorded-") as root:
        transcript = Recorder(seed, size, Path(root)).build()
    return Transcript(
        transcript.name,
        seed,
        transcript.messages,
        transcript.system,
        transcript.tools,
        transcript.facts,
    )


RECORDED: dict[str, Callable[[int, int], Transcript]] = {"calculator": calculator_session}
"""Every recorded builder by name (all take ``(seed, size)``)."""
