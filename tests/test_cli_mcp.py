"""MCP servers through the ``agentloop`` command line against the test server: a
session that calls MCP tools, compacts and resumes with ``-c`` with the same tool set; what
``/mcp`` shows; a server that fails is one line; nothing left running after exit or Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_api import text_reply, tool_reply
from support.cli import AGENTLOOP, CLI

SERVER = Path(__file__).parent / "support" / "mcp_test_server.py"
NEEDLE = "zanzibar-quartz-needle"


def write_config(path: Path, pid_file: Path, **more: dict[str, Any]) -> Path:
    servers: dict[str, Any] = {
        "t": {"command": sys.executable, "args": [str(SERVER), "--pid-file", str(pid_file)]}
    }
    path.write_text(json.dumps({"mcpServers": {**servers, **more}}))
    return path


def dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def pid_of(pid_file: Path) -> int:
    return int(pid_file.read_text().split()[0])


def mcp_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in body["tools"] if t["name"].startswith("mcp__")]


def test_a_session_calls_mcp_tools_compacts_and_resumes(cli: CLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    config = write_config(tmp_path / "servers.json", pid_file)
    cli.monkeypatch.setenv("AGENTLOOP_MCP_MAX_TOKENS", "1000")
    cli.script.add(
        tool_reply(("mcp__t__echo", {"text": "hello"}), ("mcp__t__big", {})),
        text_reply("I read both results."),
    )
    args = ["--mcp-config", str(config), "--yes", "--context-window", "20000"]
    first = cli.run(*args, stdin="use the tools\n/mcp\n/compact\n")
    assert first.code == 0, first.err
    assert dead(pid_of(pid_file))
    requests = list(cli.script.conversation)
    tools = mcp_tools(requests[0])
    assert [t["name"] for t in tools][:3] == ["mcp__t__echo", "mcp__t__crash", "mcp__t__big"]
    echo, big = requests[1]["messages"][-1]["content"]
    assert echo["content"] == "echo: hello"
    assert big["content"].startswith("[The result of mcp__t__big was ")
    assert NEEDLE not in big["content"]
    # /mcp: the server, its state, its tools and what their definitions cost.
    assert "t: ready · 7 tools · " in first.out
    assert "  mcp__t__sleep" in first.out
    assert "MCP tool definitions: " in first.out
    assert len(first.notices) == 1  # /compact
    with cli.store() as store:
        child = first.notices[0]["child"]
        hits = store.search_messages(NEEDLE, session_id=store.get_session(child).id)
        assert hits  # the whole result, stored, found from the compacted session

    cli.script.add(tool_reply(("mcp__t__echo", {"text": "again"})), text_reply("done again"))
    more = {"u": {"command": sys.executable, "args": [str(SERVER)]}}  # a server added since
    config = write_config(tmp_path / "servers.json", pid_file, **more)
    second = cli.run("-c", *args, stdin="once more\n")
    assert second.code == 0, second.err
    assert (
        "agentloop: warning: MCP tools differ from when this session started: "
        "7 new (not offered: a new session gets them)"
    ) in second.err
    assert dead(pid_of(pid_file))
    resumed = cli.script.conversation[len(requests) :]
    assert mcp_tools(resumed[0]) == tools  # byte for byte the tool set it started with
    assert resumed[-1]["messages"][-1]["content"][0]["content"] == "echo: again"


def test_a_failing_server_is_one_line_and_the_agent_goes_on(cli: CLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    broken = {"command": sys.executable, "args": [str(SERVER), "--exit-at-start"]}
    config = write_config(tmp_path / "servers.json", pid_file, broken=broken)
    cli.script.add(tool_reply(("mcp__t__echo", {"text": "x"})), text_reply("fine"))
    run = cli.run("--mcp-config", str(config), "--yes", stdin="go\n")
    assert run.code == 0, run.err
    warnings = [line for line in run.err.splitlines() if "MCP server" in line]
    assert warnings == [
        "agentloop: warning: MCP server broken: failed: it exited before it answered "
        "(stderr: error: cannot open the database)"
    ]
    assert "fine" in run.out
    assert dead(pid_of(pid_file))


def test_no_mcp_and_an_untrusted_workspace_file(cli: CLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    write_config(cli.workspace / ".mcp.json", pid_file)
    run = cli.run(stdin="hi\n")
    assert run.code == 0, run.err
    assert "agentloop: warning: .mcp.json of this workspace is not trusted" in run.err
    assert not pid_file.exists() and mcp_tools(cli.script.conversation[-1]) == []
    quiet = cli.run("--no-mcp", "--mcp-config", str(cli.workspace / ".mcp.json"), stdin="x\n")
    assert quiet.code == 0 and "MCP" not in quiet.err and not pid_file.exists()


@pytest.mark.heavy
def test_ctrl_c_during_an_mcp_call_leaves_nothing_running(cli: CLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    config = write_config(tmp_path / "servers.json", pid_file)
    cli.script.add(tool_reply(("mcp__t__sleep", {})), text_reply("never"))
    process = subprocess.Popen(
        [str(AGENTLOOP), "--mcp-config", str(config), "--yes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cli.workspace,
    )
    try:
        assert process.stdin is not None
        process.stdin.write("sleep please\n")
        process.stdin.flush()
        marker = Path(f"{pid_file}.call")
        deadline = time.monotonic() + 60
        while not marker.exists():  # the call has begun inside the server
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)  # the turn is interrupted; the agent goes on
        _, err = process.communicate("/exit\n", timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert dead(pid_of(pid_file))


@pytest.mark.heavy
def test_a_crashed_agent_leaves_no_server_running(cli: CLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    config = write_config(tmp_path / "servers.json", pid_file)
    cli.script.add(tool_reply(("mcp__t__sleep", {})), text_reply("never"))
    process = subprocess.Popen(
        [str(AGENTLOOP), "--mcp-config", str(config), "--yes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cli.workspace,
    )
    try:
        assert process.stdin is not None
        process.stdin.write(b"sleep please\n")
        process.stdin.flush()
        deadline = time.monotonic() + 60
        while not Path(f"{pid_file}.call").exists():  # busy in a five-minute call
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        pid = pid_of(pid_file)
        process.kill()  # SIGKILL: no cleanup of its own runs
        process.wait(timeout=30)
        while not dead(pid):  # the watchdog ends the server's group long before the call would
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
