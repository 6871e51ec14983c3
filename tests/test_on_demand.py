"""Compaction that never breaks thinking, on the doubles: the rule for every edit
agentloop makes itself (no thinking the edit invalidated), the API's own summary where the
model offers it (the block first, the kept turns verbatim with their thinking, what is carried
after the newest user turn), the fallbacks, the system message in the history, and the swap of
a summary the API prepared in the background. The same through the real SDK against the test
server: ``test_on_demand_e2e.py``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from support.histories import CharCounter

from agentloop._adapters.records import from_record, to_record
from agentloop._core.compaction.on_demand import (
    API_SUMMARY,
    CARRIED_OPEN,
    accepts_system_messages,
    api_cut,
    carried_text,
    keeps_from,
)
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.cutting.cut_and_prune import THINKING_LEFT_OUT, unbound_thinking
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.values.messages import (
    Message,
    Usage,
    merge_consecutive,
    to_params,
    validate_messages,
)
from agentloop._core.values.model import ModelRequest, ModelResponse
from agentloop._errors import MessageValidationError
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop.testing import ScriptedModel, tool_call

NOW = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
SONNET_55 = "claude-sonnet-5-5"


def thinking(n: int) -> dict[str, Any]:
    return {"type": "thinking", "thinking": "", "signature": f"sig-{n}"}


def history(turns: int = 6, words: int = 300, start: int = 0) -> list[Message]:
    """Turns of [request, reply with thinking and a tool call, tool result, reply]."""
    out: list[Message] = []
    for n in range(start, start + turns):
        call = tool_call("read", {"n": n}, call_id=f"toolu_{n:04d}")
        out += [
            Message.user(f"request {n}: " + "word " * words),
            Message.assistant([thinking(2 * n), call]),
            Message.user(
                [{"type": "tool_result", "tool_use_id": call["id"], "content": "x" * 800}]
            ),
            Message.assistant([thinking(2 * n + 1), {"type": "text", "text": f"answer {n}"}]),
        ]
    out.append(Message.user("the newest request " + "word " * 50))
    return out


def thinking_blocks(messages: list[Message]) -> list[str]:
    return [str(b["signature"]) for m in messages for b in m.content if b["type"] == "thinking"]


def _no_thinking(message: Message) -> str:
    return repr([b for b in message.content if b["type"] != "thinking"])


def compacter(
    model: Any, *, strategy: Any = "auto", model_name: str = SONNET_55, **settings: Any
) -> ConversationCompacter:
    return ConversationCompacter(
        model_name=model_name,
        context_window=8_000,
        model=model,
        max_output_tokens=500,
        settings=CompactionSettings(strategy=strategy, prepare_at=None, **settings),
        counter=CharCounter(),
        hooks=[PreservedStateHook("todos", lambda: "- [ ] ship the fix")],
        clock=lambda: NOW,
        new_session_id=lambda: "child",
    )


# -- rule 1: the child carries no thinking the edit invalidated ---------------------------------


def test_thinking_goes_from_the_first_changed_message_on_and_stays_before_it() -> None:
    parent = history(2)
    child = list(parent)
    child[4] = Message.user("request 1, edited")  # the first change
    out, removed = unbound_thinking(parent, child)
    assert thinking_blocks(out) == ["sig-0", "sig-1"]  # before the edit: still valid
    assert removed == 2
    assert [m.content for m in out[:4]] == [m.content for m in parent[:4]]
    validate_messages(out)


def test_an_assistant_left_empty_is_dropped_at_the_end_and_says_so_elsewhere() -> None:
    parent = [Message.user("a"), Message.assistant([thinking(1)]), Message.user("b")]
    child = [Message.user("changed"), parent[1], parent[2], Message.assistant([thinking(2)])]
    out, removed = unbound_thinking(parent, child)
    assert removed == 2 and len(out) == 3
    assert out[1].content == ({"type": "text", "text": THINKING_LEFT_OUT},)
    validate_messages(out)
    # An unchanged child keeps everything (removing nothing is no edit).
    assert unbound_thinking(parent, parent) == (parent, 0)


@pytest.mark.parametrize("strategy", ["summarize", "sliding_window", "prune", "auto"])
def test_every_client_side_result_is_free_of_invalidated_thinking(strategy: Any) -> None:
    model = ScriptedModel()  # no on-demand compaction: agentloop edits the history itself
    c = compacter(model, strategy=strategy)
    parent = history()
    result = c.compact_and_transition("p", parent, force=True)
    assert result is not None
    child = result.compacted_messages
    first = next(
        i for i, m in enumerate(child) if i >= len(parent) or m.content != parent[i].content
    )
    assert not thinking_blocks(child[first:]), "thinking after an edit would be refused (400)"
    stripped = {_no_thinking(m): len(thinking_blocks([m])) for m in parent}
    removed = sum(stripped.get(_no_thinking(m), 0) for m in child[first:])
    notes = " ".join(result.summary.notes)
    assert (f"{removed} thinking block(s) left out" in notes) == (removed > 0)
    validate_messages(child, allow_pending_tool_use=False)


# -- rule 2: the API's own summary --------------------------------------------------------------


def test_the_api_summary_keeps_the_turns_verbatim_with_their_thinking() -> None:
    model = ScriptedModel(on_demand_compaction=True)
    c = compacter(model)
    parent = history()
    result = c.compact_and_transition("p", parent, force=True)
    assert result is not None
    summary, child = result.summary, result.compacted_messages
    assert summary.strategy == API_SUMMARY and summary.fallback_reason is None
    assert summary.summary_calls == 1 and summary.summary_usage.input_tokens > 0
    (request,) = [r for r in model.requests if r.compaction is not None]
    cut = len(request.messages)
    assert list(request.messages) == parent[:cut]  # the conversation as it stands, to the cut
    assert request.system == "" and request.model == SONNET_55
    assert request.compaction is not None
    assert "## Goal" in str(request.compaction.instructions)  # agentloop's summarizer prompt
    # [block, *kept verbatim (thinking too), carried system message]
    assert child[0].is_compaction_only and child[0].content[0]["signature"].startswith("sig-")
    assert [m.content for m in child[1:-1]] == [m.content for m in parent[cut:]]
    assert thinking_blocks(child[1:-1]) == thinking_blocks(parent[cut:])
    assert keeps_from(parent, cut) and child[1].role != parent[cut - 1].role
    carried = child[-1]
    assert carried.role == "system" and carried.text.startswith(CARRIED_OPEN)
    assert "ship the fix" in carried.text  # the hooks' state, after the newest user turn
    assert child[-2] == parent[-1]
    validate_messages(child, allow_pending_tool_use=False)


def test_a_re_compaction_sends_the_block_and_replaces_it() -> None:
    model = ScriptedModel(on_demand_compaction=True)
    c = compacter(model)
    first = c.compact_and_transition("p", history(), force=True)
    assert first is not None
    grown = [*first.compacted_messages, Message.assistant("ok"), *history(4, start=10)]
    second = c.compact_and_transition("child", grown, force=True)
    assert second is not None
    request = [r for r in model.requests if r.compaction is not None][-1]
    assert request.messages[0] == first.compacted_messages[0]  # sent as is
    blocks = [b for m in second.compacted_messages for b in m.content if b["type"] == "compaction"]
    assert len(blocks) == 1 and second.compacted_messages[0].is_compaction_only


def test_a_model_without_system_messages_gets_the_carried_text_in_the_newest_user_turn() -> None:
    assert not accepts_system_messages("claude-sonnet-5") and accepts_system_messages(SONNET_55)
    c = compacter(ScriptedModel(on_demand_compaction=True), model_name="claude-sonnet-5")
    parent = history()
    result = c.compact_and_transition("p", parent, force=True)
    assert result is not None
    child = result.compacted_messages
    assert all(m.role != "system" for m in child)
    assert child[-1].content[: len(parent[-1].content)] == parent[-1].content
    assert child[-1].content[-1]["text"].startswith(CARRIED_OPEN)


def test_the_latest_request_is_carried_when_it_was_summarized() -> None:
    call = tool_call("read", {"n": 9})
    result_block = {"type": "tool_result", "tool_use_id": call["id"], "content": "y" * 3000}
    parent = [
        *history(5)[:-1],
        Message.user("THE REQUEST " + "word " * 200),
        Message.assistant([thinking(99), call]),
        Message.user([result_block]),
    ]
    c = compacter(ScriptedModel(on_demand_compaction=True))
    result = c.compact_and_transition("p", parent, force=True)
    assert result is not None
    child = result.compacted_messages
    kept_requests = [m for m in child if m.role == "user" and "THE REQUEST" in m.text]
    assert kept_requests or "THE REQUEST" in child[-1].text


def test_between_turns_what_is_carried_waits_for_the_next_user_message() -> None:
    c = compacter(ScriptedModel(on_demand_compaction=True))
    parent = [*history(), Message.assistant("done")]
    result = c.compact_and_transition("p", parent, force=True)
    assert result is not None and result.compacted_messages[-1].role == "assistant"
    new = Message.user("next")
    placed = c.carried(new)
    assert placed[0] is new and placed[1].role == "system" and "ship the fix" in placed[1].text
    assert c.carried(new) == [new]  # placed once
    validate_messages([*result.compacted_messages, *placed])


def test_failures_fall_back_to_the_own_summarizer_and_say_why() -> None:
    class Failing(ScriptedModel):
        def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
            if request.compaction is not None:
                self.requests.append(request)
                return ModelResponse(content=(), usage=Usage(), stop_reason="max_tokens")
            return super().complete(request, on_text)

    c = compacter(Failing(on_demand_compaction=True), strategy="summarize")
    result = c.compact_and_transition("p", history(), force=True)
    assert result is not None
    assert result.summary.strategy == "summarize"
    assert "API's compaction failed" in str(result.summary.fallback_reason)
    assert "max_tokens" in str(result.summary.fallback_reason)
    child = result.compacted_messages
    assert child[0].summary is not None and not thinking_blocks(child)


def test_a_compaction_model_or_no_capability_means_the_own_summarizer() -> None:
    model = ScriptedModel(on_demand_compaction=True)
    c = compacter(model, summary_model="claude-haiku-4-5")
    assert not c.on_demand_available()
    result = c.compact_and_transition("p", history(), force=True)
    assert result is not None and result.summary.strategy != API_SUMMARY
    assert all(r.compaction is None for r in model.requests)
    plain = compacter(ScriptedModel())  # a double without it: asked for free, offline
    assert not plain.on_demand_available()
    assert not compacter(model, api_summary=False).on_demand_available()  # turned off


def test_the_cut_never_leaves_a_tool_call_open_nor_starts_on_a_system_message() -> None:
    msgs = history(3)
    for tail in (0, 10, 10**6):
        cut = api_cut(msgs, tail_tokens=tail, count=lambda m: 1)
        assert cut is not None and keeps_from(msgs, cut)
        assert not msgs[cut].is_tool_result and msgs[cut].role != msgs[cut - 1].role
    assert api_cut(msgs, tail_tokens=0, count=lambda m: 1) == len(msgs) - 1
    assert api_cut([Message.user("only")], tail_tokens=9, count=lambda m: 1) is None


def test_carried_text_is_one_function_for_every_part() -> None:
    text = carried_text("- todo", pinned=["[pinned user message]\nkeep"], request="do it")
    assert text.startswith(CARRIED_OPEN) and "- todo" in text and "keep" in text
    assert text.index("keep") < text.index("do it")


# -- the system message in the history ----------------------------------------------------------


def test_system_messages_follow_the_apis_placement_rules() -> None:
    block = {"type": "compaction", "content": "sum", "signature": "s"}
    ok = [
        Message("assistant", (block,)),
        Message.assistant("kept reply"),
        Message.user("u"),
        Message.system("carried"),
        Message.assistant("a"),
    ]
    validate_messages(ok)
    assert merge_consecutive(ok) == ok  # the block stands alone; a system message is not merged
    assert to_params(ok)[3] == {"role": "system", "content": [{"type": "text", "text": "carried"}]}
    bad = [
        [Message.system("first")],
        [Message.user("u"), Message.assistant("a"), Message.system("after a reply")],
        [Message.user("u"), Message.system("s"), Message.user("u2")],
        [Message.assistant("no block first")],
    ]
    for messages in bad:
        with pytest.raises(MessageValidationError):
            validate_messages(messages)


def test_a_system_message_and_the_block_round_trip_through_the_store_records() -> None:
    block = {"type": "compaction", "content": "sum", "signature": "s", "encrypted_content": "e"}
    for message in (Message.system("carried"), Message("assistant", (block,))):
        record = to_record(message)
        stored: Any = type("Stored", (), {})()
        for name in ("role", "content", "token_estimate", "usage", "metadata"):
            setattr(stored, name, getattr(record, name))
        back = from_record(stored)
        assert (back.role, back.content) == (message.role, message.content)


# -- the summary prepared in the background -----------------------------------------------------


def test_a_background_api_summary_swaps_in_and_keeps_the_turns_appended_since() -> None:
    model = ScriptedModel(on_demand_compaction=True)
    c = compacter(model)
    c.settings = CompactionSettings(strategy="auto", prepare_at=0.1)
    parent = history(3)
    job = c.prepare_job("p", parent)
    assert job is not None and job.request.compaction is not None
    assert list(job.request.messages) == parent  # the history as it stands (N messages)
    answer = model.complete(job.request)
    appended = [Message.assistant([thinking(500), {"type": "text", "text": "meanwhile"}])]
    appended += history(2, start=10)
    grown = [*parent, *appended]
    assert c.accept_prepared(job, answer, "p", grown) is None
    result = c.compact_and_transition("p", grown, force=True)
    assert result is not None and result.summary.prepared
    child = result.compacted_messages
    assert child[0].content[0] == answer.content[0]  # exactly the first N replaced by the block
    assert [m.content for m in child[1:-1]] == [m.content for m in appended]  # in place
    assert child[-1].role == "system"
    assert len([r for r in model.requests if r.compaction is not None]) == 1  # no call now


def test_a_prepared_answer_that_is_no_compaction_is_a_failure() -> None:
    model = ScriptedModel(on_demand_compaction=True)
    c = compacter(model)
    c.settings = CompactionSettings(strategy="auto", prepare_at=0.1)
    parent = history(3)
    job = c.prepare_job("p", parent)
    assert job is not None
    model.add("an ordinary reply")
    refused = model.complete(ModelRequest(model=SONNET_55, messages=(Message.user("x"),)))
    why = c.accept_prepared(job, refused, "p", parent)
    assert why is not None and "stop reason" in why and c.prepared is None
