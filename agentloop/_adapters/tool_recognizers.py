"""The facts of the tools people already run: Claude Code, pi, OpenHands, SWE-agent, Codex,
Gemini CLI, the official MCP filesystem and git servers, the coding agent's own
(``own_tool_facts``), and tools whose input keys and name say what they did.

:func:`default_tool_facts` is a fresh registry each call; a library user adds their own tools on
top (``default_tool_facts().register("deploy", ...)``). Recognizers look at input keys, not only
names: pi answers as ``Read``/``Bash`` with its own keys (``path``, ``oldText``), SWE-agent's
``edit`` has no path at all. A failed call (an error flag where the agent sets it honestly, the
agent's own failure wording elsewhere) did nothing: ``()``. A call whose meaning the recognizer
cannot tell is ``None`` ("declared no facts": counted, never guessed at).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from agentloop._adapters import shell_results as shapes
from agentloop._adapters.command_paths import command_paths
from agentloop._adapters.mcp_facts import mcp_filesystem, mcp_git, mcp_tool
from agentloop._adapters.own_tool_facts import OWN_TOOLS
from agentloop._adapters.patch_paths import BEGIN, patch_facts, patch_in_command
from agentloop._core.values.tool_facts import (
    FileAction,
    FileTouched,
    Recognizer,
    TodoState,
    ToolCall,
    ToolFact,
    ToolFacts,
)

__all__ = ["PATH_KEYS", "default_tool_facts"]

Facts = tuple[ToolFact, ...] | None

PATH_KEYS = ("file_path", "path", "filePath", "filename", "notebook_path", "absolute_path")
_PART_KEYS = ("offset", "limit", "start_line", "end_line", "view_range", "head", "tail", "pages")
_TRUNCATED = re.compile(
    r"\[(?:Showing lines \d+-\d+ of \d+|\d+ more lines in file)\b[^\]]*offset="  # pi
    r"|IMPORTANT: The file content has been truncated"  # Gemini CLI
    r"|\(Showing lines \d+-\d+ of \d+\. Use offset="  # opencode
)
_TASK_OUTPUT = re.compile(r"/tasks/[\w-]+\.output$")
_WINDOW = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]$", re.M)  # SWE-agent's window


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _first(data: Mapping[str, Any], keys: Sequence[str] = PATH_KEYS) -> str | None:
    """The first of ``keys`` whose value is a non-empty string."""
    return next((p for k in keys if (p := _text(data.get(k))) is not None), None)


def _partial(data: Mapping[str, Any]) -> bool:
    """Whether the input asks for a part (an offset of 0 and a range of 1 to -1 are whole)."""
    given = [k for k in _PART_KEYS if data.get(k) not in (None, False, 0, "", [])]
    return given != [] and not (given == ["view_range"] and data["view_range"] == [1, -1])


def _file(call: ToolCall, action: FileAction, keys: Sequence[str] = PATH_KEYS) -> Facts:
    path = _first(call.input, keys)
    if path is None:
        return None
    return () if call.is_error else (FileTouched(path, action),)


# -- Claude Code, pi (either casing), Gemini CLI, opencode: file tools by input keys ---------


def read(call: ToolCall) -> Facts:
    if _TASK_OUTPUT.search(_first(call.input) or ""):
        return ()  # Claude Code's background command read back: its output, not a project file
    partial = _partial(call.input) or _TRUNCATED.search(call.result[-600:]) is not None
    return _file(call, "read_part" if partial else "read")


def write(call: ToolCall) -> Facts:
    text = call.result
    if "File created successfully at" in text or "created and wrote to new file" in text:
        return _file(call, "created")
    if "has been updated" in text or "Successfully overwrote file" in text:
        return _file(call, "overwritten")
    return _file(call, "written")  # pi, MCP: no word on whether the file was new


def edit(call: ToolCall) -> Facts:
    if "Failed to edit" in call.result:  # Gemini CLI, whose error flag is not known to be set
        return () if _first(call.input) else None
    if call.result.startswith("Created new file:"):  # Gemini CLI's replace on a new path
        return _file(call, "created")
    if _first(call.input) is None:
        return swe_agent_edit(call)
    return _file(call, "edited")


def notebook_edit(call: ToolCall) -> Facts:
    return _file(call, "edited", ("notebook_path",))


def todos(call: ToolCall) -> Facts:
    return _todo_list(call, "todos", ("content", "description", "subject"))


def _todo_list(
    call: ToolCall, key: str, text_keys: Sequence[str], words: Mapping[str, str] | None = None
) -> Facts:
    """The whole list in ``key``; ``words``: the tool's statuses in the common words."""
    listed = call.input.get(key)
    if not isinstance(listed, list):
        return None
    if call.is_error:
        return ()
    words = words or {}
    items = tuple(
        (words.get(status := str(item.get("status", "pending")), status), text)
        for item in listed
        if isinstance(item, dict) and (text := _first(item, text_keys)) is not None
    )
    return (TodoState(items),)


def _command(call: ToolCall, key: str = "command") -> str | None:
    value = call.input.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return shlex.join(value) if value else None
    return _text(value)


def _ran(
    command: str,
    text: str,
    is_error: bool,
    known: tuple[shapes.Shape, ...],
    *,
    silent_zero: bool = False,
    base: str | None = None,
) -> Facts:
    """The command's fact, and the files it read, deleted or moved when it ended well."""
    ran = shapes.command_ran(command, text, is_error, known, silent_zero=silent_zero)
    return (ran, *(command_paths(command, base) if ran.succeeded else ()))


def claude_bash(call: ToolCall) -> Facts:
    command = _command(call)
    if command is None:
        return None
    return _ran(command, call.result, call.is_error, shapes.CLAUDE_CODE, silent_zero=True)


def bash(call: ToolCall) -> Facts:
    """pi's ``bash`` (a code only when not 0, an honest error flag), SWE-agent's (no code at
    all), mini-swe-agent's (``<returncode>``): with no code shown, ``ok`` or ``error``."""
    command = _command(call)
    if command is None:
        return None
    return _ran(command, call.result, call.is_error, shapes.PI_SWE)


def gemini_shell(call: ToolCall) -> Facts:
    command = _command(call)
    if command is None:
        return None
    text = shapes.gemini_output(call.result)
    base = _first(call.input, ("dir_path", "directory"))
    return _ran(command, text, call.is_error, shapes.GEMINI, silent_zero=True, base=base)


def gemini_files(call: ToolCall) -> Facts:
    """Gemini CLI's ``read_file`` and ``write_file`` (``file_path``; ``absolute_path`` before
    2025-11), the coding agent's own names with other keys: the agent's (``path``) stay its."""
    if _first(call.input, ("file_path", "absolute_path")) is None:
        return None
    if call.name == "read_file":
        return read(call)
    if call.name == "write_file":
        if call.result.startswith(("Error", "Failed")):
            return ()
        return write(call)
    return None


def _own_or_gemini(own: Recognizer) -> Recognizer:
    return lambda call: gemini_files(call) if "path" not in call.input else own(call)


# -- SWE-agent's windowed tools ----------------------------------------------------------


def swe_open(call: ToolCall) -> Facts:
    if re.match(r"\s*(?:Error\b|File .+ not found)", call.result):
        return () if _first(call.input, ("path",)) else None
    partial = re.search(r"^\(\d+ more lines (?:above|below)\)$", call.result, re.M)
    return _file(call, "read_part" if partial else "read", ("path",))


def swe_create(call: ToolCall) -> Facts:
    if call.result.lstrip().startswith("Error"):
        return () if _first(call.input, ("filename", "path")) else None
    return _file(call, "created", ("filename", "path"))


def swe_window(call: ToolCall) -> Facts:
    """``goto``/``scroll_up``/``scroll_down``: a part of the open file, named by the window."""
    match = _WINDOW.search(call.result)
    return None if match is None else (FileTouched(match[1], "read_part"),)


def swe_agent_edit(call: ToolCall) -> Facts:
    """SWE-agent's ``edit``/``insert`` change the open file, which their input does not name:
    the window printed after the edit does. A lint failure means the edit was not applied."""
    text = call.result
    if (
        call.is_error
        or text.lstrip().startswith("Error")
        or "Your proposed edit has introduced new syntax error" in text
        or "No replacement was performed" in text
    ):
        return ()
    match = _WINDOW.search(text)
    return None if match is None else (FileTouched(match[1], "edited"),)


def searched(*keys: str) -> Recognizer:
    """A search or a listing: known, nothing to keep (its matches were not read)."""
    return lambda call: () if any(k in call.input for k in keys) else None


# -- OpenHands (and SWE-agent's edit_anthropic bundle) -----------------------------------

_EDITOR_ACTIONS: dict[str, FileAction] = {
    "create": "created",
    "str_replace": "edited",
    "insert": "edited",
    "undo_edit": "edited",
}


def str_replace_editor(call: ToolCall) -> Facts:
    command, text = call.input.get("command"), call.result
    if command not in ("view", *_EDITOR_ACTIONS) or _first(call.input, ("path",)) is None:
        return None
    if (
        call.is_error
        or text.lstrip().startswith("ERROR:")
        or "[Error occurred in processing last action]" in text
        or "[Last action has been rejected by the user]" in text
    ):
        return ()
    if command == "view":
        if "files and directories up to" in text[:300]:
            return ()  # a directory listing
        return _file(call, "read_part" if _partial(call.input) else "read", ("path",))
    return _file(call, _EDITOR_ACTIONS[str(command)], ("path",))


def execute_bash(call: ToolCall) -> Facts:
    command = _command(call)
    keys = str(call.input.get("is_input", "false")).lower() == "true"
    if command is None or keys or command in ("C-c", "C-d", "C-z"):
        return ()  # a poll of a running command, or keys sent to it: no new command
    return _ran(command, call.result, call.is_error, shapes.OPENHANDS)


_OPENHANDS_STATUS = {"todo": "pending", "done": "completed"}


def task_tracker(call: ToolCall) -> Facts:
    """OpenHands' plan (``todo``/``in_progress``/``done``, told in the common words)."""
    if call.input.get("command") == "view":
        return ()
    return _todo_list(call, "task_list", ("title", "notes"), _OPENHANDS_STATUS)


# -- Codex ---------------------------------------------------------------------------------


def _script(argv: list[str]) -> str:
    shells = ("bash", "sh", "zsh")
    if len(argv) >= 3 and posixpath.basename(argv[0]) in shells and argv[-2] in ("-lc", "-c"):
        return argv[-1]
    return shlex.join(argv)


def _patch_applied(call: ToolCall) -> bool:
    text = call.result
    if call.is_error or "verification failed" in text or "Invalid patch" in text:
        return False
    code = shapes.codex(text, False)
    return code is None or code[0] in ("exit 0", "ok")


def _patch(call: ToolCall, patch: str, base: str | None) -> Facts:
    return patch_facts(patch, base) if _patch_applied(call) else ()


def codex_shell(call: ToolCall) -> Facts:
    """``shell`` (argv, usually ``["bash", "-lc", script]``), ``shell_command``,
    ``exec_command`` (``cmd``); a shell call that runs ``apply_patch`` is the patch's files."""
    value = call.input.get("command", call.input.get("cmd"))
    workdir = _text(call.input.get("workdir"))
    argv = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    if argv[:1] == ["apply_patch"] and len(argv) == 2:
        return _patch(call, argv[1], workdir)
    script = _script(argv) if argv else _text(value)
    if script is None:
        return None
    if (found := patch_in_command(script)) is not None:
        patch, where = found
        base = posixpath.join(workdir, where) if workdir and where else (where or workdir)
        return _patch(call, patch, base)
    return _ran(script, call.result, call.is_error, shapes.CODEX, base=workdir)


def apply_patch(call: ToolCall) -> Facts:
    """Codex's ``apply_patch`` (``{input}`` or the raw patch), opencode's (``{patchText}``)."""
    texts = [v for v in call.input.values() if isinstance(v, str) and BEGIN in v]
    return None if not texts else _patch(call, texts[0], None)


def update_plan(call: ToolCall) -> Facts:
    return _todo_list(call, "plan", ("step",))


# -- any tool whose name says what it did, with the common input keys ---------------------

_VERBS: dict[str, FileAction | None] = {
    **dict.fromkeys(("read", "view", "open", "cat"), "read"),
    **dict.fromkeys(("write", "create", "save"), "written"),
    **dict.fromkeys(("edit", "replace", "patch", "update", "modify", "insert"), "edited"),
    **dict.fromkeys(("delete", "remove", "rm", "unlink"), "deleted"),
    **dict.fromkeys(("bash", "shell", "run", "exec", "execute", "terminal", "command"), None),
}
_COMMON_PATHS = ("path", "file_path", "filename", "notebook_path")
_DIRECTORY = frozenset(("directory", "dir", "folder", "mkdir"))


def _words(name: str) -> list[str]:
    tool = mcp_tool(name) or name
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", tool)]


def by_common_keys(call: ToolCall) -> Facts:
    """A tool no recognizer claims, when its name has a verb that says what it did and its
    input has the key that says what it did it to; else ``None``."""
    words = _words(call.name)
    verb = next((w for w in words if w in _VERBS), None)
    if (
        verb is None
        or {"owner", "repo"} <= call.input.keys()  # a file of a remote repository
        or not _DIRECTORY.isdisjoint(words)  # a directory is no file
    ):
        return None
    action = _VERBS[verb]
    if action is None:
        command = _command(call) or _command(call, "cmd")
        if command is None:
            return None
        return _ran(command, call.result, call.is_error, shapes.ALL_SHAPES)
    if action == "read" and _partial(call.input):
        action = "read_part"
    return _file(call, action, _COMMON_PATHS)


def default_tool_facts() -> ToolFacts:
    """A fresh registry of the recognizers that ship with agentloop (see the module's doc)."""
    facts = ToolFacts(
        {
            # Claude Code, and pi logged in with an Anthropic token (its keys, these names)
            "Read": read,
            "Write": write,
            "Edit": edit,
            "MultiEdit": edit,
            "NotebookEdit": notebook_edit,
            "Bash": claude_bash,
            "TodoWrite": todos,
            "Glob": searched("pattern"),
            "Grep": searched("pattern"),
            "LS": searched("path"),
            # pi, opencode (filePath), SWE-agent and mini-swe-agent (bash, edit, insert)
            "read": read,
            "write": write,
            "edit": edit,
            "insert": swe_agent_edit,
            "bash": bash,
            "grep": searched("pattern"),
            "find": searched("pattern"),
            "ls": searched("path"),
            "todowrite": todos,
            # SWE-agent
            "open": swe_open,
            "create": swe_create,
            "goto": swe_window,
            "scroll_up": swe_window,
            "scroll_down": swe_window,
            "find_file": searched("file_name"),
            "search_dir": searched("search_term"),
            "search_file": searched("search_term"),
            # OpenHands (and SWE-agent's str_replace_editor)
            "str_replace_editor": str_replace_editor,
            "execute_bash": execute_bash,
            "task_tracker": task_tracker,
            # Codex
            "shell": codex_shell,
            "shell_command": codex_shell,
            "exec_command": codex_shell,
            "write_stdin": lambda call: (),
            "apply_patch": apply_patch,
            "update_plan": update_plan,
            # Gemini CLI (read_file, write_file: the coding agent's names, below)
            "replace": edit,
            "run_shell_command": gemini_shell,
            "write_todos": todos,
            # the coding agent's own, over any other agent's of the same name
            **OWN_TOOLS,
            "read_file": _own_or_gemini(OWN_TOOLS["read_file"]),
            "write_file": _own_or_gemini(OWN_TOOLS["write_file"]),
        }
    )
    # A fallback is asked before those registered earlier: the most general goes first.
    facts.register_fallback(by_common_keys)
    facts.register_fallback(mcp_git)
    facts.register_fallback(mcp_filesystem)
    return facts
