"""What the agent learns and keeps must really be learnt and kept: the calibration, the session
metadata, the todos across a resume, and pinned messages in what the summarizer reads.

Each test here would fail if the feature it names were deleted (they were written against
mutations of the code that the rest of the suite did not notice).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agents import coding_agent

from agentloop import (
    AgentLoop,
    Calibration,
    CompactionSettings,
    ConversationCompacter,
    Message,
    ModelRequest,
)
from agentloop.testing import (
    FunctionModel,
    ScriptedModel,
    summary_input,
    text_reply,
    tool_call,
    tool_reply,
)
from sessions import SqliteSessionStore, open_store

MODEL = "claude-sonnet-5-5"
TODOS = [
    {"content": "Reproduce the parser bug", "status": "completed"},
    {"content": "Fix the tokenizer edge case", "status": "in_progress"},
]


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return open_store(tmp_path / "sessions.db")


def test_the_loop_teaches_the_calibration_what_the_api_counted() -> None:
    # The API counts twice what tiktoken estimates (as it does for some content).
    model = ScriptedModel([text_reply("ok")], input_token_factor=2.0)
    compacter = ConversationCompacter(
        model_name=MODEL, context_window=100_000, model=model, calibration=Calibration()
    )
    loop = AgentLoop(model=model, model_name=MODEL, compacter=compacter, system="Be brief.")
    loop.run_turn("please summarise the design document " * 20)

    learnt = compacter.calibration
    assert isinstance(learnt, Calibration)
    assert learnt.samples == 1
    assert learnt.ratio == pytest.approx(2.0, rel=0.02)


def test_todos_tool_history_and_calibration_are_saved_and_come_back_on_resume(
    store: SqliteSessionStore, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [
            tool_reply(tool_call("todo_write", {"todos": TODOS})),
            text_reply("planned"),
            *[text_reply(f"finding {n}: " + "the lexer splits tokens " * 60) for n in range(4)],
        ],
        input_token_factor=1.5,
    )
    agent = coding_agent(store, tmp_path, model)
    agent.run_turn("plan the fix")
    for n in range(4):
        agent.run_turn(f"look at module {n} " * 40)

    saved = store.get_session(agent.session_id).metadata
    assert [item["content"] for item in saved["todos"]["todos"]] == [t["content"] for t in TODOS]
    assert saved["tool_history"]["calls"][-1]["name"] == "todo_write"
    assert saved["calibration"]["samples"] == 6

    # A new process resumes: the todos are back, and they reach the next compacted context.
    resumed_model = ScriptedModel([text_reply("continuing")])
    resumed = coding_agent(store, tmp_path, resumed_model, resume=agent.session_id)
    assert [item.content for item in resumed.todos.items] == [t["content"] for t in TODOS]
    calibration = resumed.compacter.calibration
    assert calibration is not None and calibration.samples == 6
    outcome = resumed.compact()
    assert outcome is not None and outcome.transition is not None, outcome
    prefix = outcome.transition.compacted_messages[0]
    state = next(b["text"] for b in prefix.content if "<preserved-state>" in b.get("text", ""))
    assert "(in progress) Fix the tokenizer edge case" in state


def test_a_session_nobody_spoke_in_is_not_stored(store: SqliteSessionStore, tmp_path: Path) -> None:
    agent = coding_agent(store, tmp_path, ScriptedModel([]))
    agent.save_state()
    assert store.list_sessions() == []


def test_the_summarizer_reads_pinned_messages(tmp_path: Path) -> None:
    seen: list[str] = []

    def summarize(request: ModelRequest) -> str:
        seen.append(summary_input(request))
        return "## Goal\nkeep going"

    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=200_000,
        model=FunctionModel(summarize),
        settings=CompactionSettings(strategy="summarize"),
    )
    history = [
        Message.user("Never touch the vendored directory third_party/.", pinned=True),
        Message.assistant("Understood."),
        *[
            m
            for n in range(6)
            for m in (Message.user(f"step {n} " * 50), Message.assistant(f"did {n} " * 50))
        ],
    ]
    transition = compacter.compact_and_transition("s", history, force=True)

    assert transition is not None
    assert len(seen) == 1
    assert "User (pinned): Never touch the vendored directory third_party/." in seen[0]
