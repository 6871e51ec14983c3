"""Bad input end to end: through ``agentloop`` against the fake Messages API, a file name that is
not UTF-8 and a secret printed by a command neither crash the store nor reach it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fake_api import TEST_API_KEY, text_reply, tool_reply
from support.cli import CLI, WINDOW


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def stored_text(cli: CLI) -> str:
    with cli.store() as store:
        return "\n".join(
            str(message.content)
            for session in store.list_sessions(limit=None)
            for message in store.get_messages(session.id)
        )


def test_a_non_utf8_file_name_is_listed_sent_and_stored(cli: CLI, workspace: Path) -> None:
    with open(os.fsencode(workspace) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"menu\n")
    cli.script.add(
        tool_reply(("list_files", {}), ("grep", {"pattern": "menu"})),
        text_reply("listed"),
        text_reply("still here"),
    )

    run = cli.run("--context-window", WINDOW, stdin="list the files\nand then?\n")

    assert run.code == 0, run.err
    assert "Traceback" not in run.err and run.error_lines() == []
    assert run.out.splitlines() == ["listed", "still here"]
    listed, grepped = tool_results(cli.script.conversation[1])
    assert listed["content"] == "caf\\xe9.txt"
    assert grepped["content"] == "caf\\xe9.txt:1: menu"
    # What the model was sent is what the store holds.
    with cli.store() as store:
        (session,) = store.list_sessions()
        stored = [m.to_param() for m in store.get_messages(session.id)]
    assert stored[:-2] == cli.script.conversation[-1]["messages"][:-1]


def test_a_secret_printed_by_a_command_reaches_neither_the_api_nor_the_store(
    cli: CLI, workspace: Path
) -> None:
    (workspace / "key.txt").write_text(f"leaked={TEST_API_KEY}\n")
    cli.script.add(
        tool_reply(("run_command", {"command": "echo env=$ANTHROPIC_API_KEY; cat key.txt"})),
        text_reply("done"),
    )

    run = cli.run("--context-window", WINDOW, "--yes", "-p", "show me the key")

    assert run.code == 0, run.err
    (result,) = tool_results(cli.script.conversation[-1])
    assert result["content"].splitlines()[:2] == [
        "env=",  # the command never had the key...
        "leaked=[redacted $ANTHROPIC_API_KEY]",  # ...and its value is redacted from output
    ]
    assert TEST_API_KEY not in str(cli.fake_api.message_requests)
    assert TEST_API_KEY not in stored_text(cli)
