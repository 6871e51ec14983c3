"""The shell tool: run_command output, truncation, timeouts, and the consent policies."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from support.agent_tools import make_tools, run

from agentloop import ToolResult
from agentloop._agent.shell import always_allow, never_allow
from agentloop._agent.tools import run_command_tool
from agentloop._agent.workspace import Workspace

# --------------------------------------------------------------------------------- run_command


def _process_gone(pid: int, wait: float = 5.0) -> bool:
    """Whether ``pid`` has exited (a zombie counts: it no longer runs)."""
    give_up = time.monotonic() + wait
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() > give_up:
            return False
        time.sleep(0.05)


def test_run_command_output_exit_code_and_cwd(ws: Path) -> None:
    tools = make_tools(ws)
    ok = run(tools, "run_command", command="pwd; echo to-stderr >&2")
    assert ok == ToolResult(f"{ws.resolve()}\nto-stderr\n[exit code 0]")
    failed = run(tools, "run_command", command="echo partial; exit 3")
    assert failed == ToolResult("partial\n[exit code 3]", is_error=True)
    quiet = run(tools, "run_command", command="true")
    assert quiet.content == "(no output)\n[exit code 0]"


def test_run_command_truncates_keeping_head_and_tail(ws: Path) -> None:
    tool = run_command_tool(Workspace(ws), always_allow, max_output_bytes=1000)
    result = tool.run({"command": "echo START; seq 1 20000; echo END"})
    assert not result.is_error
    assert result.content.startswith("START\n1\n2\n")
    assert result.content.endswith("20000\nEND\n[exit code 0]")
    assert "bytes of output omitted" in result.content
    assert len(result.content) < 1200


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_run_command_timeout_kills_process_group(ws: Path) -> None:
    tools = make_tools(ws)
    result = run(
        tools,
        "run_command",
        command="sleep 60 & echo $! > bg.pid; echo started; sleep 60",
        timeout=1,
    )
    assert result.is_error
    assert "started" in result.content and "timed out after 1 s" in result.content
    assert _process_gone(int((ws / "bg.pid").read_text()))


def test_run_command_returns_when_background_job_keeps_output_open(ws: Path) -> None:
    # The background job holds the output open and prints only once the test releases it,
    # which happens after the tool returned: a tool that read its output until the deadline
    # would end in a timeout error instead, however fast or slow the machine is.
    result = run(
        make_tools(ws),
        "run_command",
        command="(until [ -e release ]; do sleep 0.05; done; echo late; sleep 30) & "
        "echo $! > bg.pid; echo done",
        timeout=10,
    )
    (ws / "release").touch()
    try:
        assert not result.is_error
        assert result.content.startswith("done\n")
        assert "late" not in result.content
        assert "background processes" in result.content
        assert result.content.endswith("[exit code 0]")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int((ws / "bg.pid").read_text())), signal.SIGKILL)


@pytest.mark.parametrize("timeout", [0, -1, 601, "soon", True])
def test_run_command_rejects_bad_timeouts_before_asking(ws: Path, timeout: object) -> None:
    asked: list[str] = []

    def approve(command: str) -> bool:
        asked.append(command)
        return True

    tools = make_tools(ws, approve=approve)
    result = run(tools, "run_command", command="touch ran", timeout=timeout)
    assert result.is_error and "timeout" in result.content
    assert asked == [] and not (ws / "ran").exists()


def test_run_command_input_errors(ws: Path) -> None:
    tools = make_tools(ws)
    assert run(tools, "run_command").is_error
    assert run(tools, "run_command", command="  ").is_error
    assert tools["run_command"].run(["ls"]).is_error  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- consent


def test_declined_command_is_not_run(ws: Path) -> None:
    asked: list[str] = []

    def deny(command: str) -> bool:
        asked.append(command)
        return False

    result = run(make_tools(ws, approve=deny), "run_command", command="touch ran")
    assert result == ToolResult("the user declined to run: touch ran", is_error=True)
    assert asked == ["touch ran"]
    assert not (ws / "ran").exists()


def test_never_allow_explains_how_to_consent(ws: Path) -> None:
    result = run(make_tools(ws, approve=never_allow), "run_command", command="touch ran")
    assert result.is_error
    assert "--yes" in result.content and "terminal" in result.content
    assert "touch ran" in result.content
    assert not (ws / "ran").exists()


def test_always_allow_runs(ws: Path) -> None:
    result = run(make_tools(ws, approve=always_allow), "run_command", command="touch ran")
    assert not result.is_error
    assert (ws / "ran").exists()


def test_failing_approver_means_not_run(ws: Path) -> None:
    def broken(command: str) -> bool:
        raise OSError("no tty")

    result = run(make_tools(ws, approve=broken), "run_command", command="touch ran")
    assert result.is_error and "no tty" in result.content
    assert not (ws / "ran").exists()
