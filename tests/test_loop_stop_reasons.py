"""The loop and the 2026 API: max_tokens apart from the reply reserve, a refused thinking block
retried once with drop_block (kept, stored, told), refusals, a reply cut inside a tool call,
pause_turn, model_context_window_exceeded, thinking streamed to the events, ``--effort``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    context_exceeded_reply,
    cut_tool_reply,
    pause_reply,
    refusal_reply,
    text_reply,
    tool_reply,
)

from agentloop import AgentLoop, ConversationCompacter, FunctionTool, LoopEvents
from agentloop._adapters.anthropic import AnthropicModel
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.model import reply_max_tokens
from agentloop._errors import ConfigurationError, ThinkingBindingError
from agentloop._loop.stop_reasons import THINKING_METADATA_KEY, SessionThinking, cut_reply_line
from agentloop.testing import Reply, ScriptedModel, tool_call
from sessions import SqliteSessionStore

SONNET = "claude-sonnet-5-5"
SYSTEM = "You are a test agent."


class _Heard(LoopEvents):
    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.thinking: list[str] = []
        self.usage: list[CompactionDecision] = []
        self.incomplete: list[str] = []

    def on_warning(self, message: str) -> None:
        self.warnings.append(message)

    def on_thinking(self, delta: str) -> None:
        self.thinking.append(delta)

    def on_usage(self, decision: CompactionDecision) -> None:
        self.usage.append(decision)

    def on_reply_incomplete(self, reason: str) -> None:
        self.incomplete.append(reason)


def _note_tool(calls: list[dict[str, Any]]) -> FunctionTool:
    def note(text: str = "") -> str:
        calls.append({"text": text})
        return "noted"

    return FunctionTool(
        name="note",
        description="Record a note.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        function=lambda tool_input: note(**tool_input),
    )


def _loop(
    server: FakeAnthropicServer,
    *,
    window: int = 200_000,
    reserve: int = 2_400,
    store: SqliteSessionStore | None = None,
    tools: list[FunctionTool] | None = None,
    **options: Any,
) -> tuple[AgentLoop, _Heard]:
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=server.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=SONNET, context_window=window, model=model, max_output_tokens=reserve
    )
    heard = _Heard()
    loop = AgentLoop(
        model=model,
        model_name=SONNET,
        compacter=compacter,
        store=store,
        system=SYSTEM,
        tools=tools or [],
        max_tokens=reserve,
        events=heard,
        **options,
    )
    return loop, heard


# ---------------------------------------------------------------------------------------------
# max_tokens


def test_reply_max_tokens_rule() -> None:
    assert reply_max_tokens(2_400, 128_000, window=None, context=None) == 128_000
    assert reply_max_tokens(2_400, 128_000, window=16_000, context=10_000) == 6_000
    assert reply_max_tokens(2_400, 128_000, window=16_000, context=15_000) == 2_400  # reserve
    assert reply_max_tokens(8_192, None, window=None, context=None) == 32_000
    assert reply_max_tokens(2_400, 1_000, window=None, context=None) == 1_000  # the model's cap


def test_max_tokens_leaves_room_to_think_and_the_reserve_stays(
    fake_api: FakeAnthropicServer,
) -> None:
    fake_api.enqueue(text_reply("big window"))
    loop, _ = _loop(fake_api)
    loop.run_turn("hello")
    assert fake_api.message_requests[-1]["max_tokens"] == 128_000  # Sonnet 5.5's limit
    small, _ = _loop(fake_api, window=16_000)
    fake_api.enqueue(text_reply("small window"))
    small.run_turn("hello " * 2_000)
    sent = fake_api.message_requests[-1]["max_tokens"]
    context = fake_api.count_input_tokens(fake_api.message_requests[-1])
    assert 2_400 < sent <= 16_000 - context
    assert small.compacter is not None and small.compacter.max_output_tokens == 2_400
    assert fake_api.violations == []


def test_a_double_without_an_output_limit_gets_the_reserve() -> None:
    model = ScriptedModel(["hi"])
    loop = AgentLoop(model=model, model_name=SONNET, max_tokens=1_234)
    loop.run_turn("hello")
    assert model.requests[0].max_tokens == 1_234


# ---------------------------------------------------------------------------------------------
# A thinking block bound elsewhere


def test_binding_refusal_is_retried_once_with_drop_block(
    fake_api: FakeAnthropicServer, tmp_path: Path
) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    loop, heard = _loop(fake_api, store=store)
    fake_api.enqueue(text_reply("first"))
    loop.run_turn("hello")
    loop.system = SYSTEM + " (edited)"  # the prefix of the stored thinking changed
    fake_api.expect_refusals()
    fake_api.enqueue(text_reply("second"))
    result = loop.run_turn("again")
    assert result.text == "second"
    refused, retried = fake_api.message_requests[-2:]
    assert "block_binding" not in refused["thinking"]
    assert retried["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    assert loop.thinking.drop_block and loop.thinking.binding_retries == 1
    assert len(fake_api.refusals) == 1 and "bound to a different conversation" in heard.warnings[0]
    # Kept on for the rest of the session; stored as the session's metadata says.
    fake_api.enqueue(text_reply("third"))
    loop.run_turn("and again")
    assert "block_binding" in fake_api.message_requests[-1]["thinking"]
    restored = SessionThinking.from_metadata({THINKING_METADATA_KEY: loop.thinking.to_metadata()})
    assert restored.drop_block and restored.binding_retries == 1
    store.close()


def test_a_second_binding_refusal_is_raised() -> None:
    error = ThinkingBindingError("the API refused a thinking block sent back (400): bound to a")
    model = ScriptedModel([Reply(error=error), Reply(error=error)])
    heard = _Heard()
    loop = AgentLoop(model=model, model_name=SONNET, events=heard)
    with pytest.raises(ThinkingBindingError):
        loop.run_turn("hello")
    first, second = model.requests
    assert first.thinking is None
    assert second.thinking is not None and second.thinking.drop_block  # never the same body
    assert len(heard.warnings) == 1


def test_effort_is_validated_and_sent(fake_api: FakeAnthropicServer) -> None:
    with pytest.raises(ConfigurationError, match="effort"):
        AgentLoop(model=ScriptedModel(), model_name=SONNET, effort="extreme")
    loop, _ = _loop(fake_api, effort="low")
    fake_api.enqueue(text_reply("quick"))
    loop.run_turn("hello")
    assert fake_api.message_requests[-1]["output_config"] == {"effort": "low"}


# ---------------------------------------------------------------------------------------------
# Stop reasons


def test_a_refused_turn_leaves_the_context(fake_api: FakeAnthropicServer, tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    loop, heard = _loop(fake_api, store=store)
    fake_api.enqueue(text_reply("fine"), refusal_reply("cyber"), text_reply("after"))
    loop.run_turn("a normal question")
    result = loop.run_turn("a refused request")
    assert result.stop_reason == "refusal"
    assert "declined" in heard.warnings[-1] and "cyber" in heard.warnings[-1]
    assert "\n" not in heard.warnings[-1]
    loop.run_turn("something else")
    sent = str(fake_api.message_requests[-1]["messages"])
    assert "a refused request" not in sent and "a normal question" in sent
    stored = [m.content for m in store.get_messages(loop.session_id)]
    assert "a refused request" in str(stored) and "refused (cyber)" in str(stored)
    assert fake_api.violations == []
    store.close()


def test_a_tool_call_cut_by_max_tokens_is_redone_never_run() -> None:
    calls: list[dict[str, Any]] = []
    cut = Reply(content=(tool_call("note", {"te": ""}),), stop_reason="max_tokens")
    whole = Reply(content=(tool_call("note", {"text": "whole"}),))
    model = ScriptedModel([cut, whole, "done"])
    heard = _Heard()
    loop = AgentLoop(
        model=model, model_name=SONNET, tools=[_note_tool(calls)], max_tokens=1_000, events=heard
    )
    loop.run_turn("note something")
    assert calls == [{"text": "whole"}]  # the cut call never ran
    first, redo = model.requests[:2]
    assert redo.max_tokens == 2_000 and redo.messages == first.messages
    assert heard.incomplete and "max_tokens" in heard.incomplete[0]


def test_a_cut_tool_call_without_more_room_is_answered_not_run(
    fake_api: FakeAnthropicServer,
) -> None:
    calls: list[dict[str, Any]] = []
    loop, _ = _loop(fake_api, tools=[_note_tool(calls)])
    fake_api.enqueue(cut_tool_reply("note"), text_reply("I will try again later"))
    loop.run_turn("note something")
    assert calls == []
    answer = fake_api.message_requests[-1]["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and answer["is_error"] is True
    assert "not run" in str(answer["content"])
    assert fake_api.violations == []


def test_pause_turn_goes_on_without_compacting_in_between(
    fake_api: FakeAnthropicServer, tmp_path: Path
) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    loop, heard = _loop(fake_api, store=store)
    fake_api.enqueue(pause_reply("Searching the web."), text_reply("Found it."))
    result = loop.run_turn("search something")
    assert result.text == "Found it."
    paused_body, resumed_body = fake_api.message_requests[-2:]
    assert len(heard.usage) == 1  # measured (and maybe compacted) before the first only
    resumed_last = resumed_body["messages"][-1]
    assert resumed_last["role"] == "assistant"
    assert any(b["type"] == "server_tool_use" for b in resumed_last["content"])
    assert len(resumed_body["messages"]) == len(paused_body["messages"]) + 1
    # One turn in memory, both records in the store.
    assert [m.role for m in loop.messages] == ["user", "assistant"]
    assert [m.role for m in store.get_messages(loop.session_id)] == [
        "user",
        "assistant",
        "assistant",
    ]
    assert fake_api.violations == []
    store.close()


def test_context_window_exceeded_keeps_the_reply_and_compacts_next(
    fake_api: FakeAnthropicServer,
) -> None:
    loop, _ = _loop(fake_api)
    long = " ".join(f"word{n}" for n in range(3_000))
    fake_api.enqueue(text_reply(long), context_exceeded_reply("cut short"), text_reply("three"))
    loop.run_turn("first")
    loop.run_turn("second")
    assert loop.messages[-1].text == "cut short"  # kept
    result = loop.run_turn("third")
    assert result.transitions  # compacted before the next request
    assert "compaction" in fake_api.message_requests[-2]
    assert fake_api.violations == []


# ---------------------------------------------------------------------------------------------
# Thinking shown


def test_thinking_reaches_the_loop_events(fake_api: FakeAnthropicServer) -> None:
    loop, heard = _loop(fake_api)
    fake_api.enqueue(tool_reply(("note", {"text": "x"}), thinking="Planning the note."))
    fake_api.enqueue(text_reply("done"))
    loop.tools["note"] = _note_tool([])
    loop.tool_definitions.append(
        {
            "name": "note",
            "description": "Record a note.",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    )
    loop.run_turn("plan")
    assert "Planning the note." in "".join(heard.thinking)


def test_compaction_requests_think_as_the_session_does(fake_api: FakeAnthropicServer) -> None:
    loop, _ = _loop(fake_api, effort="medium", drop_block=True)
    long = " ".join(f"word{n}" for n in range(3_000))
    fake_api.enqueue(text_reply(long), text_reply("two"))
    loop.run_turn("first")
    loop.run_turn("second")
    loop.compact()
    compaction = fake_api.message_requests[-1]
    assert "compaction" in compaction
    assert compaction["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    assert compaction["output_config"] == {"effort": "medium"}
    assert fake_api.violations == []


# A reply that thinks and is then cut by max_tokens outside a tool call: the test server signs
# what comes back (a thinking block the reply never reached is not one it produced), so the cut
# reply goes back unchanged and is accepted; the loop keeps it, ends the turn with a notice.
ROOM = 40
"""The model's output limit here: one thinking block (24 tokens) and a few words of text."""
LONG = " ".join(f"word{n}" for n in range(200))


def _cut_after_text() -> Any:
    """Thinking, a long text, then a call (its progress-update thinking before it): what
    ``ROOM`` cuts inside the text, the second thinking block and the call never reached."""
    return tool_reply(("note", {"text": "x"}), text=LONG)


def test_a_reply_cut_after_its_first_thinking_block_goes_back_unchanged(
    fake_api: FakeAnthropicServer,
) -> None:
    client = fake_api.client()
    fake_api.enqueue(_cut_after_text(), text_reply("the rest"))
    tools: list[Any] = [{"name": "note", "input_schema": {"type": "object"}}]
    first: list[Any] = [{"role": "user", "content": "explain"}]
    cut = client.messages.create(model=SONNET, max_tokens=ROOM, messages=first, tools=tools)
    assert cut.stop_reason == "max_tokens"
    kinds = [block.type for block in cut.content]
    assert kinds == ["thinking", "text"]  # the progress thinking and the call were cut off
    assert 0 < len(cut.content[1].text) < len(LONG)  # type: ignore[union-attr]
    sent_back = [block.model_dump(exclude_none=True) for block in cut.content]
    again: list[Any] = [
        *first,
        {"role": "assistant", "content": sent_back},
        {"role": "user", "content": "go on"},
    ]
    rest = client.messages.create(model=SONNET, max_tokens=ROOM, messages=again, tools=tools)
    assert rest.stop_reason == "end_turn"
    assert fake_api.refusals == [] and fake_api.violations == []


def test_the_loop_keeps_a_cut_reply_tells_the_user_and_goes_on(
    fake_api: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_api.add_model(SONNET, max_tokens=ROOM)  # what the Models API says the model writes
    store = SqliteSessionStore(tmp_path / "s.db")
    calls: list[dict[str, Any]] = []
    loop, heard = _loop(fake_api, store=store, tools=[_note_tool(calls)])
    fake_api.enqueue(_cut_after_text(), text_reply("the rest"), text_reply("done"))

    first = loop.run_turn("explain")
    assert first.stop_reason == "max_tokens" and calls == []  # the call was never reached
    assert first.text and first.text in LONG and len(first.text) < len(LONG)
    assert heard.warnings == [cut_reply_line(ROOM)]
    assert loop.run_turn("go on").text == "the rest"
    assert loop.run_turn("thanks").text == "done"

    # Every request accepted; each sent the cut reply back as the API gave it, on its own
    # between two user messages.
    assert fake_api.refusals == [] and fake_api.violations == []
    bodies = fake_api.message_requests
    assert [b["max_tokens"] for b in bodies] == [ROOM] * 3
    kept = bodies[1]["messages"][1]
    assert [b["type"] for b in kept["content"]] == ["thinking", "text"]
    assert kept["content"][1]["text"] == first.text
    for body in bodies[1:]:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
        assert body["messages"][1] == kept
    # The store keeps the partial reply, thinking and all.
    stored = store.get_messages(loop.session_id)
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert stored[1].to_param()["content"] == kept["content"]  # thinking, partial text
    store.close()
