"""The agent's public face: the command line reads and calls only ``CodingAgent``'s
own members, events reach every subscriber through one fan-out (the agent's books first), and
the compacter and the loop share one wiring instead of copying it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from support.agents import coding_agent

from agentloop import AgentLoop, CompactionSettings, ConversationCompacter, LoopEvents, ToolResult
from agentloop._agent.agent import CodingAgent
from agentloop._core.compaction.results import CompactionTransition
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply
from sessions import SqliteSessionStore, open_store

ROOT = Path(__file__).resolve().parent.parent
BEHIND_THE_FACE = {"loop", "compacter", "runtime", "restorer"}


def _reaches_behind(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in BEHIND_THE_FACE:
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr":
            found.append(f"{path.name}:{node.lineno} hasattr()")
    return found


def test_the_command_line_uses_only_the_agents_face() -> None:
    reaches = [
        hit
        for path in sorted((ROOT / "agentloop" / "_cli").glob("*.py"))
        for hit in _reaches_behind(path)
    ]
    assert reaches == []


def test_the_checker_sees_a_reach_behind_the_face(tmp_path: Path) -> None:
    sample = tmp_path / "face.py"
    sample.write_text("def f(agent):\n    return agent.loop.messages, hasattr(agent, 'x')\n")
    assert sorted(_reaches_behind(sample)) == ["face.py:2 .loop", "face.py:2 hasattr()"]


class _Recorder(LoopEvents):
    def __init__(self, agent: CodingAgent | None = None) -> None:
        self.agent = agent
        self.seen: list[str] = []
        self.history_when_seen: list[int] = []

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        self.seen.append(f"tool {name}")
        if self.agent is not None:  # the agent's books are kept before a face hears it
            self.history_when_seen.append(len(self.agent.history.to_dict().get("calls", [])))

    def on_transition(self, transition: CompactionTransition) -> None:
        self.seen.append("transition")

    def on_warning(self, message: str) -> None:
        self.seen.append(f"warning {message}")


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return open_store(tmp_path / "sessions.db")


def test_every_subscriber_hears_the_agents_events_after_its_books(
    store: SqliteSessionStore, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    model = ScriptedModel(
        [tool_reply(tool_call("read_file", {"path": "notes.txt"})), text_reply("read")]
    )
    agent = coding_agent(store, tmp_path, model)
    first, second = _Recorder(agent), _Recorder()
    agent.subscribe(first)
    unsubscribe = agent.subscribe(second)
    agent.run_turn("read notes.txt")
    assert first.seen == ["tool read_file"] and second.seen == ["tool read_file"]
    assert first.history_when_seen == [1]
    assert agent.saved and not agent.unsaved and len(agent.messages) == 4
    decision = agent.context()
    assert decision is not None and decision.usage.tokens > 0
    status = agent.compaction_status()
    assert status.enabled and status.trigger_tokens == decision.trigger_tokens
    unsubscribe()
    model.add("again")
    agent.run_turn("once more")
    assert second.seen == ["tool read_file"]


def test_a_warning_nobody_hears_is_still_warned() -> None:
    model = ScriptedModel([text_reply("ok")])
    loop = AgentLoop(model=model, model_name="m")
    with pytest.warns(UserWarning, match="said to nobody"):
        loop.events.on_warning("said to nobody")
    heard = _Recorder()
    loop.subscribe(heard)
    loop.events.on_warning("said to someone")
    assert heard.seen == ["warning said to someone"]


def test_the_compacter_and_its_loop_share_one_wiring() -> None:
    ids = iter(f"session-{n}" for n in range(10))
    compacter = ConversationCompacter(
        model_name="m",
        context_window=200_000,
        new_session_id=lambda: next(ids),
        settings=CompactionSettings(strategy="sliding_window"),
    )
    loop = AgentLoop(model=ScriptedModel([]), model_name="m", compacter=compacter)
    assert loop.session_id == "session-0"
    assert loop.runtime.wiring is compacter.wiring
    compacter.wiring.new_session_id = lambda: "injected-later"
    assert loop.runtime.wiring.new_session_id() == "injected-later"
