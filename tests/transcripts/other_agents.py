"""Sessions in the shapes of other coding agents: Claude Code, pi, OpenHands and Codex.

The same work (``transcripts.agent_work``: a shop backend's tasks, 10-30 files, 30-80 distinct
commands with repeats, long pytest outputs failing then passing, todo lists) written as each
agent's tools write it: their tool names, input keys, path forms and result texts (Claude
Code's ``Read``/``Edit``/``Write``/``Bash``/``Grep``/``TodoWrite`` with absolute ``file_path``
and ``Exit code N`` on errors; pi's ``read``/``edit``/``write``/``bash`` with relative ``path``
and ``Command exited with code N``; OpenHands' ``str_replace_editor`` by ``command`` and
``execute_bash`` with its bracketed exit markers and ``task_tracker``; Codex's ``shell`` argv
with JSON ``metadata.exit_code``, reads through ``cat``/``sed -n``, ``apply_patch`` envelopes
and ``update_plan``).

Each :class:`AgentSession` carries, beside the transcript, the generator's own record of what
happened (:class:`Happened`: which path each call read, created, overwrote, edited or deleted,
which command ran and how it exited, the todo list each call left): the truth a survival
measure compares a compacted context with, independent of any recognizer. Deterministic per
seed; ``size`` is about the number of messages.
"""

from __future__ import annotations

import abc
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from transcripts.agent_work import (
    Ask,
    Delete,
    Edit,
    Grep,
    Read,
    Run,
    Say,
    Step,
    Todo,
    Write,
    plan_session,
)
from transcripts.facts import Facts, Request, Transcript

__all__ = ["OTHER_AGENTS", "AgentSession", "Happened", "other_agent_session"]

Shape = Literal["claude_code", "pi", "openhands", "codex"]
Block = dict[str, Any]


@dataclass(frozen=True)
class Happened:
    """One answered call as the generator made it: the index of the user message holding its
    result, the tool_use id, and what it did. ``action`` for a path: ``read``, ``read_part``,
    ``created``, ``overwritten``, ``edited``, ``deleted``."""

    message_index: int
    tool_use_id: str
    kind: Literal["path", "command", "todo"]
    path: str = ""
    action: str = ""
    command: str = ""
    exit_code: int = 0
    todos: tuple[tuple[str, str], ...] = ()
    """``(content, status)``, status ``pending``, ``in_progress`` or ``completed``."""


@dataclass(frozen=True)
class AgentSession:
    shape: Shape
    transcript: Transcript
    record: tuple[Happened, ...]


def _tool(name: str, about: str, **properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": about,
        "input_schema": {
            "type": "object",
            "properties": {k: {"type": v} for k, v in properties.items()},
            "required": [next(iter(properties))] if properties else [],
        },
    }


@dataclass
class Call:
    """What a shape makes of a step: the call, its result, and what it did."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool = False
    did: list[Happened] = field(default_factory=list)


def _numbered(content: str, first: int, last: int, form: str) -> str:
    lines = content.split("\n")[first - 1 : last]
    return "\n".join(form.format(n=first + k, line=line) for k, line in enumerate(lines))


def _lines(content: str) -> int:
    return content.count("\n")


class Writer(abc.ABC):
    """Renders steps as one agent's calls (subclasses: one per shape)."""

    shape: Shape
    root = "/home/dev/shop"
    parallel = True
    """Whether the agent sends several calls in one message (reads, searches)."""
    system = ""
    tools: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"{self.shape}:{seed}")

    def path(self, path: str) -> str:
        return f"{self.root}/{path}"

    def output(self, text: str) -> str:
        return text.replace("{ROOT}", self.root)

    def file(self, step: Read | Write | Edit | Delete, action: str) -> Happened:
        return Happened(0, "", "path", path=self.path(step.path), action=action)

    def ran(self, command: str, code: int) -> Happened:
        return Happened(0, "", "command", command=command, exit_code=code)

    @abc.abstractmethod
    def call(self, step: Step) -> Call | None:
        """``step`` as this agent's call (None: the agent has no such tool)."""

    def grep(self, step: Grep) -> Call:
        command = f"grep -rn '{step.pattern}' {step.where}"
        return self.shell(Run(command, 0, step.output))

    @abc.abstractmethod
    def shell(self, step: Run) -> Call:
        """A command as this agent's shell call."""

    def delete(self, step: Delete) -> Call:
        call = self.shell(Run(f"rm {self.path(step.path)}", 0, ""))
        call.did.append(self.file(step, "deleted"))
        return call


class ClaudeCode(Writer):
    shape = "claude_code"
    system = (
        "You are an interactive CLI coding agent. Use the tools to help the user with software "
        "engineering tasks. Working directory: /home/dev/shop. File paths given to Read, Write "
        "and Edit must be absolute. Use TodoWrite to plan and track multi-step work."
    )
    tools: ClassVar[list[dict[str, Any]]] = [
        _tool("Read", "Reads a file (numbered lines).", file_path="string", offset="number",
              limit="number"),
        _tool("Write", "Writes a file.", file_path="string", content="string"),
        _tool("Edit", "Exact string replacement in a file.", file_path="string",
              old_string="string", new_string="string", replace_all="boolean"),
        _tool("Bash", "Runs a bash command.", command="string", timeout="number"),
        _tool("Grep", "Searches file contents.", pattern="string", path="string",
              output_mode="string"),
        _tool("TodoWrite", "Replaces the todo list.", todos="array"),
    ]  # fmt: skip
    MARK = "{n:>6}\u2192{line}"

    def call(self, step: Step) -> Call | None:
        if isinstance(step, Read):
            tool_input: dict[str, Any] = {"file_path": self.path(step.path)}
            first, last = step.lines or (1, _lines(step.content))
            if step.lines:
                tool_input.update(offset=first, limit=last - first + 1)
            text = _numbered(step.content, first, last, self.MARK)
            action = "read_part" if step.lines else "read"
            return Call("Read", tool_input, text, did=[self.file(step, action)])
        if isinstance(step, Write):
            where = self.path(step.path)
            text = (
                f"File created successfully at: {where}"
                if step.new
                else f"The file {where} has been updated successfully."
            )
            action = "created" if step.new else "overwritten"
            tool_input = {"file_path": where, "content": step.content}
            return Call("Write", tool_input, text, did=[self.file(step, action)])
        if isinstance(step, Edit):
            where = self.path(step.path)
            tool_input = {"file_path": where, "old_string": step.old, "new_string": step.new}
            if not step.found:
                text = f"<tool_use_error>String to replace not found in file.\nString: {step.old}</tool_use_error>"  # noqa: E501
                return Call("Edit", tool_input, text, is_error=True)
            at = step.content[: step.content.find(step.new)].count("\n") + 1
            snippet = _numbered(
                step.content, max(1, at - 4), at + step.new.count("\n") + 4, self.MARK
            )
            text = (
                f"The file {where} has been updated. Here's the result of running `cat -n` on a "
                f"snippet of the edited file:\n{snippet}"
            )
            return Call("Edit", tool_input, text, did=[self.file(step, "edited")])
        if isinstance(step, Todo):
            todos = [
                {"content": c, "status": s, "activeForm": f"Working on: {c[0].lower()}{c[1:]}"}
                for c, s in step.items
            ]
            text = (
                "Todos have been modified successfully. Ensure that you continue to use the todo "
                "list to track your progress. Please proceed with the current tasks if applicable"
            )
            return Call("TodoWrite", {"todos": todos}, text,
                        did=[Happened(0, "", "todo", todos=step.items)])  # fmt: skip
        if isinstance(step, Grep):
            tool_input = {"pattern": step.pattern, "path": self.path(step.where),
                          "output_mode": "content", "-n": True}  # fmt: skip
            return Call("Grep", tool_input, step.output or "No matches found")
        if isinstance(step, Delete):
            return self.delete(step)
        if isinstance(step, Run):
            return self.shell(step)
        return None

    def shell(self, step: Run) -> Call:
        out = self.output(step.output)
        tool_input = {"command": step.command, "description": f"Run {step.command.split()[0]}"}
        did = [self.ran(step.command, step.exit_code)]
        if step.exit_code:
            return Call(
                "Bash", tool_input, f"Exit code {step.exit_code}\n{out}".rstrip(), True, did
            )
        return Call("Bash", tool_input, out or "(Bash completed with no output)", did=did)


class Pi(Writer):
    shape = "pi"
    system = (
        "You are an expert coding assistant. You help users with coding tasks by reading files, "
        "executing commands, editing code, and writing new files. Current working directory: "
        "/home/dev/shop"
    )
    tools: ClassVar[list[dict[str, Any]]] = [
        _tool("read", "Read a file.", path="string", offset="number", limit="number"),
        _tool("bash", "Execute a bash command.", command="string", timeout="number"),
        _tool("edit", "Replace exact text in a file.", path="string", oldText="string",
              newText="string"),
        _tool("write", "Write a file.", path="string", content="string"),
    ]  # fmt: skip

    def path(self, path: str) -> str:
        return path

    def call(self, step: Step) -> Call | None:
        if isinstance(step, Read):
            tool_input: dict[str, Any] = {"path": step.path}
            if step.lines is None:
                text = step.content.rstrip("\n")
                return Call("read", tool_input, text, did=[self.file(step, "read")])
            first, last = step.lines
            tool_input.update(offset=first, limit=last - first + 1)
            text = _numbered(step.content, first, last, "{line}")
            text += f"\n\n[{_lines(step.content) - last} more lines in file. Use offset={last + 1} to continue.]"  # noqa: E501
            return Call("read", tool_input, text, did=[self.file(step, "read_part")])
        if isinstance(step, Write):
            text = f"Successfully wrote {len(step.content.encode())} bytes to {step.path}"
            action = "created" if step.new else "overwritten"
            return Call("write", {"path": step.path, "content": step.content}, text,
                        did=[self.file(step, action)])  # fmt: skip
        if isinstance(step, Edit):
            tool_input = {"path": step.path, "oldText": step.old, "newText": step.new}
            if not step.found:
                text = (
                    f"Could not find the exact text in {step.path}. The old text must match "
                    "exactly including all whitespace and newlines."
                )
                return Call("edit", tool_input, text, is_error=True)
            text = f"Successfully replaced text in {step.path}."
            return Call("edit", tool_input, text, did=[self.file(step, "edited")])
        if isinstance(step, Grep):
            return self.grep(step)
        if isinstance(step, Delete):
            return self.delete(step)
        if isinstance(step, Run):
            return self.shell(step)
        return None  # pi has no todo tool

    def shell(self, step: Run) -> Call:
        out = self.output(step.output)
        did = [self.ran(step.command, step.exit_code)]
        if step.exit_code:
            text = f"{out}\n\nCommand exited with code {step.exit_code}".lstrip("\n")
            return Call("bash", {"command": step.command}, text, True, did)
        return Call("bash", {"command": step.command}, out or "(no output)", did=did)


class OpenHands(Writer):
    shape = "openhands"
    root = "/workspace/shop"
    parallel = False
    system = (
        "You are OpenHands agent, a helpful AI assistant that can interact with a computer to "
        "solve tasks. The repository is at /workspace/shop. Use task_tracker to plan."
    )
    tools: ClassVar[list[dict[str, Any]]] = [
        _tool("execute_bash", "Execute a bash command in the terminal.", command="string",
              is_input="string", timeout="number", security_risk="string"),
        _tool("str_replace_editor", "Custom editing tool for viewing, creating and editing "
              "files.", command="string", path="string", file_text="string", old_str="string",
              new_str="string", insert_line="integer", view_range="array",
              security_risk="string"),
        _tool("task_tracker", "Plan and track tasks.", command="string", task_list="array"),
        _tool("think", "Log a thought.", thought="string"),
    ]  # fmt: skip
    STATUS: ClassVar[dict[str, str]] = {
        "pending": "todo",
        "in_progress": "in_progress",
        "completed": "done",
    }

    def editor(self, step: Read | Write | Edit, **more: Any) -> dict[str, Any]:
        return {"path": self.path(step.path), **more, "security_risk": "LOW"}

    def call(self, step: Step) -> Call | None:
        if isinstance(step, Read):
            where = self.path(step.path)
            first, last = step.lines or (1, _lines(step.content))
            more: dict[str, Any] = {"command": "view"}
            if step.lines:
                more["view_range"] = [first, last]
            text = f"Here's the result of running `cat -n` on {where}:\n"
            text += _numbered(step.content, first, last, "{n:6}\t{line}")
            action = "read_part" if step.lines else "read"
            return Call("str_replace_editor", self.editor(step, **more), text,
                        did=[self.file(step, action)])  # fmt: skip
        if isinstance(step, Write) and step.new:
            tool_input = self.editor(step, command="create", file_text=step.content)
            text = f"File created successfully at: {self.path(step.path)}"
            return Call("str_replace_editor", tool_input, text, did=[self.file(step, "created")])
        if isinstance(step, Write):  # `create` refuses an existing file: a replacement instead
            step = Edit(step.path, step.old_content, step.content, True, step.content)
        if isinstance(step, Edit):
            where = self.path(step.path)
            tool_input = self.editor(
                step, command="str_replace", old_str=step.old, new_str=step.new
            )
            if not step.found:
                text = (
                    f"ERROR:\nNo replacement was performed, old_str `{step.old}` did not appear "
                    f"verbatim in {where}."
                )
                return Call("str_replace_editor", tool_input, text)
            at = step.content[: step.content.find(step.new)].count("\n") + 1
            snippet = _numbered(step.content, max(1, at - 4), at + step.new.count("\n") + 4,
                                "{n:6}\t{line}")  # fmt: skip
            text = (
                f"The file {where} has been edited. Here's the result of running `cat -n` on a "
                f"snippet of {where}:\n{snippet}\nReview the changes and make sure they are as "
                "expected. Edit the file again if necessary."
            )
            return Call("str_replace_editor", tool_input, text, did=[self.file(step, "edited")])
        if isinstance(step, Todo):
            tasks = [
                {"id": str(k + 1), "title": c, "status": self.STATUS[s], "notes": ""}
                for k, (c, s) in enumerate(step.items)
            ]
            text = (
                f"Task list has been updated with {len(tasks)} items. Stored in session "
                "directory: sessions/7f3a2c/TASKS.md"
            )
            return Call("task_tracker", {"command": "plan", "task_list": tasks}, text,
                        did=[Happened(0, "", "todo", todos=step.items)])  # fmt: skip
        if isinstance(step, Grep):
            return self.grep(step)
        if isinstance(step, Delete):
            return self.delete(step)
        if isinstance(step, Run):
            return self.shell(step)
        return None

    def shell(self, step: Run) -> Call:
        out, code = self.output(step.output), step.exit_code
        text = (
            f"{out}\n[The command completed with exit code {code}.]\n"
            f"[Current working directory: {self.root}]\n"
            "[Python interpreter: /openhands/poetry/openhands-ai-5O4_aCHf-py3.12/bin/python]\n"
            f"[Command finished with exit code {code}]"
        )
        tool_input = {"command": step.command, "is_input": "false", "security_risk": "LOW"}
        return Call("execute_bash", tool_input, text, did=[self.ran(step.command, code)])


class Codex(Writer):
    shape = "codex"
    system = (
        "You are Codex, a coding agent running in a terminal. The workspace is /home/dev/shop. "
        "Edit files with apply_patch; keep the plan current with update_plan."
    )
    tools: ClassVar[list[dict[str, Any]]] = [
        _tool("shell", "Runs a shell command (argv) and returns its output.", command="array",
              workdir="string", timeout_ms="number"),
        _tool("apply_patch", "Applies a patch in the apply_patch format.", input="string"),
        _tool("update_plan", "Updates the task plan.", plan="array", explanation="string"),
    ]  # fmt: skip

    def path(self, path: str) -> str:
        return path

    def argv(self, script: str) -> dict[str, Any]:
        return {"command": ["bash", "-lc", script], "workdir": self.root, "timeout_ms": 120_000}

    def patch(self, body: str, summary: str, did: list[Happened]) -> Call:
        text = f"Success. Updated the following files:\n{summary}"
        return Call(
            "apply_patch", {"input": f"*** Begin Patch\n{body}*** End Patch"}, text, did=did
        )

    def call(self, step: Step) -> Call | None:
        if isinstance(step, Read):
            if step.lines is None:
                script, text = f"cat {step.path}", step.content
            else:
                first, last = step.lines
                script = f"sed -n '{first},{last}p' {step.path}"
                text = _numbered(step.content, first, last, "{line}") + "\n"
            call = self.shell(Run(script, 0, text))
            call.did.append(self.file(step, "read_part" if step.lines else "read"))
            return call
        if isinstance(step, Write) and step.new:
            body = f"*** Add File: {step.path}\n" + "".join(
                f"+{line}\n" for line in step.content.rstrip("\n").split("\n")
            )
            return self.patch(body, f"A {step.path}", [self.file(step, "created")])
        if isinstance(step, Write):
            step = Edit(step.path, step.old_content, step.content, True, step.content)
        if isinstance(step, Edit):
            minus = "".join(f"-{line}\n" for line in step.old.split("\n"))
            plus = "".join(f"+{line}\n" for line in step.new.split("\n"))
            body = f"*** Update File: {step.path}\n@@\n{minus}{plus}"
            if not step.found:
                text = (
                    "apply_patch verification failed: Failed to find expected lines in "
                    f"{step.path}:\n{step.old}"
                )
                return Call("apply_patch", {"input": f"*** Begin Patch\n{body}*** End Patch"}, text)
            return self.patch(body, f"M {step.path}", [self.file(step, "edited")])
        if isinstance(step, Delete):
            return self.patch(f"*** Delete File: {step.path}\n", f"D {step.path}",
                              [self.file(step, "deleted")])  # fmt: skip
        if isinstance(step, Todo):
            plan = [{"step": c, "status": s} for c, s in step.items]
            tool_input = {"explanation": "Tracking the task.", "plan": plan}
            return Call("update_plan", tool_input, "Plan updated",
                        did=[Happened(0, "", "todo", todos=step.items)])  # fmt: skip
        if isinstance(step, Grep):
            return self.shell(Run(f"rg -n '{step.pattern}' {step.where}", 0, step.output))
        if isinstance(step, Run):
            return self.shell(step)
        return None

    def shell(self, step: Run) -> Call:
        seconds = round(self.rng.uniform(0.05, 9.0), 1)
        result = {
            "output": self.output(step.output),
            "metadata": {"exit_code": step.exit_code, "duration_seconds": seconds},
        }
        return Call("shell", self.argv(step.command), json.dumps(result),
                    did=[self.ran(step.command, step.exit_code)])  # fmt: skip


WRITERS: dict[Shape, type[Writer]] = {
    "claude_code": ClaudeCode,
    "pi": Pi,
    "openhands": OpenHands,
    "codex": Codex,
}


def _batches(writer: Writer, steps: list[Step]) -> Iterator[Ask | Say | list[Step]]:
    """Asks and replies as they are; tool steps in batches: a read (or search) followed by
    reads goes out as parallel calls in one message where the agent makes them."""
    batch: list[Step] = []
    for step in steps:
        if isinstance(step, Ask | Say):
            if batch:
                yield batch
                batch = []
            yield step
        elif batch and writer.parallel and isinstance(step, Read):
            if isinstance(batch[-1], Read | Grep):
                batch.append(step)
            else:
                yield batch
                batch = [step]
        else:
            if batch:
                yield batch
            batch = [step]
    if batch:
        yield batch


def _render(writer: Writer, steps: list[Step]) -> Iterator[tuple[str, Block | Happened]]:
    """The blocks in order, each with its role (and what each answered call did)."""
    count = 0
    for item in _batches(writer, steps):
        if isinstance(item, Ask):
            yield "user", {"type": "text", "text": item.text}
            continue
        if isinstance(item, Say):
            yield "assistant", {"type": "text", "text": item.text}
            continue
        calls = [(c, "") for c in map(writer.call, item) if c is not None]
        if not calls:
            continue
        if writer.rng.random() < 0.25:
            yield "assistant", {"type": "text", "text": f"Next: {calls[0][0].name}."}
        for n, (call, _) in enumerate(calls):
            count += 1
            use_id = f"toolu_{writer.shape[:2]}{writer.rng.randrange(16**6):06x}{count:04d}"
            calls[n] = (call, use_id)
            yield "assistant", {"type": "tool_use", "id": use_id, "name": call.name,
                                "input": call.input}  # fmt: skip
        for call, use_id in calls:
            result: Block = {"type": "tool_result", "tool_use_id": use_id, "content": call.result}
            if call.is_error:
                result["is_error"] = True
            yield "user", result
            for did in call.did:
                yield "user", Happened(0, use_id, did.kind, did.path, did.action, did.command,
                                       did.exit_code, did.todos)  # fmt: skip


def other_agent_session(shape: Shape, seed: int = 0, size: int = 240) -> AgentSession:
    """One session of ``shape`` (see the module's docstring)."""
    writer = WRITERS[shape](seed)
    messages: list[dict[str, Any]] = []
    record: list[Happened] = []
    requests: list[Request] = []
    for role, block in _render(writer, plan_session(seed, size)):
        if isinstance(block, Happened):
            record.append(Happened(len(messages) - 1, *_fields(block)[1:]))
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
        if role == "user" and block["type"] == "text":
            steering = len(messages[-1]["content"]) > 1
            index = len(messages) - 1
            requests.append(Request(block["text"], index, "steering" if steering else "typed"))
    paths = tuple(dict.fromkeys(h.path for h in record if h.kind == "path"))
    written = tuple(dict.fromkeys(
        h.path for h in record if h.kind == "path" and h.action in ("created", "overwritten", "edited")  # noqa: E501
    ))  # fmt: skip
    facts = Facts(paths, written, tuple(requests), (), (), (), (), 0, 0, (), ())
    transcript = Transcript(shape, seed, messages, writer.system, writer.tools, facts)
    return AgentSession(shape, transcript, tuple(record))


def _fields(happened: Happened) -> tuple[Any, ...]:
    return (happened.message_index, happened.tool_use_id, happened.kind, happened.path,
            happened.action, happened.command, happened.exit_code, happened.todos)  # fmt: skip


def _builder(shape: Shape) -> Callable[[int, int], AgentSession]:
    return lambda seed, size: other_agent_session(shape, seed, size)


OTHER_AGENTS: dict[Shape, Callable[[int, int], AgentSession]] = {
    shape: _builder(shape) for shape in WRITERS
}
"""Every shape's builder by name (all take ``(seed, size)``)."""
