"""What the coding agent must not forget after a compaction: the project's
instruction files (in the system prompt) and the current contents of the files it was working
on (a preserved-state hook), with their budgets, and both kept in the session metadata."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.agents import coding_agent

from agentloop import ModelRequest
from agentloop._agent.agent import CodingAgent
from agentloop._agent.base import ToolStateError
from agentloop._agent.recent_files import (
    RESTORE_MARK,
    FileRestorer,
    RecentFiles,
    recent_files_hook,
)
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply
from sessions import SqliteSessionStore, open_store

MODEL = "claude-sonnet-5-5"
RULE = "RULE-7731: every function gets a docstring."


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return open_store(tmp_path / "sessions.db")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The user's config directory for these tests (never the real one)."""
    path = tmp_path / "config"
    path.mkdir()
    return path


def make_agent(
    store: SqliteSessionStore,
    ws: Path,
    model: ScriptedModel,
    config: Path,
    *,
    window: int = 20_000,
    resume: str | None = None,
    **options: Any,
) -> CodingAgent:
    return coding_agent(
        store, ws, model, window=window, resume=resume, config_dir=config, **options
    )


def request_text(request: ModelRequest) -> str:
    """Every text of a request's messages (text blocks and tool results)."""
    parts: list[str] = []
    for message in request.messages:
        for block in message.content:
            if block.get("type") == "text":
                parts.append(str(block["text"]))
            elif block.get("type") == "tool_result":
                parts.append(str(block.get("content")))
    return "\n".join(parts)


def preserved_state(request: ModelRequest) -> str:
    """The preserved-state block of a compacted request ('' if there is none)."""
    text = request_text(request)
    if "<preserved-state>" not in text:
        return ""
    return text.split("<preserved-state>", 1)[1].split("</preserved-state>", 1)[0]


def conversation(model: ScriptedModel) -> list[ModelRequest]:
    return [r for r in model.requests if r.metadata.get("purpose") == "conversation"]


def filler(label: str, words: int) -> str:
    return label + ": " + " ".join(f"word{n % 50}" for n in range(words))


def work_then_compact(agent: CodingAgent, model: ScriptedModel, turns: int = 4) -> None:
    """A few long turns (so what came before falls out of the kept tail), then /compact."""
    for n in range(turns):
        model.add(text_reply(filler(f"answer {n}", 300)))
        agent.run_turn(filler(f"request {n}", 300))
    outcome = agent.compact()
    assert outcome is not None and outcome.transition is not None, outcome


# ------------------------------------------------------------------------------ instructions


def test_instruction_files_are_in_the_system_prompt_with_their_cost(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "AGENTS.md").write_text(f"# Rules\n{RULE}\n")
    (ws / "CLAUDE.md").symlink_to(ws / "AGENTS.md")  # a common setup: one file, two names
    (ws / "AGENTLOOP.md").write_text("LOOP-RULE: run the tests before saying done.\n")
    (config / "AGENTS.md").write_text("USER-RULE: answer in English.\n")

    agent = make_agent(store, ws, ScriptedModel(), config)

    system = agent.loop.system
    assert RULE in system and "LOOP-RULE" in system and "USER-RULE" in system
    assert system.count(RULE) == 1
    # The user's general file first, the project's (which take precedence) after it.
    assert system.index("USER-RULE") < system.index(RULE)
    notes = agent.context_notes()
    line = notes[0]
    assert line.startswith("Instructions: AGENTS.md (") and "AGENTLOOP.md (" in line
    assert f"{config / 'AGENTS.md'} (" in line and "CLAUDE.md" not in line
    tokens = {f.label: f.tokens for f in agent.instructions.files}
    assert all(count > 0 for count in tokens.values()) and len(tokens) == 3
    assert f"AGENTS.md (~{tokens['AGENTS.md']:,} tokens)" in line  # counted here: an estimate
    # Byte-stable: the same files give the same prompt (prompt caching keeps working).
    assert make_agent(store, ws, ScriptedModel(), config).loop.system == system


def test_an_instruction_file_over_its_budget_is_refused_with_a_warning(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "AGENTS.md").write_text("HUGE-RULE\n" + filler("padding", 3000))
    (ws / "CLAUDE.md").write_text(f"{RULE}\n")

    agent = make_agent(store, ws, ScriptedModel(), config, window=20_000)

    assert "HUGE-RULE" not in agent.loop.system  # refused whole, not truncated
    assert RULE in agent.loop.system
    warnings = [n for n in agent.context_notes() if "warning" in n]
    assert len(warnings) == 1
    assert "AGENTS.md was refused" in warnings[0] and "2,000 tokens" in warnings[0]


def test_instruction_files_that_lead_outside_or_are_binary_are_refused(
    store: SqliteSessionStore, ws: Path, config: Path, outside: Path
) -> None:
    (ws / "AGENTS.md").symlink_to(outside / "secret.txt")
    (ws / "CLAUDE.md").write_bytes(b"\x00\x01binary")
    agent = make_agent(store, ws, ScriptedModel(), config)
    assert "top-secret" not in agent.loop.system
    assert agent.instructions.files == ()
    text = "\n".join(agent.context_notes())
    assert "AGENTS.md was not read" in text and "outside the workspace" in text
    assert "CLAUDE.md was refused: it is a binary file" in text
    assert agent.context_notes()[0].startswith("Instructions: none")


def test_an_agents_md_rule_reaches_every_request_after_several_compactions(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "AGENTS.md").write_text(f"{RULE}\n")
    model = ScriptedModel(default=text_reply(filler("a long answer", 400)))
    agent = make_agent(store, ws, model, config, window=8_000)

    transitions = 0
    for n in range(14):
        transitions += len(agent.run_turn(filler(f"request {n}", 400)).transitions)

    assert transitions >= 3
    requests = conversation(model)
    assert len(requests) == 14
    assert all(RULE in request.system for request in requests)
    assert all(request.system == requests[0].system for request in requests)


# ------------------------------------------------------------------------------ file restore


def test_a_file_read_before_compaction_comes_back_as_it_is_now(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("VERSION = 1  # MARK-OLD\n")
    (ws / "src" / "util.py").write_text("UNCHANGED-MARK\n")
    model = ScriptedModel(
        [
            tool_reply(
                tool_call("read_file", {"path": "src/util.py"}),
                tool_call("read_file", {"path": "src/app.py"}),
            ),
            "read",
        ]
    )
    agent = make_agent(store, ws, model, config)
    agent.run_turn("look at src/")
    # Someone edits the file after the agent saw it.
    (ws / "src" / "app.py").write_text("VERSION = 2  # MARK-NEW\n")
    work_then_compact(agent, model)

    model.add("continuing")
    agent.run_turn("go on")

    first_after = conversation(model)[-1]
    state = preserved_state(first_after)
    assert f"### src/app.py — {RESTORE_MARK} (changed on disk since you last saw it)" in state
    assert f"### src/util.py — {RESTORE_MARK}\n" in state
    assert "MARK-NEW" in state and "UNCHANGED-MARK" in state
    assert "MARK-OLD" not in request_text(first_after)
    assert state.index("### src/app.py") < state.index("### src/util.py")  # newest first
    assert agent.context_notes()[-1].startswith(
        "Files restored after the last compaction: src/app.py, src/util.py ("
    )


def test_binary_and_over_budget_files_never_come_back(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    # Under the size that is refused unread, over the budget once counted (1,000 tokens).
    (ws / "big.txt").write_text("BIG-MARK\n" + filler("bulk", 1200) + "\n")
    (ws / "small.txt").write_text("SMALL-MARK\n")
    model = ScriptedModel(
        [
            tool_reply(
                tool_call("write_file", {"path": "blob.bin", "content": "BLOB-MARK\x00\x01"}),
                tool_call("read_file", {"path": "big.txt", "limit": 1}),
                tool_call("read_file", {"path": "small.txt"}),
            ),
            "done",
        ]
    )
    agent = make_agent(store, ws, model, config)
    agent.run_turn("look around")
    assert agent.recent_files.paths == ("small.txt", "big.txt", "blob.bin")
    work_then_compact(agent, model)
    model.add("next")
    agent.run_turn("next")

    state = preserved_state(conversation(model)[-1])
    assert "SMALL-MARK" in state
    assert "BIG-MARK" not in state and "BLOB-MARK" not in state
    notes = agent.context_notes()
    assert notes[-2].startswith("Files restored after the last compaction: small.txt (")
    assert "big.txt (over the budget" in notes[-1] and "blob.bin (binary)" in notes[-1]


def test_restored_files_are_newest_first_counted_and_never_outside_or_instructions(
    store: SqliteSessionStore, ws: Path, config: Path, outside: Path
) -> None:
    (ws / "AGENTS.md").write_text(f"{RULE}\n")
    for name in ("a", "b", "c", "d"):
        (ws / f"{name}.txt").write_text(f"FILE-{name.upper()}\n")
    reads = [tool_call("read_file", {"path": p}) for p in ("a.txt", "b.txt", "c.txt")]
    reads += [tool_call("read_file", {"path": p}) for p in ("AGENTS.md", "d.txt")]
    model = ScriptedModel([tool_reply(*reads), "read them"])
    agent = make_agent(store, ws, model, config, restore_files=2)
    agent.run_turn("read the files")
    (ws / "d.txt").unlink()
    (ws / "d.txt").symlink_to(outside / "secret.txt")  # now leads outside
    work_then_compact(agent, model)
    model.add("ok")
    agent.run_turn("next")

    restored = agent.restored
    assert restored is not None
    assert restored.restored == ("c.txt", "b.txt")
    assert dict(restored.skipped) == {
        "d.txt": "outside the workspace",
        "AGENTS.md": "already carried elsewhere",
    }
    first_after = request_text(conversation(model)[-1])
    assert first_after.index("FILE-C") < first_after.index("FILE-B")
    assert "FILE-A" not in first_after and "top-secret" not in first_after


def test_a_restore_budget_of_zero_turns_it_off(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "a.txt").write_text("FILE-A\n")
    model = ScriptedModel([tool_reply(tool_call("read_file", {"path": "a.txt"})), "ok"])
    agent = make_agent(store, ws, model, config, restore_budget_tokens=0)
    agent.run_turn("read a.txt")
    work_then_compact(agent, model)
    model.add("ok")
    agent.run_turn("next")
    assert RESTORE_MARK not in request_text(conversation(model)[-1])
    assert agent.context_notes()[-1] == "Files restored after compaction: off"


def test_the_request_after_each_compaction_stays_under_the_trigger(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "AGENTS.md").write_text(f"{RULE}\n")
    for n in range(4):
        (ws / f"m{n}.py").write_text(filler(f"module {n}", 150) + "\n")
    script: list[Any] = []
    for n in range(12):
        script.append(tool_reply(tool_call("read_file", {"path": f"m{n % 4}.py"})))
        script.append(text_reply(filler(f"answer {n}", 300)))
    model = ScriptedModel(script)
    agent = make_agent(store, ws, model, config, window=8_000)

    transitions = []
    for n in range(12):
        transitions += agent.run_turn(filler(f"request {n}", 300)).transitions

    assert len(transitions) >= 2
    trigger = agent.compacter.trigger_tokens
    for transition in transitions:
        assert transition.summary.tokens_after < trigger
        assert RESTORE_MARK in request_text_of(transition.compacted_messages)


def request_text_of(messages: Any) -> str:
    return "\n".join(str(b.get("text", "")) for m in messages for b in m.content)


def test_a_file_with_a_non_utf8_name_is_restored_and_its_name_saved(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    with open(os.fsencode(ws) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"MENU-MARK\n")
    model = ScriptedModel([tool_reply(tool_call("read_file", {"path": "caf\\xe9.txt"})), "ok"])
    agent = make_agent(store, ws, model, config)
    agent.run_turn("read the menu")
    work_then_compact(agent, model)  # saves the metadata: it must be valid UTF-8

    assert agent.recent_files.paths == ("caf\\xe9.txt",)
    assert agent.restored is not None and agent.restored.restored == ("caf\\xe9.txt",)
    saved = store.get_session(agent.session_id).metadata
    assert saved["restored_files"]["restored"] == ["caf\\xe9.txt"]


# ------------------------------------------------------------------------ metadata and resume


def test_tracked_and_restored_files_are_saved_and_come_back_on_resume(
    store: SqliteSessionStore, ws: Path, config: Path
) -> None:
    (ws / "AGENTS.md").write_text(f"{RULE}\n")
    (ws / "notes.md").write_text("NOTES-MARK\n")
    model = ScriptedModel([tool_reply(tool_call("read_file", {"path": "notes.md"})), "read"])
    agent = make_agent(store, ws, model, config)
    agent.run_turn("read the notes")
    work_then_compact(agent, model)

    saved = store.get_session(agent.session_id).metadata
    assert [f["path"] for f in saved["recent_files"]["files"]] == ["notes.md"]
    assert saved["restored_files"]["restored"] == ["notes.md"]
    assert saved["instructions"]["files"][0]["label"] == "AGENTS.md"

    resumed_model = ScriptedModel(["resumed"])
    resumed = make_agent(store, ws, resumed_model, config, resume=agent.session_id)
    assert resumed.recent_files.paths == ("notes.md",)
    # The same notes (token figures aside: the calibration has learnt since the first start).
    assert resumed.context_notes()[1:] == agent.context_notes()[1:]
    assert resumed.context_notes()[0].startswith("Instructions: AGENTS.md (")
    assert resumed.loop.system == agent.loop.system
    resumed_model.add(*[text_reply(filler(f"more {n}", 300)) for n in range(4)])
    for n in range(4):
        resumed.run_turn(filler(f"more work {n}", 300))
    outcome = resumed.compact()
    assert outcome is not None and outcome.transition is not None
    assert "NOTES-MARK" in request_text_of(outcome.transition.compacted_messages)


# ------------------------------------------------------------------- the hook as a library piece


def test_recent_files_hook_works_on_its_own(ws: Path) -> None:
    (ws / "x.py").write_text("print('x')  # X-MARK\n")
    (ws / "y.py").write_text("Y-MARK\n")
    tracker = RecentFiles(ws)
    tracker.record("read_file", {"path": "x.py"}, is_error=False)
    tracker.record("read_file", {"path": "y.py"}, is_error=True)  # failed calls do not count
    tracker.record("grep", {"path": "y.py"}, is_error=False)  # nor do other tools

    hook = recent_files_hook(ws, tracker, budget_tokens=500, count=3)

    text = hook.render()
    assert hook.name == "recent files"
    assert f"### x.py — {RESTORE_MARK}" in text and "X-MARK" in text
    assert "Y-MARK" not in text
    assert recent_files_hook(ws, tracker, budget_tokens=0).render() == ""


def test_a_restored_file_is_fenced_so_its_own_backticks_cannot_close_it(ws: Path) -> None:
    (ws / "README.md").write_text("```python\ncode\n```\n")
    tracker = RecentFiles(ws)
    tracker.touch("README.md")
    restorer = FileRestorer(ws, tracker, budget_tokens=500)
    text = restorer.render()
    assert "````\n```python\ncode\n```\n````" in text
    assert restorer.last is not None and restorer.last.restored == ("README.md",)


def test_saved_recent_files_are_checked(ws: Path) -> None:
    for bad in (
        {"files": "x"},
        {"files": [{"path": 3}]},
        {"files": [{"path": "a", "signature": [1]}]},
    ):
        with pytest.raises(ToolStateError):
            RecentFiles.from_dict(bad, ws)
    tracker = RecentFiles(ws, limit=2)
    for name in ("a", "b", "c", "b"):
        (ws / name).write_text(name)
        tracker.touch(name)
    assert tracker.paths == ("b", "c")
    assert RecentFiles.from_dict(tracker.to_dict(), ws).files == tracker.files
