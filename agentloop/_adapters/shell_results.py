"""How a command ended, read from the result shapes other agents' shell tools print.

Each agent reports an exit code its own way, and some not at all:

- Claude Code ``Bash``: a failed command's result is an error whose text starts ``Exit code N``
  (``Error: Exit code N`` in some versions); a command that exited 0 prints no code.
- pi ``bash``: a failed command's result is an error ending ``Command exited with code N``;
  ``Command timed out after N seconds``; ``Command aborted``; exit 0 prints no code.
- OpenHands ``execute_bash``: ``[The command completed with exit code N.]`` and ``[Command
  finished with exit code N]``; ``-1`` means the command is still running or timed out.
- SWE-agent ``bash``: no exit code at all; ``The command '…' was cancelled because it took more
  than N seconds``; ``Your bash command contained syntax errors and was NOT executed``.
- mini-swe-agent: ``<returncode>N</returncode>`` then ``<output>…</output>``, or JSON
  ``{"returncode": N, "output": …}``.
- Codex: JSON ``{"output": …, "metadata": {"exit_code": N}}`` (``shell``), ``Exit code: N`` then
  ``Output:`` (``shell_command``), ``Process exited with code N`` or ``Process running with
  session ID N`` (``exec_command``), ``command timed out after N milliseconds``; its results
  never carry an error flag.
- Gemini CLI ``run_shell_command``: ``Exit Code: N`` (newer versions: only when not 0),
  ``Signal: S``, ``Command was cancelled by user``, ``… automatically cancelled because it
  exceeded the timeout``.

Structured fields win over prose; an error flag counts only where the agent sets it honestly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from agentloop._adapters.command_output import error_lines, tests_reported
from agentloop._core.values.tool_facts import CommandRan, exited

__all__ = [
    "ALL_SHAPES",
    "CLAUDE_CODE",
    "CODEX",
    "GEMINI",
    "OPENHANDS",
    "PI_SWE",
    "Shape",
    "command_ran",
    "gemini_output",
]

Shape = Callable[[str, bool], tuple[str, str] | None]
"""A result shape: ``(text, is_error)`` → ``(outcome, the command's own output)`` or ``None``."""

RUNNING = "running"


def _json(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _code(value: object) -> str | None:
    return exited(value) if isinstance(value, int) and not isinstance(value, bool) else None


def claude_code(text: str, is_error: bool) -> tuple[str, str] | None:
    match = re.match(r"(?:Error: )?Exit code (-?\d+)\b[^\n]*\n?", text)
    if is_error and match is not None:
        return exited(int(match[1])), text[match.end() :]
    last = re.search(r"\n(?:Error: )?Exit code (-?\d+)\s*$", text)  # seen last, too
    if is_error and last is not None:
        return exited(int(last[1])), text[: last.start()]
    if text.startswith("Command running in background with ID:"):
        return RUNNING, ""
    if text.strip() == "(Bash completed with no output)":
        return exited(0), ""
    if is_error and ("<tool_use_error>" in text or "doesn't want to proceed" in text):
        return "not run", ""  # refused before it ran: a bad input, the user said no
    return None


def pi(text: str, is_error: bool) -> tuple[str, str] | None:
    if (match := re.search(r"\n?Command exited with code (-?\d+)\s*$", text)) is not None:
        return exited(int(match[1])), text[: match.start()]
    last = text.rstrip().rpartition("\n")[2].strip()  # pi's (and opencode's) note ends it
    if re.match(r"\(?Command timed out after \d", last):
        return "timed out", text
    if re.fullmatch(r"\(?Command (?:was )?aborted\.?\)?", last):
        return "killed by user", text
    return None


def mini_swe_agent(text: str, is_error: bool) -> tuple[str, str] | None:
    if (match := re.match(r"\s*<returncode>(-?\d+)</returncode>", text)) is not None:
        inner = re.search(r"<output>\n?(.*?)</output>", text, re.S)
        return exited(int(match[1])), inner[1] if inner else text[match.end() :]
    value = _json(text)
    if value is not None and (outcome := _code(value.get("returncode"))) is not None:
        parts = (value.get(k) for k in ("output", "output_head", "output_tail"))
        return outcome, "\n".join(p for p in parts if isinstance(p, str))
    return None


def swe_agent(text: str, is_error: bool) -> tuple[str, str] | None:
    if re.search(r"was cancelled because it took more than \d+ seconds", text):
        return "timed out", text
    if "contained syntax errors and was NOT executed" in text:
        return "not run", ""
    return None


def codex(text: str, is_error: bool) -> tuple[str, str] | None:
    value = _json(text)
    if value is not None and isinstance(meta := value.get("metadata"), dict):
        output = value.get("output")
        output = output if isinstance(output, str) else ""
        if (outcome := _code(meta.get("exit_code"))) is not None:
            timed_out = output.lower().startswith("command timed out after")
            return ("timed out" if timed_out else outcome), output
    if re.match(r"command timed out after \d+ ?(?:milliseconds|ms)", text, re.I):
        return "timed out", text
    if (match := re.match(r"Exit code: (-?\d+)\s*$", text, re.M)) is not None:
        output = text.split("\nOutput:\n", 1)
        return exited(int(match[1])), output[1] if len(output) == 2 else text
    head, _, output = text.partition("\nOutput:\n")
    if (match := re.search(r"^Process exited with code (-?\d+)\s*$", head, re.M)) is not None:
        return exited(int(match[1])), output or text
    if re.search(r"^Process running with session ID \S+", head, re.M):
        return RUNNING, output or text
    return None


def openhands(text: str, is_error: bool) -> tuple[str, str] | None:
    found = re.findall(
        r"\[(?:The command completed|Command finished) with exit code (-?\d+)\b", text
    )
    if found:
        code = int(found[-1])
        if code == -1:
            return ("timed out" if "timed out after" in text else RUNNING), text
        return exited(code), text
    if "[The command has no new output after" in text:
        return RUNNING, text
    if re.search(r"\[The command timed out after \d+", text):
        return "timed out", text
    if "[Last action has been rejected by the user]" in text:
        return "not run", ""
    if "[Error occurred in processing last action]" in text:
        return "error", text
    return None


def gemini_output(text: str) -> str:
    """Gemini CLI's result without its frame (``<untrusted_context>``, the ``Output:`` label),
    so a runner's lines start their lines again."""
    text = re.sub(r"</?untrusted_context>\n?", "", text)
    return re.sub(r"^(?:Command: .*\n)?(?:Directory: .*\n)?Output: ", "", text, count=1)


def gemini(text: str, is_error: bool) -> tuple[str, str] | None:
    if (match := re.search(r"^Exit Code: (-?\d+)\s*$", text, re.M)) is not None:
        return exited(int(match[1])), text
    if (match := re.search(r"^Signal: (?!\(none\))(\S+)\s*$", text, re.M)) is not None:
        return f"killed by {match[1]}", text
    if "exceeded the timeout" in text and "automatically cancelled" in text:
        return "timed out", text
    if "Command was cancelled by user" in text:
        return "killed by user", text
    if text.startswith("Command moved to background"):
        return RUNNING, text
    if re.search(r"^Error: (?!\(none\))\S", text, re.M):
        return "error", text
    return None


CLAUDE_CODE: tuple[Shape, ...] = (claude_code, pi)  # pi also answers as ``Bash``
PI_SWE: tuple[Shape, ...] = (mini_swe_agent, pi, claude_code, swe_agent)
OPENHANDS: tuple[Shape, ...] = (openhands,)
CODEX: tuple[Shape, ...] = (codex,)
GEMINI: tuple[Shape, ...] = (gemini,)
ALL_SHAPES: tuple[Shape, ...] = (mini_swe_agent, codex, openhands, claude_code, pi, swe_agent)

_SAYS_ERROR = re.compile(
    r"^(?:\S+: (?:line \d+: )?\S+: command not found"
    r"|\S+: .*: No such file or directory"
    r"|Traceback \(most recent call last\):)$",
    re.M,
)


def command_ran(
    command: str,
    text: str,
    is_error: bool,
    shapes: tuple[Shape, ...],
    *,
    silent_zero: bool = False,
) -> CommandRan:
    """The fact of ``command`` whose result is ``text``: its outcome read by the first of
    ``shapes`` that knows the text; else ``error`` when the result is flagged an error,
    ``exit 0`` when the tool prints no code for 0 (``silent_zero``) and ``ok`` otherwise, or
    ``error`` when the output itself says a command failed (not found, a traceback, a failing
    test)."""
    for shape in shapes:
        if (found := shape(text, is_error)) is not None:
            outcome, output = found
            break
    else:
        output = text
        if is_error:
            outcome = "error"
        elif silent_zero:
            outcome = exited(0)
        else:
            outcome = (
                "error"
                if _SAYS_ERROR.search(text) or tests_reported(text, succeeded=False)
                else "ok"
            )
    succeeded = outcome in ("ok", exited(0))
    return CommandRan(
        command, outcome, error_lines(output), tests_reported(output, succeeded=succeeded)
    )
