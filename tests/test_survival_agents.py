"""What survives a compaction in sessions of other agents' tools: the corpus
in the shapes of Claude Code, pi, OpenHands and Codex is what it claims to be, the measure
judges a context by the generator's own record, and the targets of
``benchmarks/survival_agents.py`` hold through the public ``compact_and_transition``."""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from transcripts.other_agents import OTHER_AGENTS, AgentSession, Happened, other_agent_session

from agentloop import Message, as_messages
from agentloop._core.facts import preserved_state
from agentloop._core.values.ledger_values import Ledger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import survival_agents

SHAPES = tuple(OTHER_AGENTS)


def _calls(session: AgentSession) -> list[tuple[str, dict[str, object], str, bool]]:
    uses = {}
    out = []
    for message in session.transcript.messages:
        for block in message["content"]:
            if block["type"] == "tool_use":
                uses[block["id"]] = (block["name"], block["input"])
            elif block["type"] == "tool_result":
                name, tool_input = uses.pop(block["tool_use_id"])
                out.append((name, tool_input, block["content"], bool(block.get("is_error"))))
    assert not uses  # every call answered
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_a_session_is_valid_deterministic_and_sized_like_a_real_span(shape: str) -> None:
    session = other_agent_session(shape, 3, 320)  # type: ignore[arg-type]
    messages = session.transcript.messages
    as_messages(messages)  # valid content blocks
    assert messages[0]["role"] == messages[-1]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(messages))
    assert session == other_agent_session(shape, 3, 320)  # type: ignore[arg-type]
    assert session != other_agent_session(shape, 4, 320)  # type: ignore[arg-type]
    paths = {h.path for h in session.record if h.kind == "path"}
    runs = Counter(h.command for h in session.record if h.kind == "command")
    assert 10 <= len(paths) <= 30 and 30 <= len(runs) <= 80
    assert runs["pytest -x tests"] >= 5  # the same command, many times
    exits = [h.exit_code for h in session.record if h.command == "pytest -x tests"]
    assert 1 in exits and exits[-1] == 0  # failing, then passing
    assert len(json.dumps(messages)) > 150_000  # long outputs
    actions = {h.action for h in session.record if h.kind == "path"}
    assert {"read", "read_part", "created", "edited"} <= actions
    todos = [h for h in session.record if h.kind == "todo"]
    assert (not todos) if shape == "pi" else len(todos) >= 10
    assert any(r.kind == "steering" for r in session.transcript.facts.requests)
    parallel = [
        m for m in messages if sum(b["type"] == "tool_use" for b in m["content"]) > 1
    ]  # reads sent together, answered together
    assert (not parallel) if shape == "openhands" else parallel


def test_the_shapes_use_their_agents_tool_names_keys_and_result_texts() -> None:
    names = {s: {c[0] for c in _calls(other_agent_session(s, 0, 200))} for s in SHAPES}
    assert names["claude_code"] >= {"Read", "Edit", "Write", "Bash", "TodoWrite"}
    assert names["pi"] == {"read", "edit", "write", "bash"}
    assert names["openhands"] >= {"str_replace_editor", "execute_bash", "task_tracker"}
    assert names["codex"] >= {"shell", "apply_patch", "update_plan"}
    for name, tool_input, text, is_error in _calls(other_agent_session("claude_code", 0, 200)):
        if name == "Read":
            assert str(tool_input["file_path"]).startswith("/home/dev/shop/")
            assert "\u2192" in text.split("\n", 1)[0]
        if name == "Bash" and is_error:
            assert text.startswith("Exit code ")
    failed = [c for c in _calls(other_agent_session("pi", 0, 200)) if c[0] == "bash" and c[3]]
    assert failed and all(
        re.search(r"(^|\n\n)Command exited with code [1-9]\d*$", c[2]) for c in failed
    )
    for name, _, text, is_error in _calls(other_agent_session("openhands", 0, 200)):
        assert not is_error  # OpenHands says it in the text only
        if name == "execute_bash":
            assert "[The command completed with exit code " in text
    for name, tool_input, text, _ in _calls(other_agent_session("codex", 0, 200)):
        if name == "shell":
            assert tool_input["command"][:2] == ["bash", "-lc"]  # type: ignore[index]
            assert "exit_code" in json.loads(text)["metadata"]
        if name == "apply_patch":
            assert str(tool_input["input"]).startswith("*** Begin Patch\n*** ")


def test_the_truth_is_the_record_at_the_cut() -> None:
    record = (
        Happened(3, "a", "command", command="pytest -x tests", exit_code=1),
        Happened(5, "b", "path", path="src/x.py", action="read"),
        Happened(7, "c", "path", path="src/x.py", action="edited"),
        Happened(9, "d", "command", command="pytest -x tests", exit_code=0),
        Happened(9, "e", "todo", todos=(("fix x", "completed"), ("lint", "in_progress"))),
    )
    t = survival_agents.truth(record, 0, 6, cut=10)
    assert t.paths == ("src/x.py",) and t.commands == {"pytest -x tests": (0, "d")}
    assert t.changed == {"src/x.py": True} and t.todos == {}  # no todo call in the span
    early = survival_agents.truth(record, 0, 6, cut=8)
    assert early.commands == {"pytest -x tests": (1, "a")}


def _context(text: str) -> survival_agents.Context:
    return survival_agents.context_of([Message.user(text)], summary="")


def test_the_measure_wants_the_right_exit_code_and_state_on_the_commands_line() -> None:
    seen = _context("### Commands\n- pytest -x tests ×7, last exit 1\n- mypy src/a.py: ok")
    assert survival_agents.command_held("pytest -x tests", 1, "x", seen)
    assert not survival_agents.command_held("pytest -x tests", 0, "x", seen)
    assert survival_agents.command_held("mypy src/a.py", 0, "x", seen)
    longer = _context("- exit 1: pytest -x tests/test_a.py -q\n- exit 2: mypy src/a.py --strict")
    assert not survival_agents.command_held("pytest -x tests", 1, "x", longer)
    assert not survival_agents.command_held("mypy src/a.py", 2, "x", longer)
    todos = _context("- [x] fix x\n- [ ] (in progress) lint")
    assert survival_agents.todo_held("fix x", "completed", "x", todos)
    assert survival_agents.todo_held("lint", "in_progress", "x", todos)
    assert not survival_agents.todo_held("lint", "pending", "x", todos)
    t = survival_agents.Truth(
        paths=("src/a.py",),
        commands={"pytest -x tests": (0, "x")},
        todos={"lint": "completed"},
        todo_call="y",
        changed={"src/a.py": True},
    )
    stale = survival_agents.stale(
        t,
        _context("- pytest -x tests: exit 1\n- [ ] lint\n- read · unchanged since read: src/a.py"),
    )
    assert len(stale) == 3


def test_a_cut_fact_counts_found_only_by_the_search_its_section_names() -> None:
    notes = (
        "### Files\n- edited: a.py\n- … 3 older left out: search_history 'shop files'\n"
        '### Commands\n- … 9 older left out: search_history "pytest mypy" · "git diff"'
    )
    assert survival_agents.hints(notes) == {
        "paths": ["shop files"],
        "commands": ["pytest mypy", "git diff"],
        "todos": [],
    }


def test_without_the_ledger_the_measure_sees_the_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preserved_state, "ledger_fitted", lambda *args, **kwargs: Ledger())
    rows = survival_agents.measure(seeds=(1,), size=120, windows=(60_000,), shapes=("codex",))
    misses = " ".join(rows[0].misses())
    assert "paths" in misses and "commands" in misses and "todos" in misses


def test_the_targets_hold_at_windows_of_40k_and_more_after_5_successive_compactions() -> None:
    rows = survival_agents.measure(seeds=(1,), size=200, windows=(200_000, 60_000))
    assert len(rows) == len(SHAPES) * 2
    assert all(row.compactions == 5 for row in rows)
    for row in rows:
        assert row.each["paths"].facts and row.each["commands"].facts
        assert row.each["todos"].facts or row.shape == "pi"
    misses = [miss for row in rows for miss in row.misses()]
    assert misses == [], "\n".join(misses)
    assert survival_agents.table(rows).startswith("| agent shape | window |")


def test_at_16k_every_cut_fact_is_found_by_the_search_the_ledger_names() -> None:
    rows = survival_agents.measure(seeds=(1,), size=200, windows=(16_000,))
    assert all(row.compactions == 5 for row in rows)
    assert sum(t.cut for row in rows for t in row.each.values()) > 0  # a small window cuts
    misses = [miss for row in rows for miss in row.misses()]
    assert misses == [], "\n".join(misses)
