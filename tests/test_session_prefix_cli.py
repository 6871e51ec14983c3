"""``agentloop -c`` after the project's AGENTS.md changed, against the test server:
the resumed requests begin with the stored system prompt and tools byte for byte (so every
stored thinking block stays bound to its prefix and no request is refused), the new text
reaches the model as an appended message, and the user is told in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_api import text_reply
from support.cli import CLI

OLD_RULE = "RULE-OLD-4410: write the tests first."
NEW_RULE = "RULE-NEW-8820: never touch the migrations."
NOTICE = "AGENTS.md changed since this session started: the new text was added to the conversation"


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config directory, pointed away from the real one."""
    path = tmp_path / "user-config"
    path.mkdir()
    monkeypatch.setenv("AGENTLOOP_CONFIG_DIR", str(path))
    return path


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without their cache breakpoints (moving one is no edit of the prefix)."""
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]


def _session_then_change(cli: CLI, workspace: Path) -> dict[str, Any]:
    """A first run under the old rules, then AGENTS.md rewritten; the first run's request."""
    (workspace / "AGENTS.md").write_text(f"# Rules\n{OLD_RULE}\n")
    cli.script.add(text_reply("Noted the rules."))
    first = cli.run("-p", "read the rules")
    assert first.code == 0, first.err
    assert NOTICE not in first.err
    (workspace / "AGENTS.md").write_text(f"# Rules\n{NEW_RULE}\n")
    (body,) = cli.script.conversation
    assert OLD_RULE in json.dumps(body["system"])
    return body


def test_continue_after_agents_md_changed_keeps_the_prefix_and_adds_a_system_message(
    cli: CLI, workspace: Path
) -> None:
    before = _session_then_change(cli, workspace)
    cli.script.add(text_reply("Understood."))

    run = cli.run("-c", "-p", "what changed?")

    assert run.code == 0, run.err
    assert NOTICE in run.err.splitlines()
    assert cli.fake_api.violations == []
    after = cli.script.conversation[-1]
    # The first run's prefix, byte for byte: its thinking blocks stay valid.
    assert json.dumps(after["system"]) == json.dumps(before["system"])
    assert json.dumps(after["tools"]) == json.dumps(before["tools"])
    assert NEW_RULE not in json.dumps(after["system"])
    # The history as it was, the new question, then the new text as a system message.
    messages = after["messages"]
    assert _plain(messages[:1]) == _plain(before["messages"])
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "system"]
    # The first reply's thinking goes back, bound to the first run's system prompt and tools:
    # with a rebuilt system prompt the server would refuse this request.
    assert messages[1]["content"][0]["type"] == "thinking"
    assert json.dumps(messages[2]).count("what changed?") == 1
    assert NEW_RULE in json.dumps(messages[3]) and OLD_RULE not in json.dumps(messages[3])

    # Continued again: the update is part of the history, not added twice, nor told again.
    cli.script.add(text_reply("Still understood."))
    again = cli.run("-c", "-p", "anything else?")
    assert again.code == 0, again.err
    assert NOTICE not in again.err
    latest = cli.script.conversation[-1]
    assert json.dumps(latest["system"]) == json.dumps(before["system"])
    assert _plain(latest["messages"][:4]) == _plain(messages)
    assert json.dumps(latest["messages"]).count(NEW_RULE) == 1


def test_continue_on_a_model_without_system_messages_puts_the_text_in_the_user_message(
    cli: CLI, workspace: Path
) -> None:
    before = _session_then_change(cli, workspace)
    cli.script.add(text_reply("Understood."))

    run = cli.run("-c", "-m", "claude-haiku-4-5", "-p", "what changed?")

    assert run.code == 0, run.err
    assert NOTICE in run.err.splitlines()
    after = cli.script.conversation[-1]
    assert json.dumps(after["system"]) == json.dumps(before["system"])
    last = after["messages"][-1]
    assert last["role"] == "user"
    texts = [block["text"] for block in last["content"] if block["type"] == "text"]
    assert texts[0] == "what changed?" and NEW_RULE in texts[-1]
    assert all(m["role"] != "system" for m in after["messages"])
