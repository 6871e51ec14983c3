"""AgentLoop end to end: the real ``anthropic`` SDK over real HTTP against the fake Messages API.

Every test drives :class:`AgentLoop` with :class:`AnthropicModel` pointed at the fake server on
127.0.0.1, and asserts that the server, which checks each request against the API's conversation
rules, saw no violation.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from fake_api import (
    FakeAnthropicServer,
    overloaded,
    prompt_too_long,
    text_reply,
    tool_reply,
)
from support.loop_scripts import (
    MODEL,
    NOTE_TOOL,
    PREFIX_START,
    SUMMARY,
    Recorder,
    filler,
    first_text,
    params,
    request_text,
    scripted_loop,
    stored_params,
)

from agentloop import (
    AgentLoop,
    ContextFullError,
    ConversationCompacter,
    FunctionTool,
    Message,
    ModelError,
    TurnResult,
)
from agentloop._adapters.records import from_record
from sessions import SqliteSessionStore, open_store


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(tmp_path / "sessions.db") as opened:
        yield opened


def check_lineage_on_disk(
    store: SqliteSessionStore, loop: AgentLoop, recorder: Recorder, root: str
) -> None:
    """Parent and child on disk for every transition: lineage, statuses, parents' messages kept,
    children opening with the compacted history, and the compaction history's numbers."""
    transitions = recorder.transitions
    chain = [root] + [t.new_session_id for t in transitions]
    lineage = store.lineage(loop.session_id)
    assert [s.id for s in lineage] == chain
    for older, newer in itertools.pairwise(lineage):
        assert newer.parent_id == older.id
    assert [s.status for s in lineage] == ["compacted"] * len(transitions) + ["active"]
    assert store.newest_descendant(root).id == loop.session_id
    history = store.compaction_history(root)
    assert len(history) == len(transitions)
    for transition, snapshot, parent_id, entry in zip(
        transitions, recorder.snapshots, recorder.snapshot_sessions, history, strict=True
    ):
        assert transition.original_session_id == parent_id
        # The parent keeps every message it had when it was compacted, unchanged.
        assert stored_params(store, parent_id) == params(snapshot)
        assert transition.summary.original_message_count == len(snapshot)
        # The child starts with the compacted history, whose first message is the prefix.
        child = stored_params(store, transition.new_session_id)
        compacted = params(transition.compacted_messages)
        assert child[: len(compacted)] == compacted
        first = store.get_messages(transition.new_session_id)[0]
        assert from_record(first).summary is not None
        assert first_text({"messages": child}).startswith(PREFIX_START)
        assert (entry.parent_id, entry.child_id) == (parent_id, transition.new_session_id)
        assert entry.messages_before == len(snapshot)
        assert entry.messages_after == len(compacted)
        assert entry.tokens_before == transition.summary.tokens_before
        assert entry.tokens_after == transition.summary.tokens_after
        assert entry.tokens_after is not None and entry.tokens_before is not None
        assert entry.tokens_after < entry.tokens_before
    # The live history is what the newest session holds.
    assert stored_params(store, loop.session_id) == params(loop.messages)


def test_long_run_compacts_several_times_with_parent_and_child_on_disk(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path)
    # The server refuses any prompt above the window: compaction must keep every request under it.
    fake_api.context_window = 4000
    root = loop.session_id
    for turn in range(16):
        script.add(text_reply(filler(f"answer {turn}", 300)))
        result = loop.run_turn(filler(f"request {turn}", 300))
        assert result.text.startswith(f"answer {turn}")
        assert result.session_id == loop.session_id

    assert fake_api.violations == []
    assert len(recorder.transitions) >= 3
    assert recorder.skipped == []
    check_lineage_on_disk(store, loop, recorder, root)
    # The summarizer ran for every compaction (in chunks: its window is small too); every
    # request after the very first updates the summary so far instead of starting over.
    assert len(script.summaries) >= len(recorder.transitions)
    assert "<summary-so-far>" not in request_text(script.summaries[0])
    assert all("<summary-so-far>" in request_text(body) for body in script.summaries[1:])
    # The first request after each compaction opens with the prefix carrying the summary.
    for index in recorder.requests_before:
        body = script.conversation[index]
        assert first_text(body).startswith(PREFIX_START)
        assert SUMMARY in first_text(body)
    # Each compaction happened at the threshold, not before it.
    for transition in recorder.transitions:
        assert transition.summary.tokens_before >= loop.compacter.trigger_tokens  # type: ignore[union-attr]


def test_compaction_between_tool_rounds_inside_one_turn(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path)
    rounds = 24
    for n in range(rounds):
        script.add(tool_reply(("note", {"n": n}), text=filler(f"thinking about note {n}", 200)))
    script.add(text_reply("all notes written"))
    root = loop.session_id
    request = "Write twenty-four notes, one tool call each."

    result = loop.run_turn(request)

    assert fake_api.violations == []
    assert result.text == "all notes written"
    assert result.tool_calls == rounds
    assert result.transitions == recorder.transitions
    assert len(result.transitions) >= 1
    assert result.session_id == loop.session_id != root
    for snapshot, index in zip(recorder.snapshots, recorder.requests_before, strict=True):
        # The compaction ran between tool rounds: the history ended with tool results.
        assert snapshot[-1].is_tool_result
        after = script.conversation[index]
        assert first_text(after).startswith(PREFIX_START)
        # The turn's request is carried into the prefix, and the tool results are answered.
        assert request in request_text(after)
        last = after["messages"][-1]
        assert last["role"] == "user"
        assert [b["tool_use_id"] for b in last["content"]] == snapshot[-1].tool_result_ids
    # Every tool call got its result (the loop ran all rounds, across the compaction).
    assert len(script.conversation) == rounds + 1
    check_lineage_on_disk(store, loop, recorder, root)


def test_emergency_compaction_on_prompt_too_long_retries_once(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path, window=50_000)
    for turn in range(4):
        script.add(text_reply(filler(f"answer {turn}", 150)))
        loop.run_turn(filler(f"request {turn}", 150))
    assert recorder.transitions == []
    root = loop.session_id
    script.add(prompt_too_long(), text_reply("fits now"))

    result = loop.run_turn("and one more thing")

    assert fake_api.violations == []
    assert result.text == "fits now"
    assert len(result.transitions) == 1
    transition = result.transitions[0]
    assert transition.original_session_id == root
    assert loop.session_id == transition.new_session_id
    refused, retried = script.conversation[-2:]
    assert not first_text(refused).startswith(PREFIX_START)
    assert first_text(retried).startswith(PREFIX_START)
    assert len(retried["messages"]) < len(refused["messages"])
    assert "and one more thing" in request_text(retried)
    history = store.compaction_history(root)
    assert [entry.strategy for entry in history] == ["summarize (emergency)"]
    check_lineage_on_disk(store, loop, recorder, root)


def test_emergency_compaction_happens_once_then_a_clear_error(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path, window=50_000)
    for turn in range(3):
        script.add(text_reply(filler(f"answer {turn}", 150)))
        loop.run_turn(filler(f"request {turn}", 150))
    script.add(prompt_too_long(), prompt_too_long())

    with pytest.raises(ContextFullError, match="even after an emergency compaction") as raised:
        loop.run_turn("one more")

    assert "\n" not in str(raised.value)
    assert "/compact" in str(raised.value)
    assert len(recorder.transitions) == 1  # compacted once, not in a loop
    assert len(script.summaries) == 1
    # The session stays usable: the next turn goes through with a valid history.
    script.add(text_reply("still here"))
    assert loop.run_turn("are you there?").text == "still here"
    assert fake_api.violations == []


def test_disabled_compaction_never_compacts_and_names_compact_on_prompt_too_long(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path, enabled=False)
    root = loop.session_id
    for turn in range(10):
        # A tool round in every turn: no compaction between tool rounds either.
        script.add(
            tool_reply(("note", {"n": turn}), text=filler(f"noting {turn}", 150)),
            text_reply(filler(f"answer {turn}", 150)),
        )
        loop.run_turn(filler(f"request {turn}", 300))
    # Far past the threshold (the window is 4,000 tokens), and still no compaction.
    decision = loop.context()
    assert decision is not None and decision.usage.tokens > decision.usage.window
    assert recorder.transitions == [] and recorder.snapshots == []
    assert len(script.conversation[-1]["messages"]) == 4 * 10 - 1
    # The API refuses the prompt: no emergency compaction either, a message naming /compact.
    script.add(prompt_too_long())
    with pytest.raises(ContextFullError) as raised:
        loop.run_turn("this one is too long")
    message = str(raised.value)
    assert "/compact" in message and "disabled" in message and "\n" not in message
    assert recorder.transitions == []
    assert script.summaries == []
    assert [s.id for s in store.lineage(root)] == [root]
    assert loop.session_id == root
    assert fake_api.violations == []

    # /compact still works when automatic compaction is off: the user asked for it.
    outcome = loop.compact("Keep the numbers of every request.")
    assert outcome is not None
    transition = outcome.transition
    assert transition is not None, outcome.explanation
    assert script.summaries
    assert all(
        "Instructions for this summary:\nKeep the numbers of every request." in request_text(body)
        for body in script.summaries
    )
    assert [s.id for s in store.lineage(root)] == [root, transition.new_session_id]
    script.add(text_reply("continuing"))
    assert loop.run_turn("go on").text == "continuing"
    assert first_text(script.conversation[-1]).startswith(PREFIX_START)
    assert fake_api.violations == []


def test_manual_compact_with_instructions_reaches_the_summarizer(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path, window=50_000)
    for turn in range(6):
        script.add(text_reply(filler(f"answer {turn}", 200)))
        loop.run_turn(filler(f"request {turn}", 200))
    root = loop.session_id

    outcome = loop.compact("keep the decisions about the API")

    assert outcome is not None
    transition = outcome.transition
    assert transition is not None, outcome.explanation
    assert transition.summary.instructions == "keep the decisions about the API"
    assert len(script.summaries) == 1
    assert "Instructions for this summary:\nkeep the decisions about the API" in request_text(
        script.summaries[0]
    )
    assert loop.session_id == transition.new_session_id
    check_lineage_on_disk(store, loop, recorder, root)
    assert fake_api.violations == []


def test_api_error_surviving_retries_keeps_the_session_usable(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, _ = scripted_loop(fake_api, store, tmp_path, window=50_000, max_retries=2)
    script.add(text_reply("first answer"))
    loop.run_turn("first question")
    script.add(overloaded(), overloaded(), overloaded())

    with pytest.raises(ModelError, match=r"overloaded \(529\) after 2 retries"):
        loop.run_turn("second question")

    assert len(script.conversation) == 4  # one try and two retries by the SDK
    stored = stored_params(store, loop.session_id)
    assert stored[-1]["content"][0]["text"] == "second question"
    script.add(text_reply("third answer"))
    assert loop.run_turn("third question").text == "third answer"
    assert fake_api.violations == []


def test_a_turn_failing_after_tool_results_is_repaired_before_the_next_turn(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, _ = scripted_loop(fake_api, store, tmp_path, window=50_000)
    # The first round asks for a tool; the API fails on the follow-up request.
    script.add(tool_reply(("note", {"n": 1})), overloaded())
    with pytest.raises(ModelError):
        loop.run_turn("write note 1")
    assert loop.messages[-1].is_tool_result
    script.add(text_reply("recovered"))
    assert loop.run_turn("try again").text == "recovered"
    assert fake_api.violations == []
    assert stored_params(store, loop.session_id) == params(loop.messages)


def _interrupt(tool_input: Mapping[str, Any]) -> str:
    raise KeyboardInterrupt  # Ctrl-C while a tool runs: not an error result, the turn stops


def test_a_turn_interrupted_during_a_tool_is_repaired_before_the_next_turn(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    interrupt = FunctionTool("interrupt", "Stop.", {"type": "object"}, _interrupt)
    loop, script, _ = scripted_loop(
        fake_api, store, tmp_path, window=50_000, tools=(NOTE_TOOL, interrupt)
    )
    script.add(tool_reply(("note", {"n": 1}), ("interrupt", {})))
    with pytest.raises(KeyboardInterrupt):
        loop.run_turn("write a note, then stop")
    pending = loop.messages[-1].tool_use_ids
    assert len(pending) == 2  # the history ends with tool calls that got no results

    script.add(text_reply("recovered"))
    assert loop.run_turn("try again").text == "recovered"

    assert fake_api.violations == []
    sent = script.conversation[-1]["messages"]
    answered = [b["tool_use_id"] for b in sent[-3]["content"]]
    assert answered == pending
    assert all(b.get("is_error") for b in sent[-3]["content"])
    assert sent[-1]["content"][0]["text"] == "try again"
    assert stored_params(store, loop.session_id) == params(loop.messages)


def test_async_turns_through_several_compactions(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path)
    fake_api.context_window = 4000
    root = loop.session_id

    async def run() -> list[TurnResult]:
        results = []
        for turn in range(12):
            script.add(
                tool_reply(("note", {"n": turn}), text=filler(f"noting {turn}", 150)),
                text_reply(filler(f"answer {turn}", 150)),
            )
            results.append(await loop.arun_turn(filler(f"request {turn}", 250)))
        results.append(await loop.arun_turn("finish"))
        return results

    results = asyncio.run(run())

    assert fake_api.violations == []
    assert len(recorder.transitions) >= 2
    assert [r.text for r in results[:-1]] == [filler(f"answer {turn}", 150) for turn in range(12)]
    assert "".join(recorder.text).count("answer 11") == 1  # streamed through on_text
    check_lineage_on_disk(store, loop, recorder, root)
    assert len(script.summaries) >= len(recorder.transitions)


def test_a_loop_refuses_an_invalid_history_when_it_is_built() -> None:
    """A damaged history (a tool result that answers no call) is named at once, not mid-turn;
    two messages of one role in a row are not damage (the API combines them: so does the loop);
    and the compacter shares the loop's checks, so it does not check the history again."""
    from agentloop import MessageValidationError
    from agentloop.testing import FunctionModel

    def say(text: str, role: Literal["user", "assistant"] = "user") -> Message:
        return Message(role=role, content=({"type": "text", "text": text},))

    orphan = Message.from_param(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "x"}],
        }
    )
    model = FunctionModel(lambda _request: "ok")
    compacter = ConversationCompacter(model_name=MODEL, context_window=10_000, model=model)
    bad = [say("hi"), say("a", "assistant"), orphan]
    with pytest.raises(MessageValidationError, match=r"message 2 .*toolu_gone answers no"):
        AgentLoop(model=model, model_name=MODEL, compacter=compacter, messages=bad)
    twice = [say("hi"), say("a", "assistant"), say("b", "assistant"), say("more")]
    loop = AgentLoop(model=model, model_name=MODEL, compacter=compacter, messages=twice)
    assert [m.role for m in loop.messages] == ["user", "assistant", "user"]
    assert [b["text"] for b in loop.messages[1].content] == ["a", "b"]
    assert compacter.validator is loop._validator
