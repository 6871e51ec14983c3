"""Fault injection, tools that run away: a ``grep`` whose regular expression backtracks
for ever. Through the console script against the test server: the search has a time limit and
the agent goes on (in ``-p``, where nobody can press Ctrl-C); Ctrl-C stops it at once. Off the
main thread (an event loop's executor) the search runs in a child process, stopped the same
way, and never outliving the agent, even one killed with ``kill -9``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ToolCall, text_reply, tool_reply
from support.faults import only_session, texts
from support.loop_scripts import Script
from support.processes import HANG_GUARD, AgentProcess, CliPlace

from agentloop._agent.search_tools import GrepTool
from agentloop._agent.workspace import Workspace
from agentloop._core.values.tool import ToolResult

WINDOW = "8000"
CATASTROPHIC = "(a+)+$"
"""Exponential backtracking on a line of a's that ends in something else."""


@pytest.fixture
def place(tmp_path: Path) -> Iterator[tuple[CliPlace, Script]]:
    script = Script()
    with FakeAnthropicServer(handler=script) as server:
        place = CliPlace(tmp_path, server)
        place.workspace.mkdir()
        (place.workspace / "trap.txt").write_text("a" * 60 + "!\n")
        yield place, script
        assert server.violations == []


def grep(timeout: float) -> ToolCall:
    return ToolCall("grep", {"pattern": CATASTROPHIC, "timeout": timeout}, id="toolu_grep")


def searches(pid: int) -> list[int]:
    """The pids of the search children (``python -m agentloop._agent.search_child``) of ``pid``."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"agentloop._agent.search_child" in command:
                found.append(int(child))
    return found


def wait_for_search(agent: subprocess.Popen[bytes]) -> int:
    """The search child's pid, once it runs (checked until the hang guard: never a pace)."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline and agent.poll() is None:
        if running := searches(agent.pid):
            return running[0]
        time.sleep(0.02)
    raise AssertionError("no search started")


def ends(pid: int) -> bool:
    """Whether process ``pid`` ends within the hang guard."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([handle], [], [], HANG_GUARD)
    finally:
        os.close(handle)
    return bool(ready)


def test_a_runaway_grep_is_stopped_at_its_time_limit_in_print_mode(
    place: tuple[CliPlace, Script],
) -> None:
    where, script = place
    script.add(tool_reply(grep(timeout=1)), text_reply("the search was too slow"))

    agent = AgentProcess(
        ["--context-window", WINDOW, "-p", "find the a's"],
        cwd=where.workspace,
        env=where.env(),
        forked=True,
    )
    code = agent.finish()

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code == 0, agent.text_err
    assert agent.printed_lines() == ["the search was too slow"]
    (result,) = script.conversation[1]["messages"][-1]["content"]
    assert result["is_error"] is True
    assert str(result["content"]).startswith("grep stopped after 1 s (its time limit)")


def test_ctrl_c_stops_a_runaway_grep_and_the_next_turn_runs(
    place: tuple[CliPlace, Script],
) -> None:
    where, script = place
    script.add(tool_reply(grep(timeout=600)), text_reply("next answer"))
    agent = AgentProcess(
        ["--context-window", WINDOW], cwd=where.workspace, env=where.env(), forked=True
    )
    try:
        agent.send(b"find the a's\nsomething else\n")
        assert agent.wait_for(lambda: "⏺ grep" in agent.text_err)
        agent.popen.send_signal(signal.SIGINT)  # in the search or about to be: it stops
        code = agent.finish()
    finally:
        if agent.popen.poll() is None:
            agent.kill()

    assert "Traceback" not in agent.text_err, agent.text_err
    assert "(interrupted)" in agent.text_err
    assert code == 0, agent.text_err
    assert agent.printed_lines() == ["next answer"]
    history = only_session(where.store)
    assert texts(history)[-2:] == ["something else", "next answer"]
    assert "interrupted" in str(history[2].content)  # the grep's call is answered


def test_off_the_main_thread_a_runaway_grep_is_stopped_in_a_child(tmp_path: Path) -> None:
    (tmp_path / "trap.txt").write_text("a" * 60 + "!\n")
    tool = GrepTool(Workspace(tmp_path))
    results: list[ToolResult] = []
    worker = threading.Thread(
        target=lambda: results.append(tool.run({"pattern": CATASTROPHIC, "timeout": 1}))
    )
    worker.start()
    worker.join(HANG_GUARD)

    (result,) = results
    assert result.is_error and result.content.startswith("grep stopped after 1 s")
    assert searches(os.getpid()) == []  # the child was stopped with it


AGENT_THREAD = """
import sys, threading
from agentloop._agent.search_tools import GrepTool
from agentloop._agent.workspace import Workspace
tool = GrepTool(Workspace(sys.argv[1]))
search = {"pattern": sys.argv[2], "timeout": 600}
threading.Thread(target=tool.run, args=(search,)).start()
"""


def test_a_search_child_does_not_outlive_an_agent_killed_with_kill_9(tmp_path: Path) -> None:
    (tmp_path / "trap.txt").write_text("a" * 60 + "!\n")
    agent = subprocess.Popen([sys.executable, "-c", AGENT_THREAD, str(tmp_path), CATASTROPHIC])
    try:
        search = wait_for_search(agent)
        agent.kill()
        agent.wait()
        assert ends(search)  # it noticed its parent was gone and stopped
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
