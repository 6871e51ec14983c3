"""Every example runs offline and shows what its docstring claims.

The scripted example runs as it is; the hand-written-loop example runs against our own
Messages-API server on 127.0.0.1 (``ANTHROPIC_BASE_URL`` only, no key), with a window small
enough that it compacts, so the summary requests and ``count_tokens`` really happen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply, tool_reply

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(extra)
    return env


def test_every_example_is_tested_here() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == [
        "agentloop_custom_tools.py",
        "compacter_in_your_loop.py",
        "tool_runner_sessions.py",
    ]


def test_custom_tools_example_compacts_and_its_hook_state_travels() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "agentloop_custom_tools.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("[compacted ") for line in lines), done.stdout
    assert "[the hook's state travels with it:] - apples: 3" in lines
    assert lines[-1] == "- pears: 21"


@pytest.mark.heavy
def test_hand_written_loop_example_works_with_only_a_base_url() -> None:
    # A compatible server that checks no key: the example sends its stand-in.
    with FakeAnthropicServer(api_key="not-needed") as fake_api:
        _run_hand_written_loop(fake_api)


def _run_hand_written_loop(fake_api: FakeAnthropicServer) -> None:
    calls = iter(range(1_000))

    def answer(body: dict[str, Any]) -> ReplySpec:
        if "summary" in str(body.get("system", "")).lower():
            return text_reply("## Goal\nmultiply numbers\n## Progress\nmultiplied 1234 * 5678")
        n = next(calls)
        if n < 6:
            return tool_reply(("multiply", {"a": 1234 + n, "b": 5678}), text="Working " * 200)
        return text_reply("1234 * 5678 = 7006652")

    fake_api.handler = answer
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "compacter_in_your_loop.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(ANTHROPIC_BASE_URL=fake_api.base_url, AGENTLOOP_CONTEXT_WINDOW="1500"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1234 * 5678 = 7006652"
    assert "compacted:" in done.stderr and "counted by the api" in done.stderr, done.stderr
    assert fake_api.violations == []
    paths = [request.path for request in fake_api.requests]
    assert "/v1/messages/count_tokens" in paths


READS = (
    "README.md",
    "ARCHITECTURE.md",
    "agentloop/_core/facts/ledger.py",
    "agentloop/_core/compaction/on_demand.py",
    "agentloop/_core/compaction_core.py",
    "agentloop/_loop/agent_loop.py",
    "agentloop/integrations/_engine.py",
    "agentloop/integrations/tool_runner.py",
)


@pytest.mark.heavy
def test_tool_runner_example_compacts_stores_and_resumes(tmp_path: Path) -> None:
    # The SDK's own runner, offline against our server (a base URL, no key): the files it
    # reads pass the small window's trigger, and a second (async) runner resumes the session.
    reads = iter(READS)

    def answer(body: dict[str, Any]) -> ReplySpec:
        last = [m for m in body["messages"] if m["role"] != "system"][-1]
        asked = last["role"] == "user" and isinstance(last["content"], str)
        if asked and last["content"].startswith("And in one more line"):
            return text_reply("I read the README, the map and six modules.")
        path = next(reads, None)
        if path is not None:
            return tool_reply(("read_file", {"path": path}), text="Reading.")
        return text_reply("agentloop compacts long Anthropic conversations.")

    with FakeAnthropicServer(api_key="not-needed") as fake_api:
        fake_api.handler = answer
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / "tool_runner_sessions.py")],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
            env=_env(ANTHROPIC_BASE_URL=fake_api.base_url),
        )
        assert done.returncode == 0, done.stderr
        assert fake_api.violations == [] and fake_api.refusals == []
    lines = done.stdout.splitlines()
    assert lines[0] == "agentloop compacts long Anthropic conversations."
    assert lines[1] == "I read the README, the map and six modules."
    assert "compacted: " in done.stderr and "(api)" in done.stderr, done.stderr
    assert (tmp_path / "sessions.db").exists() and lines[2].startswith("session ")
