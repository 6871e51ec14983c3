"""Fault injection, the process: ``kill -9`` of the ``agentloop`` console script at
seeded random points, over a bounded number of runs, with the invariants checked after each
(the machinery and the invariants: :mod:`support.kill_chains`).

Two chains run side by side (one core each), one on SQLite and one on PostgreSQL (on SQLite
too when no PostgreSQL server answers), each on its own store, workspace and fake API. The
suite runs a sample (24 runs by default: every kind of kill point planned twice per chain);
``benchmarks/stress_faults.py`` runs the big counts (160 runs, 40 of them on PostgreSQL).
``AGENTLOOP_FAULT_RUNS`` and ``AGENTLOOP_FAULT_SEED`` change the number of runs and the seed.
The runs are forked from the zygote of :mod:`support.zygote` (``AGENTLOOP_FAULT_EXEC=1``: exec'd).

Also here: a request that a kill cuts short on the wire is no rule violation (the fake API saw
no whole request), and a forked run is the run of the console script that it replaces.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import support.store_contract as store_contract
from fake_api import FakeAnthropicServer, text_reply
from support.kill_chains import KINDS, Backend, chains, run_chains
from support.processes import HANG_GUARD, AgentProcess, CliPlace, check_store, forking
from support.zygote import ForkedPopen, zygote

RUNS = int(os.environ.get("AGENTLOOP_FAULT_RUNS", "24"))
SEED = int(os.environ.get("AGENTLOOP_FAULT_SEED", "10"))


def backends() -> list[Backend]:
    postgres: Backend = "sqlite" if store_contract.postgres_unavailable() else "postgresql"
    return ["sqlite", postgres]


@pytest.mark.heavy(seconds=30)
def test_kill_9_at_random_points_leaves_a_sound_store_and_continue_repairs(
    tmp_path: Path,
) -> None:
    with chains(tmp_path, backends(), SEED, forked=True) as made:
        kills = run_chains(made, RUNS)
        report = f"AGENTLOOP_FAULT_RUNS={RUNS} AGENTLOOP_FAULT_SEED={SEED}\n" + "\n".join(
            line for chain in made for line in chain.transcript
        )
    # The kill points were reached (a racing kill may come after the run ended), all kinds.
    killed = {what: n for what, n in kills.items() if what != "ended"}
    assert sum(killed.values()) >= RUNS * 3 // 4, report
    if len(made) * len(KINDS) <= RUNS:
        for kind in KINDS:
            assert killed.get(f"killed {kind}", 0) >= 1, report


def half_sent(server: FakeAnthropicServer, body: bytes, length: int) -> bytes:
    """A request whose sender goes away after ``body`` (of the ``length`` its header says), as a
    process killed while it sends; what the server answered (it closes the connection)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    head = (
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: test-key\r\n"
        "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=HANG_GUARD) as connection:
        connection.sendall(head.encode() + body)
        connection.shutdown(socket.SHUT_WR)  # what the kernel sends when the process dies
        answer = b""
        while chunk := connection.recv(65_536):  # until the server is done with it
            answer += chunk
    return answer


def test_a_request_cut_short_by_a_kill_is_no_rule_violation_but_a_bad_body_is() -> None:
    # A run killed between a request's headers and its body, or inside the body, leaves a body
    # shorter than its Content-Length: nothing reached the API, nothing broke its rules.
    whole = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": []}).encode()
    with FakeAnthropicServer(handler=lambda body: text_reply("never")) as server:
        assert half_sent(server, b"", len(whole)) == b""
        assert half_sent(server, whole[:20], len(whole)) == b""
        assert server.violations == [] and server.requests == []
        assert server.abandoned == 2
        # A body that is all there and is not JSON still is the client's fault.
        assert b" 400 " in half_sent(server, b"not json", len(b"not json")).split(b"\r\n")[0]
        assert server.violations == ["request 1: body is not valid JSON"]


@pytest.mark.heavy
def test_a_forked_run_is_the_console_script_run_it_replaces(tmp_path: Path) -> None:
    # The suite forks most runs from a zygote that imported the console script once: the same
    # run as an exec of the script (output, exit code, the store in the run's own home, what
    # the API was sent), in a process of its own.
    outcomes = []
    for forked in (False, True):
        with FakeAnthropicServer(handler=lambda body: text_reply("forked or not")) as server:
            place = CliPlace(tmp_path / f"forked-{forked}", server)
            place.workspace.mkdir(parents=True)
            run = AgentProcess(
                ["--context-window", "6000", "-p", "say it"],
                cwd=place.workspace,
                env=place.env(),
                forked=forked,
            )
            code = run.finish()
            assert isinstance(run.popen, ForkedPopen) == (forked and forking())
            assert run.popen.pid not in (os.getpid(), zygote().process.pid)
            check = check_store(place.store)
            sent = [body["messages"] for body in server.message_requests]
            outcomes.append((code, run.text_out, run.text_err, list(check.assistant_texts), sent))
            assert server.violations == []
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:2] == (0, "forked or not\n")
