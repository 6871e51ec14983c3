"""Searches with a time limit: grep and list_files are stopped when their time is up, or at once
on Ctrl-C, and the agent goes on.

A regular expression can backtrack for ever on one line (``(a+)+$``), and while it does it holds
Python's lock: no other thread of the process runs. What still runs is a signal handler of the
main thread (the regular expression engine checks for signals). So a search in the main thread
(the command line's) runs under a timer whose handler stops it (:func:`run_limited`); Ctrl-C
stops it the same way. Anywhere else (a worker thread, an event loop's executor) it runs in a
fresh interpreter instead (:func:`serve`, ``python -m agentloop._agent.search_child``) on the same
workspace, with the same confinement: the request goes in on stdin as JSON, the result comes
back on stdout; the child stops itself when its time is up or its parent is gone, and the
parent kills it if it does not answer in time, or when the parent is interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from agentloop._core.values.tool import ToolResult

__all__ = ["SEARCH_MAX_TIMEOUT", "SEARCH_TIMEOUT", "run_limited", "serve"]

SEARCH_TIMEOUT = 30.0
"""Seconds a search may run by default before it is stopped."""
SEARCH_MAX_TIMEOUT = 600.0
_GRACE = 5.0
"""How long past its own limit the parent waits before it kills the child."""
_TICK = 0.5
CHILD = "agentloop._agent.search_child"
"""The module a child runs (it calls :func:`serve` with the search tools)."""
_TIMED_OUT = "timed_out"


def time_limit(tool_input: Mapping[str, Any]) -> float:
    """The ``timeout`` a search was given, checked (:class:`ValueError` says what is wrong)."""
    value = tool_input.get("timeout")
    if value is None:
        return SEARCH_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"parameter 'timeout' must be a number of seconds, got {value!r}")
    if not 0 < value <= SEARCH_MAX_TIMEOUT:
        raise ValueError(
            f"parameter 'timeout' must be more than 0 and at most {SEARCH_MAX_TIMEOUT:g} "
            f"seconds, got {value:g}"
        )
    return float(value)


def run_limited(
    tool: str,
    root: Path,
    tool_input: Mapping[str, Any],
    timeout: float,
    search: Callable[[], ToolResult],
) -> ToolResult:
    """``search()`` — the search ``tool`` (``grep`` or ``list_files``) with ``tool_input`` on
    the workspace ``root`` — stopped after ``timeout`` seconds: here under a timer in the main
    thread, else in a child process (here, without a limit, when no child can be started)."""
    if _timer_is_free():
        return _under_timer(tool, timeout, search)
    result = _in_child(tool, root, tool_input, timeout)
    return search() if result is None else result


def _timer_is_free() -> bool:
    """Whether this is the main thread and nobody else uses its interval timer."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not hasattr(signal, "setitimer"):
        return False
    handler = signal.getsignal(signal.SIGALRM)
    return handler in (signal.SIG_DFL, signal.SIG_IGN, None) and not any(
        signal.getitimer(signal.ITIMER_REAL)
    )


def _under_timer(tool: str, timeout: float, search: Callable[[], ToolResult]) -> ToolResult:
    previous = signal.getsignal(signal.SIGALRM)
    armed = [True]

    def expire(signum: int, frame: FrameType | None) -> None:
        if armed[0]:
            raise _TimeUp

    def disarm() -> None:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)

    try:
        try:
            signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            return search()
        finally:
            disarm()
    except _TimeUp:  # (also when it came as the timer was being disarmed)
        disarm()
        return _stopped(tool, timeout)


def _in_child(
    tool: str, root: Path, tool_input: Mapping[str, Any], timeout: float
) -> ToolResult | None:
    """The search in a child process; None when no child can be started."""
    from agentloop._agent.secrets import scrubbed_environment, secret_values

    request = {
        "tool": tool,
        "root": str(root),
        "input": dict(tool_input),
        "timeout": timeout,
        "parent": os.getpid(),
        # Through the pipe, never the child's environment: what its excerpts must redact.
        "secrets": dict(secret_values()),
    }
    home = str(Path(__file__).resolve().parents[2])  # where this agentloop is imported from
    env = scrubbed_environment()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError:
        return None
    try:
        out, err = child.communicate(json.dumps(request).encode(), timeout=timeout + _GRACE)
    except subprocess.TimeoutExpired:
        return _stopped(tool, timeout)
    finally:  # on time, on Ctrl-C, on anything: the child does not outlive the call
        if child.poll() is None:
            child.kill()
            child.wait()
    try:
        answer = json.loads(out)
    except ValueError:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no answer"]
        return ToolResult(f"{tool} failed: {last[0]}", is_error=True)
    if answer.get(_TIMED_OUT):
        return _stopped(tool, timeout)
    return ToolResult(str(answer["content"]), is_error=bool(answer["is_error"]))


def _stopped(tool: str, timeout: float) -> ToolResult:
    return ToolResult(
        f"{tool} stopped after {timeout:g} s (its time limit): a regular expression that "
        "backtracks a lot, or a very large tree? Try a simpler pattern or a narrower path or "
        "glob, or give a longer timeout",
        is_error=True,
    )


class _TimeUp(BaseException):
    """The search's time is up (not an ``Exception``: no tool's error handling catches it)."""


Search = Callable[[str, str, dict[str, Any]], ToolResult]
"""The child's search: ``(tool, workspace root, tool input)`` to its result."""


def serve(search: Search) -> None:
    """The child: read the request, run ``search`` on it, write the result (see the module's
    docstring); ``python -m agentloop._agent.search_child`` calls it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's: it kills us
    request = json.loads(sys.stdin.buffer.read())
    os.environ.update(request.get("secrets", {}))  # known to redact(), not in /proc/<pid>/environ
    left = [float(request["timeout"])]
    parent = int(request["parent"])

    def tick(signum: int, frame: FrameType | None) -> None:
        left[0] -= _TICK
        if left[0] <= 0 or os.getppid() != parent:
            raise _TimeUp

    signal.signal(signal.SIGALRM, tick)
    signal.setitimer(signal.ITIMER_REAL, _TICK, _TICK)
    try:
        result = search(str(request["tool"]), str(request["root"]), request["input"])
    except _TimeUp:
        answer: dict[str, Any] = {_TIMED_OUT: True}
    else:
        answer = {"content": result.content, "is_error": result.is_error}
    signal.setitimer(signal.ITIMER_REAL, 0)
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
