"""Fault injection (issue 20), tools that run away: a ``grep`` whose regular expression backtracks
for ever. Through the console script against the test server: the search has a time limit and
the agent goes on (in ``-p``, where nobody can press Ctrl-C); Ctrl-C stops it at once; and the
search never outlives the agent, even one killed with ``kill -9``.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ToolCall, text_reply, tool_reply
from test_faults_kill import HANG_GUARD, AgentProcess, CliPlace
from test_faults_stream import only_session, texts
from test_loop import Script

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


def searches(agent: AgentProcess) -> list[int]:
    """The pids of the agent's search children (``python -m agentloop._agent.limited``)."""
    found = []
    for task in Path(f"/proc/{agent.popen.pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in children:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"agentloop._agent.limited" in command:
                found.append(int(pid))
    return found


def wait_for_search(agent: AgentProcess) -> int:
    """The search child's pid, once it runs (checked until the hang guard: never a pace)."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline and agent.popen.poll() is None:
        if running := searches(agent):
            return running[0]
        time.sleep(0.02)
    raise AssertionError(f"no search started: {agent.text_err}")


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
        ["--context-window", WINDOW, "-p", "find the a's"], cwd=where.workspace, env=where.env()
    )
    code = agent.finish()

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code == 0, agent.text_err
    assert agent.printed_lines() == ["the search was too slow"]
    (result,) = script.conversation[1]["messages"][-1]["content"]
    assert result["is_error"] is True
    assert str(result["content"]).startswith("grep stopped after 1 s (its time limit)")
    assert searches(agent) == []


def test_ctrl_c_stops_a_runaway_grep_and_the_next_turn_runs(
    place: tuple[CliPlace, Script],
) -> None:
    where, script = place
    script.add(tool_reply(grep(timeout=600)), text_reply("next answer"))
    agent = AgentProcess(["--context-window", WINDOW], cwd=where.workspace, env=where.env())
    try:
        agent.send(b"find the a's\nsomething else\n")
        search = wait_for_search(agent)
        agent.popen.send_signal(signal.SIGINT)
        code = agent.finish()
    finally:
        if agent.popen.poll() is None:
            agent.kill()

    assert "Traceback" not in agent.text_err, agent.text_err
    assert "(interrupted)" in agent.text_err
    assert code == 0, agent.text_err
    assert agent.printed_lines() == ["next answer"]
    assert ends(search)
    history = only_session(where.store)
    assert texts(history)[-2:] == ["something else", "next answer"]
    assert "interrupted" in str(history[2].content)  # the grep's call is answered


def test_a_search_does_not_outlive_an_agent_killed_with_kill_9(
    place: tuple[CliPlace, Script],
) -> None:
    where, script = place
    script.add(tool_reply(grep(timeout=600)))
    agent = AgentProcess(["--context-window", WINDOW], cwd=where.workspace, env=where.env())
    try:
        agent.send(b"find the a's\n")
        search = wait_for_search(agent)
        agent.kill()
        assert ends(search)  # it noticed its parent was gone and stopped
    finally:
        if agent.popen.poll() is None:
            agent.kill()
