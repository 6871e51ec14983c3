"""MCP servers in a terminal: the workspace's ``.mcp.json`` is asked about once,
``/mcp`` shows the server, and quitting leaves no server running."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.pty import Model, Terminal

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

SERVER = Path(__file__).parent / "support" / "mcp_test_server.py"


def dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_the_workspace_file_is_trusted_once_and_the_server_ends_with_the_agent(
    launch: Callable[..., Terminal], model: Model, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "t.pid"
    entry = {"command": sys.executable, "args": [str(SERVER), "--pid-file", str(pid_file)]}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"t": entry}}))
    term = launch()
    term.expect(r"Trust this file and start them\? \[y/N\]")
    assert "  t: " in term.screen
    term.send("y\r")
    term.prompt()
    term.send("/mcp\r")
    term.expect(r"t: ready · 7 tools · [\d,]+ tokens per request")
    term.prompt()
    term.send("\x04")  # Ctrl-D on the empty line: quit
    assert term.wait() == 0
    first = int(pid_file.read_text())
    assert dead(first)

    again = launch()  # trusted now: not asked again
    again.prompt()
    again.send("/mcp\r")
    again.expect(r"t: ready · 7 tools")
    again.prompt()
    again.send("\x03")
    again.send("\x03")  # Ctrl-C twice on the empty line: quit
    assert again.wait() == 0
    assert not re.search(r"Trust this file", again.screen)
    second = int(pid_file.read_text())
    assert second != first and dead(second)
