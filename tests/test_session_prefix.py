"""A session keeps its prefix: the system prompt and the tool definitions are stored
with the session and reused byte for byte on resume and in a compaction's child; a changed
instruction file reaches the model as an appended message, and the user is told once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agents import coding_agent

from agentloop._adapters.records import from_record
from agentloop._agent.agent import CodingAgent
from agentloop._agent.session_prefix import (
    PREFIX_KEY,
    REMOVED,
    UPDATE_INTRO,
    StoredPrefix,
    changed_labels,
    instructions_seen,
    update_text,
)
from agentloop._core.compaction.api_compaction import accepts_system_messages
from agentloop._core.values.messages import Message
from agentloop._core.values.model import ModelRequest
from agentloop.testing import ScriptedModel, tool_call, tool_reply
from sessions import SessionStore, open_store

OLD_RULE = "RULE-OLD-3301: answer in English."
NEW_RULE = "RULE-NEW-7702: answer in French."


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return open_store(tmp_path / "sessions.db")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("AGENTLOOP_CONFIG_DIR", str(config))
    (path / "AGENTS.md").write_text(f"# Rules\n{OLD_RULE}\n")
    return path.resolve()


class Warnings:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def on_warning(self, message: str) -> None:
        self.lines.append(message)


def _agent(store: SessionStore, ws: Path, model: ScriptedModel, **options: Any) -> CodingAgent:
    return coding_agent(store, ws, model, **options)


def _texts(message: Message) -> str:
    return json.dumps(list(message.content))


def _updates(request: ModelRequest) -> list[tuple[int, Message]]:
    return [
        (i, m)
        for i, m in enumerate(request.messages)
        if UPDATE_INTRO in _texts(m) or REMOVED in _texts(m)
    ]


# -- the pure rules --------------------------------------------------------------------------


def test_which_models_take_mid_conversation_system_messages() -> None:
    yes = [
        "claude-sonnet-5-5",
        "claude-opus-5-5",
        "claude-haiku-5-5",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-fable-5-1",
        "claude-mythos-5",
        "anthropic.claude-sonnet-5-5-v1:0",
    ]
    no = [
        "claude-sonnet-5",
        "claude-sonnet-4-6",
        "claude-opus-4-6",
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "claude-3-5-sonnet-20241022",
        "gpt-5",
    ]
    assert [m for m in yes if not accepts_system_messages(m)] == []
    assert [m for m in no if accepts_system_messages(m)] == []


def test_the_newest_update_in_the_history_is_what_the_model_reads() -> None:
    first = update_text('<instructions file="AGENTS.md" scope="project">\nA\n</instructions>')
    history = [
        Message.user("hello"),
        Message.system(first),
        Message.assistant("hi"),
        Message.user([{"type": "text", "text": "next"}, {"type": "text", "text": REMOVED}]),
        Message.assistant("ok"),
    ]
    assert instructions_seen(history, "in system") == ""
    assert instructions_seen(history[:3], "in system") == first.split("\n\n", 1)[1]
    assert instructions_seen(history[:1], "in system") == "in system"
    # Someone quoting the text in a reply does not count.
    assert instructions_seen([Message.user("x"), Message.assistant(first)], "s") == "s"


def test_changed_labels_name_the_files_that_differ() -> None:
    def section(label: str, text: str) -> str:
        return f'<instructions file="{label}" scope="project">\n{text}\n</instructions>'

    before = "\n\n".join([section("AGENTS.md", "a"), section("CLAUDE.md", "c")])
    after = "\n\n".join([section("AGENTS.md", "b"), section("AGENTLOOP.md", "n")])
    assert changed_labels(before, after) == ["AGENTS.md", "AGENTLOOP.md", "CLAUDE.md"]
    assert changed_labels(before, before) == []


def test_a_damaged_prefix_entry_is_ignored() -> None:
    assert StoredPrefix.from_metadata({}) is None
    assert StoredPrefix.from_metadata({PREFIX_KEY: {"system": 3}}) is None
    assert StoredPrefix.from_metadata({PREFIX_KEY: {"system": "s", "tools": "x"}}) is None
    good = StoredPrefix("s", ({"name": "t"},), "i")
    assert StoredPrefix.from_metadata({PREFIX_KEY: good.to_dict()}) == good


# -- the agent -------------------------------------------------------------------------------


def test_resume_after_agents_md_changed_keeps_the_prefix_and_appends_the_new_text(
    store: SessionStore, ws: Path
) -> None:
    model = ScriptedModel(["first answer"])
    agent = _agent(store, ws, model)
    agent.run_turn("hello")
    first = model.requests[-1]
    assert OLD_RULE in first.system
    saved = store.get_session(agent.session_id).metadata[PREFIX_KEY]
    assert saved["system"] == first.system and saved["tools"] == list(first.tools)

    (ws / "AGENTS.md").write_text(f"# Rules\n{NEW_RULE}\n")
    resumed_model = ScriptedModel(["second answer", "third answer"])
    heard = Warnings()
    resumed = _agent(store, ws, resumed_model, resume=agent.session_id, events=heard)
    assert resumed.instructions_notice == (
        "AGENTS.md changed since this session started: the new text was added to the conversation"
    )
    resumed.run_turn("and now?")
    request = resumed_model.requests[-1]
    # Byte for byte the first request's prefix: every stored thinking block stays valid.
    assert request.system == first.system and request.tools == first.tools
    assert NEW_RULE not in request.system
    # The new text follows the new user message as a system message, the history unchanged.
    assert [m.role for m in request.messages[-3:]] == ["assistant", "user", "system"]
    assert request.messages[0].content == first.messages[0].content
    ((index, update),) = _updates(request)
    assert index == len(request.messages) - 1 and NEW_RULE in update.text
    assert OLD_RULE not in update.text
    assert heard.lines == []  # told once, by the front end on resume

    resumed.run_turn("once more")
    again = resumed_model.requests[-1]
    assert len(_updates(again)) == 1  # given once: it stays where it was put
    assert [m.content for m in again.messages[: len(request.messages)]] == [
        m.content for m in request.messages
    ]

    # Stored as a system message: a later resume sees it and adds nothing.
    records = store.get_messages(resumed.session_id)
    assert [from_record(r).role for r in records].count("system") == 1
    third_model = ScriptedModel(["fourth"])
    third = _agent(store, ws, third_model, resume=resumed.session_id)
    assert third.instructions_notice is None
    third.run_turn("still there?")
    assert len(_updates(third_model.requests[-1])) == 1
    assert third_model.requests[-1].system == first.system


def test_a_model_without_system_messages_gets_the_text_in_the_user_message(
    store: SessionStore, ws: Path
) -> None:
    model = ScriptedModel(["one"])
    agent = _agent(store, ws, model)
    agent.run_turn("hello")
    (ws / "AGENTS.md").unlink()
    resumed_model = ScriptedModel(["two"])
    resumed = _agent(store, ws, resumed_model, resume=agent.session_id)
    resumed.loop.model_name = "claude-sonnet-4-6"
    resumed.run_turn("go on")
    request = resumed_model.requests[-1]
    assert request.system == model.requests[-1].system
    last = request.messages[-1]
    assert last.role == "user"
    assert [b["text"] for b in last.content] == ["go on", REMOVED]


def test_a_change_during_the_session_is_told_once_and_given_once(
    store: SessionStore, ws: Path
) -> None:
    model = ScriptedModel(["one", "two", "three"])
    heard = Warnings()
    agent = _agent(store, ws, model, events=heard)
    agent.run_turn("hello")
    (ws / "AGENTS.md").write_text(f"# Rules\n{NEW_RULE}\n")
    agent.run_turn("again")
    agent.run_turn("and again")
    assert heard.lines == [
        "AGENTS.md changed since this session started: the new text was added to the conversation"
    ]
    assert len({r.system for r in model.requests}) == 1
    assert len(_updates(model.requests[-1])) == 1


def test_a_compaction_child_keeps_the_prefix_and_the_update_comes_back_after_a_summary(
    store: SessionStore, ws: Path
) -> None:
    long = " ".join(f"word{n}" for n in range(400))
    model = ScriptedModel([f"answer {n}: {long}" for n in range(8)])
    heard = Warnings()
    agent = _agent(store, ws, model, events=heard)
    agent.run_turn(f"hello {long}")
    (ws / "AGENTS.md").write_text(f"# Rules\n{NEW_RULE}\n")
    agent.run_turn(f"the rules changed {long}")
    for n in range(3):
        agent.run_turn(f"more {n} {long}")
    parent = agent.session_id
    outcome = agent.compact()
    assert outcome is not None and outcome.transition is not None
    child = agent.session_id
    assert child != parent
    assert (
        store.get_session(child).metadata[PREFIX_KEY]
        == store.get_session(parent).metadata[PREFIX_KEY]
    )
    assert not any(UPDATE_INTRO in _texts(m) for m in agent.messages)  # summarized away
    agent.run_turn("after the compaction")
    request = model.requests[-1]
    assert request.system == model.requests[0].system
    assert request.tools == model.requests[0].tools
    # Summarized away, the update no longer applies: it is given again, not told again.
    ((index, _update),) = _updates(request)
    assert index == len(request.messages) - 1
    assert len(heard.lines) == 1


def test_a_resumed_session_keeps_its_tools_and_answers_a_retired_one_with_an_error(
    store: SessionStore, ws: Path
) -> None:
    model = ScriptedModel(["one"])
    agent = _agent(store, ws, model)
    agent.run_turn("hello")
    prefix = store.get_session(agent.session_id).metadata[PREFIX_KEY]
    retired = {"name": "retired_tool", "description": "gone", "input_schema": {"type": "object"}}
    prefix["tools"] = [*prefix["tools"][1:], retired]  # one dropped, one agentloop lacks
    store.update_session(agent.session_id, metadata={PREFIX_KEY: prefix})

    call = tool_call("retired_tool", {})
    resumed_model = ScriptedModel([tool_reply(call), "done"])
    resumed = _agent(store, ws, resumed_model, resume=agent.session_id)
    resumed.run_turn("use it")
    first, second = resumed_model.requests
    assert list(first.tools) == prefix["tools"] == list(second.tools)
    (result,) = second.messages[-1].content
    assert result["tool_use_id"] == call["id"] and result["is_error"] is True
    assert "retired_tool" in str(result["content"])
