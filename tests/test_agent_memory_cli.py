"""End to end: ``agentloop`` against the fake Messages API keeps the project's
instructions and the files it was working on through compactions, with the CLI's defaults
(instructions within 10 % of the window, restored files within 5 %)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_api import text_reply, tool_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import (
    PREFIX_START,
    api_summary,
    filler,
    first_text,
    opens_with_api_summary,
    request_text,
)

from agentloop._core.measuring.context import trigger_tokens
from agentloop._core.values.validation import DEFAULT_THRESHOLD

RULE = "RULE-5521: name every test after the behaviour it checks."
USER_RULE = "USER-RULE-17: keep answers short."
STATE_OPEN, STATE_CLOSE = "<preserved-state>", "</preserved-state>"
MARK = "current contents after compaction"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config directory, pointed away from the real one."""
    path = tmp_path / "user-config"
    path.mkdir()
    monkeypatch.setenv("AGENTLOOP_CONFIG_DIR", str(path))
    return path


def state_of(body: dict[str, Any]) -> str:
    text = request_text(body)
    return text.split(STATE_OPEN, 1)[1].split(STATE_CLOSE, 1)[0] if STATE_OPEN in text else ""


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system)
    return str(system)


def firsts_after_compaction(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first request after each compaction (its opening differs from the one before): it
    opens with agentloop's summary, or with the API's own (on-demand compaction)."""
    found: list[dict[str, Any]] = []
    previous = ""
    for body in bodies:
        summarized = opens_with_api_summary(body)
        opening = str(api_summary(body)) if summarized else first_text(body)
        if (summarized or opening.startswith(PREFIX_START)) and opening != previous:
            found.append(body)
        previous = opening
    return found


def test_instruction_rules_reach_every_request_after_several_compactions(
    cli: CLI, workspace: Path, config_dir: Path
) -> None:
    (workspace / "AGENTS.md").write_text(f"# Project rules\n{RULE}\n")
    (config_dir / "AGENTS.md").write_text(f"{USER_RULE}\n")
    lines = conversation_lines(14)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    cli.fake_api.context_window = int(WINDOW)

    run = cli.run("--context-window", WINDOW, stdin="\n".join(lines))

    assert run.code == 0, run.err
    assert len(run.notices) >= 2
    bodies = cli.script.conversation
    assert len(bodies) == len(lines)
    assert len(firsts_after_compaction(bodies)) == len(run.notices)
    for body in bodies:
        assert RULE in system_of(body) and USER_RULE in system_of(body)
    # Byte-stable through every compaction: the prompt cache keeps its prefix.
    assert len({system_of(body) for body in bodies}) == 1


def test_files_come_back_current_and_within_budget_after_compaction(
    cli: CLI, workspace: Path
) -> None:
    (workspace / "app.py").write_text("def main():\n    return 'OLD-APP-7'\n")
    (workspace / "data.txt").write_text("DATA-MARK\n")
    # Over the 300-token budget (5 % of 6,000), though small enough on disk to be counted.
    (workspace / "big.txt").write_text("BIG-MARK\n" + filler("bulk", 400) + "\n")
    cli.script.add(
        tool_reply(
            ("read_file", {"path": "app.py"}),
            ("read_file", {"path": "big.txt", "limit": 1}),
            ("read_file", {"path": "data.txt"}),
        ),
        text_reply("I have read them."),
    )
    first = cli.run("--context-window", WINDOW, "-p", "read the files")
    assert first.code == 0, first.err
    # Between the sessions: app.py changes, data.txt becomes a binary file.
    (workspace / "app.py").write_text("def main():\n    return 'NEW-APP-9'\n")
    (workspace / "data.txt").write_bytes(b"\x89PNG\r\n\x00\x00DATA-MARK")
    lines = conversation_lines(8)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    cli.fake_api.context_window = int(WINDOW)

    run = cli.run("--context-window", WINDOW, "--continue", stdin="\n".join(lines))

    assert run.code == 0, run.err
    assert run.notices
    after = firsts_after_compaction(cli.script.conversation)
    assert len(after) == len(run.notices)
    first_after = after[0]
    state = state_of(first_after)
    assert f"### app.py — {MARK} (changed on disk since you last saw it)" in state
    assert "NEW-APP-9" in state
    assert "OLD-APP-7" not in request_text(first_after)
    assert "BIG-MARK" not in state and "DATA-MARK" not in state
    for body in after:
        trigger = trigger_tokens(int(WINDOW), DEFAULT_THRESHOLD, int(body["max_tokens"]))[0]
        assert cli.fake_api.count_input_tokens(body) < trigger
    with cli.store() as store:
        saved = store.get_session(run.notices[-1]["child"]).metadata
    assert saved["restored_files"]["restored"] == ["app.py"]
    skipped = dict(saved["restored_files"]["skipped"])
    assert skipped["data.txt"] == "binary" and skipped["big.txt"].startswith("over the budget")
    assert [f["path"] for f in saved["recent_files"]["files"]] == ["data.txt", "big.txt", "app.py"]
