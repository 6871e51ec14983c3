"""The shell tool: run_command in the workspace with the user's consent, output capped to its
head and tail, and a timeout that kills the command's whole process group.

Commands run without the credentials in the environment (:mod:`.secrets`), and none of their
processes outlives the agent (:mod:`.reaper`).

Consent is a policy, an :data:`Approve` callable; the prompt on the terminal belongs to the
command line (``agentloop._cli.consent``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from agentloop._adapters.own_tool_facts import run_command_facts
from agentloop._agent.base import CodingTool, InputError, required_str
from agentloop._agent.reaper import GroupWatch
from agentloop._agent.secrets import REDACT_MARGIN, redact, scrubbed_environment
from agentloop._agent.workspace import Workspace
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall, ToolFact

__all__ = ["Approve", "RunCommandTool", "always_allow", "never_allow"]

Approve: TypeAlias = Callable[[str], bool]
"""A consent policy: given the command line, whether it may run. A policy may carry a
``decline_message`` (with a ``{command}`` field) that the tool returns when it refuses."""

COMMAND_MAX_OUTPUT_BYTES = 30_000
COMMAND_DEFAULT_TIMEOUT = 120.0
COMMAND_MAX_TIMEOUT = 600.0
# Once the command itself has exited, how long to keep reading output that background jobs
# (e.g. `server &`) may still hold open before returning.
_EXIT_GRACE_SECONDS = 1.0


# --------------------------------------------------------------------------------------------
# Consent policies


def always_allow(command: str) -> bool:
    """Consent policy that allows every command (``--yes``)."""
    return True


class _NeverAllow:
    """Consent policy for when nobody can be asked (stdin is not a terminal, no ``--yes``)."""

    decline_message = (
        "not run: shell commands need the user's consent, and nobody can be asked here (no "
        "terminal). The user can allow commands by running agentloop with --yes or in a "
        "terminal. Command: {command}"
    )

    def __call__(self, command: str) -> bool:
        return False


never_allow: Approve = _NeverAllow()
"""Consent policy that refuses every command, telling the model it needs ``--yes`` or a terminal."""


# --------------------------------------------------------------------------------------------
# run_command


_RUN_DESCRIPTION = (
    "Run a shell command with bash in the workspace root (no stdin; the user may be asked to "
    "approve it). Returns stdout and stderr combined, truncated in the middle if long, and the "
    f"exit code. Timeout in seconds: default {COMMAND_DEFAULT_TIMEOUT:g}, max "
    f"{COMMAND_MAX_TIMEOUT:g}; on timeout the command and its children are killed."
)
_RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": COMMAND_MAX_TIMEOUT,
            "description": f"Seconds before the command is killed (default "
            f"{COMMAND_DEFAULT_TIMEOUT:g}).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class _HeadTail:
    """Keeps the first and last ``limit // 2`` bytes of a stream of any length — and
    ``REDACT_MARGIN`` bytes more on each side, so that a secret the cut goes through is still
    seen whole, and redacted, before the cut is made (:meth:`text`)."""

    def __init__(self, limit: int) -> None:
        self._half = max(1, limit // 2)
        self._keep = self._half + REDACT_MARGIN
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._keep - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > self._keep:
                del self._tail[: len(self._tail) - self._keep]

    def text(self) -> str:
        head, tail = bytes(self._head), bytes(self._tail)
        if self.total <= 2 * self._half:
            return redact((head + tail).decode("utf-8", errors="replace"))
        if len(head) + len(tail) >= self.total:  # all of it is here: cut it as a stream
            whole = head + tail
            head, tail = whole[: self._keep], whole[-self._keep :]
        # Redacted first, then cut: a secret across the cut is replaced, never half shown.
        shown_head = redact(head.decode("utf-8", errors="replace"))[: self._half]
        shown_tail = redact(tail.decode("utf-8", errors="replace"))[-self._half :]
        omitted = self.total - 2 * self._half
        return f"{shown_head}\n… [{omitted:,} bytes of output omitted] …\n{shown_tail}"


class RunCommandTool(CodingTool):
    def __init__(
        self,
        workspace: Workspace,
        approve: Approve,
        *,
        max_output_bytes: int = COMMAND_MAX_OUTPUT_BYTES,
    ) -> None:
        super().__init__("run_command", _RUN_DESCRIPTION, _RUN_SCHEMA)
        self._workspace = workspace
        self._approve = approve
        self._max_output_bytes = max_output_bytes

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...]:
        return run_command_facts(call)

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        command = required_str(tool_input, "command")
        timeout = tool_input.get("timeout")
        if timeout is None:
            timeout = COMMAND_DEFAULT_TIMEOUT
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise InputError(f"parameter 'timeout' must be a number of seconds, got {timeout!r}")
        if not 0 < timeout <= COMMAND_MAX_TIMEOUT:
            raise InputError(
                f"parameter 'timeout' must be more than 0 and at most {COMMAND_MAX_TIMEOUT:g} "
                f"seconds, got {timeout:g}"
            )
        try:
            approved = self._approve(command)
        except Exception as error:
            return ToolResult(
                f"not run: could not ask the user for consent ({error}). Command: {command}",
                is_error=True,
            )
        if not approved:
            message = getattr(self._approve, "decline_message", None)
            if isinstance(message, str):
                return ToolResult(message.format(command=command), is_error=True)
            return ToolResult(f"the user declined to run: {command}", is_error=True)
        return self._execute(command, float(timeout))

    def _execute(self, command: str, timeout: float) -> ToolResult:
        shell = shutil.which("bash") or "/bin/sh"
        # Credentials stay out of commands; pagers and prompts would wait forever for a
        # terminal that is not there.
        env = {
            **scrubbed_environment(),
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "GIT_TERMINAL_PROMPT": "0",
        }
        watch = GroupWatch()
        args = [shell, "-c", command]
        pass_fds: tuple[int, ...] = ()
        told = watch.fd is not None and os.path.basename(shell) == "bash"
        if told and watch.fd is not None:
            # The command's shell tells the watchdog its group id, closes the pipe and only
            # then runs the command: killed at any moment after this, the agent leaves no
            # command unwatched (telling it from here would leave a gap after Popen returns).
            fd = watch.fd
            args = [shell, "-c", f'echo $$ >&{fd}; exec {fd}>&-; exec "$0" -c "$1"', shell, command]
            pass_fds = (fd,)
        try:
            process = subprocess.Popen(
                args,
                cwd=self._workspace.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so all of it can be killed
                env=env,
                pass_fds=pass_fds,
            )
        except BaseException:
            watch.finish()
            raise
        if told:
            watch.watched(process.pid)
        else:
            watch.watch(process.pid)
        try:
            return self._collect(process, timeout)
        finally:
            watch.finish()

    def _collect(self, process: subprocess.Popen[bytes], timeout: float) -> ToolResult:
        assert process.stdout is not None
        output = _HeadTail(self._max_output_bytes)
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout
        exit_seen: float | None = None
        timed_out = False
        abandoned = False
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                while True:
                    now = time.monotonic()
                    if now >= deadline:
                        timed_out = process.poll() is None
                        abandoned = not timed_out
                        break
                    if exit_seen is None and process.poll() is not None:
                        exit_seen = now
                    if exit_seen is not None and now - exit_seen >= _EXIT_GRACE_SECONDS:
                        abandoned = True  # background jobs still hold the output open
                        break
                    wait = min(deadline - now, 0.2)
                    if selector.select(wait):
                        chunk = os.read(fd, 65_536)
                        if not chunk:
                            break
                        output.add(chunk)
            if not timed_out:
                try:
                    process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
            if timed_out:
                _kill_group(process)
                _drain(fd, output)
        finally:
            if process.poll() is None:
                _kill_group(process)
            process.stdout.close()

        body = output.text().rstrip("\n") or "(no output)"
        if timed_out:
            return ToolResult(
                f"{body}\n[timed out after {timeout:g} s: the command and its process group were "
                "killed]",
                is_error=True,
            )
        code = process.returncode
        note = (
            "\n[stopped reading output after the command exited: background processes still "
            "hold it open]"
            if abandoned
            else ""
        )
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return ToolResult(f"{body}{note}\n[killed by {name}]", is_error=True)
        return ToolResult(f"{body}{note}\n[exit code {code}]", is_error=code != 0)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _drain(fd: int, output: _HeadTail) -> None:
    """Collect what the killed command left in the pipe, without waiting on escaped children."""
    deadline = time.monotonic() + 0.5
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and selector.select(0.05):
            chunk = os.read(fd, 65_536)
            if not chunk:
                return
            output.add(chunk)
