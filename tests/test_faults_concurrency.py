"""Fault injection, several writers: two and four ``agentloop --continue`` processes
on one session, released together by a barrier, and the session lease around crashes and the
first turn of a new session.

One process holds the session (its lease) and runs its turns; every other one is refused at
once with one line that offers ``--fork-session``; the store never holds two writers' messages
interleaved, and no reply that any process printed is missing from it.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, ToolCall, text_reply, tool_reply
from support.faults import texts
from support.processes import HANG_GUARD, WINDOW, AgentProcess, CliPlace, check_store, forking

from agentloop._core.values.validation import DEFAULT_MODEL
from sessions import NewMessage, open_store

# Waits at the barrier (a pipe that the test closes), then becomes the console script.
BARRIER = (
    "import os, sys\n"
    "gate, ready = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.write(ready, b'.')\n"
    "os.close(ready)\n"
    "os.read(gate, 1)\n"  # returns (empty) once the test closes the pipe's other end
    "os.close(gate)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def answer(body: dict[str, Any]) -> ReplySpec:
    """Every reply names the line it answers: who said what is visible in the store."""
    content = body["messages"][-1]["content"]
    said = content if isinstance(content, str) else content[0].get("text", "")
    return text_reply(f"answer to {said}")


@dataclass
class Place(CliPlace):
    def seed(self) -> str:
        """A stored session of this workspace for ``--continue`` to find."""
        with open_store(self.store) as store:
            session = store.create_session(model=DEFAULT_MODEL, workspace=str(self.workspace))
            store.append_messages(
                session.id,
                [
                    NewMessage(role="user", content=[{"type": "text", "text": "seed"}]),
                    NewMessage(role="assistant", content=[{"type": "text", "text": "seeded"}]),
                ],
            )
        return session.id


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    with FakeAnthropicServer(handler=answer) as server:
        made = Place(tmp_path.resolve(), server)  # the workspace as the CLI names it
        made.workspace.mkdir()
        yield made
        assert server.violations == []


def start_together(place: Place, count: int) -> list[AgentProcess]:
    """``count`` processes of ``agentloop --continue``, let go at the same moment."""
    gate_read, gate_write = os.pipe()
    if forking():  # forked, each waits at the gate before it starts
        args = ["--continue", "--context-window", WINDOW]
        processes = [
            AgentProcess(args, cwd=place.workspace, env=place.env(), forked=True, gate=gate_read)
            for _ in range(count)
        ]
        os.close(gate_read)
        os.close(gate_write)  # all of them at once
        return processes
    ready_read, ready_write = os.pipe()
    processes = [
        AgentProcess(
            ["--continue", "--context-window", WINDOW],
            cwd=place.workspace,
            env=place.env(),
            command=[sys.executable, "-c", BARRIER, str(gate_read), str(ready_write)],
            pass_fds=(gate_read, ready_write),
        )
        for _ in range(count)
    ]
    os.close(gate_read)
    os.close(ready_write)
    arrived = b""
    while len(arrived) < count:
        readable, _, _ = select.select([ready_read], [], [], HANG_GUARD)
        assert readable, "a process never reached the barrier"
        arrived += os.read(ready_read, count)
    os.close(ready_read)
    os.close(gate_write)  # all of them at once
    return processes


def has_printed(process: AgentProcess, count: int) -> Callable[[], bool]:
    return lambda: len(process.printed_lines()) >= count


def lines_of(number: int, count: int = 3) -> list[str]:
    return [f"process {number} line {n}" for n in range(count)]


@pytest.mark.parametrize("count", [2, 4])
def test_one_writer_per_session_the_others_are_refused_in_one_line(
    place: Place, count: int
) -> None:
    session_id = place.seed()
    processes = start_together(place, count)
    for number, process in enumerate(processes):
        process.send("".join(f"{line}\n" for line in lines_of(number)).encode())
    # Stdin stays open: the one that holds the session keeps it until every other is done.
    for number, process in enumerate(processes):
        assert process.wait_for(has_printed(process, 3)), number
    for process in processes:
        process.close_stdin()
    codes = [process.finish() for process in processes]

    winners = [n for n, code in enumerate(codes) if code == 0]
    assert len(winners) == 1, [(code, p.text_err) for code, p in zip(codes, processes, strict=True)]
    (winner,) = winners
    for number, process in enumerate(processes):
        assert "Traceback" not in process.text_err
        if number == winner:
            assert process.printed_lines() == [f"answer to {line}" for line in lines_of(number)]
            continue
        assert codes[number] == 2
        assert process.text_out == ""
        (line,) = process.text_err.splitlines()
        assert line.startswith(f"agentloop: error: session {session_id[:8]} is in use by ")
        assert "--fork-session" in line
    # The store: the seed, then the winner's turns, nothing of the others, the rules kept.
    check = check_store(place.store)
    assert list(check.messages) == [session_id]
    expected = ["seed", "seeded"]
    for line in lines_of(winner):
        expected += [line, f"answer to {line}"]
    assert texts(check.messages[session_id]) == expected
    for process in processes:
        for printed in process.printed_lines():
            assert printed in check.assistant_texts


def test_a_refused_process_can_fork_while_the_holder_goes_on(place: Place) -> None:
    session_id = place.seed()
    holder = AgentProcess(
        ["--continue", "--context-window", WINDOW],
        cwd=place.workspace,
        env=place.env(),
        forked=True,
    )
    holder.send(b"holder line 0\n")
    assert holder.wait_for(lambda: len(holder.printed_lines()) == 1)
    fork = AgentProcess(
        ["--continue", "--fork-session", "--context-window", WINDOW, "-p", "forked line"],
        cwd=place.workspace,
        env=place.env(),
        forked=True,
    )
    assert fork.finish() == 0, fork.text_err
    holder.send(b"holder line 1\n")
    assert holder.finish() == 0, holder.text_err

    assert fork.printed_lines() == ["answer to forked line"]
    assert "Continuing in a new branch" in fork.text_err
    check = check_store(place.store)
    assert texts(check.messages[session_id]) == [
        "seed",
        "seeded",
        "holder line 0",
        "answer to holder line 0",
        "holder line 1",
        "answer to holder line 1",
    ]
    (branch,) = (sid for sid in check.messages if sid != session_id)
    assert texts(check.messages[branch])[-2:] == ["forked line", "answer to forked line"]


def test_a_new_session_is_held_from_its_first_write(place: Place) -> None:
    started = place.root / "started"
    gate = place.root / "gate"
    os.mkfifo(started)
    os.mkfifo(gate)
    # Opened read-write: never blocks, and the command's own opens never block either.
    started_fd = os.open(started, os.O_RDWR | os.O_NONBLOCK)
    gate_fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    command = f"echo go > {started}; read line < {gate}; echo released"
    place.server.enqueue(tool_reply(ToolCall("run_command", {"command": command})))
    first = AgentProcess(
        ["--yes", "--context-window", WINDOW], cwd=place.workspace, env=place.env(), forked=True
    )
    second: AgentProcess | None = None
    try:
        first.send(b"first line\n")
        readable, _, _ = select.select([started_fd], [], [], HANG_GUARD)
        assert readable  # the first turn's command runs: its session is stored by now
        second = AgentProcess(
            ["--continue", "--context-window", WINDOW, "-p", "second line"],
            cwd=place.workspace,
            env=place.env(),
            forked=True,
        )
        code = second.finish()
        assert code == 2, second.text_out  # refused: the session is the first one's
        assert "--fork-session" in second.text_err
    finally:
        os.write(gate_fd, b"go\n")  # the first turn's command ends
        first.finish()
        if second is not None:
            second.finish()
        os.close(started_fd)
        os.close(gate_fd)
    check_store(place.store)


def test_a_crashed_writers_lease_does_not_block_continue(place: Place) -> None:
    place.seed()
    crashed = AgentProcess(
        ["--continue", "--context-window", WINDOW],
        cwd=place.workspace,
        env=place.env(),
        forked=True,
    )
    crashed.send(b"before the crash\n")
    assert crashed.wait_for(lambda: len(crashed.printed_lines()) == 1)
    crashed.kill()  # its lease stays on record until its ttl runs out

    after = AgentProcess(
        ["--continue", "--context-window", WINDOW, "-p", "after the crash"],
        cwd=place.workspace,
        env=place.env(),
        forked=True,
    )
    assert after.finish() == 0, after.text_err
    assert after.printed_lines() == ["answer to after the crash"]
