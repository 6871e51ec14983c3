"""``agentloop demo``: offline, compacts at least twice, ends with the lineage tree it made."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from support.cli import AGENTLOOP, NOTICE, Run, check_notices

from sessions import open_store


def test_demo_runs_offline_and_shows_compactions_and_the_lineage(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["AGENTLOOP_HOME"] = str(home)
    # Any attempt to reach the network would go to a closed port and fail.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env[name] = "http://127.0.0.1:9"
    done = subprocess.run(
        [str(AGENTLOOP), "demo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    run = Run(done.returncode, done.stdout, done.stderr)

    assert run.code == 0, run.err
    assert not any(line.startswith("Traceback") for line in run.err.splitlines())
    assert run.error_lines() == []
    # At least two compactions, and automatic ones among them (before the user's /compact).
    assert len(run.notices) >= 2
    lines = run.err.splitlines()
    manual = next(i for i, line in enumerate(lines) if line.startswith("› /compact"))
    assert sum(1 for line in lines[:manual] if NOTICE.match(line)) >= 1
    assert all("warning:" not in line for line in lines)
    # The temporary workspace it worked in, removed afterwards.
    match = re.search(r"small project in (\S+)", run.err)
    assert match is not None
    workspace = Path(match.group(1))
    assert not workspace.exists()

    with open_store(home / "sessions.db") as store:
        children = check_notices(run, store, workspace.resolve())
        sessions = store.list_sessions(limit=None)
        assert len(sessions) == len(run.notices) + 1
        lineage = store.lineage(children[-1])
        assert {s.id for s in lineage} == {s.id for s in sessions}
        # The tools really ran: the project's tests failed, then passed after the fix.
        results = [
            str(block.get("content"))
            for message in store.get_messages(lineage[0].id)
            for block in message.content
            if block.get("type") == "tool_result"
        ]
        assert any("FAILED test_divide" in r for r in results)
        assert any("all tests passed" in r for r in results)
    # It ends with the lineage tree: every session it made, the newest marked for resume.
    tree = run.out.strip().splitlines()[-len(sessions) :]
    for session, line in zip(lineage, tree, strict=True):
        assert session.id[:8] in line
    assert "resume continues here" in tree[-1]
