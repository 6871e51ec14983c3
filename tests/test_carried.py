"""What a compaction by the API's summary carries over, kept as structure: built by the
compaction, rendered once into the message it appends, kept with that message (and by the
store beside its text), and read back from the parts by the next compaction; a message stored
as text alone is read by one reader."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from support.histories import CharCounter

from agentloop._adapters.records import from_record, to_record
from agentloop._agent.agent import _carried_from_metadata
from agentloop._core.compaction import api_compaction
from agentloop._core.compaction.api_compaction import (
    CARRIED_OPEN,
    carried_over,
    read_carried,
    render_carried,
)
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.facts import ledger as ledger_module
from agentloop._core.facts.ledger import derive, find_ledger, render
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.values.carried import Carried, Pin
from agentloop._core.values.ledger_values import (
    CommandFact,
    FileFact,
    Ledger,
    ledger_from_dict,
    ledger_to_dict,
)
from agentloop._core.values.messages import Message, validate_messages
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop.testing import ScriptedModel, tool_call

SONNET_55 = "claude-sonnet-5-5"
LEDGER = Ledger(
    files=(FileFact("src/app.py", created=True, last="written"), FileFact("README.md", read=True)),
    commands=(CommandFact("pytest -q", "exit 1", runs=3),),
    errors=("E   AssertionError: 2 != 3",),
    failing=("tests/test_app.py::test_sum",),
    failing_command="pytest -q",
    todos=(("in_progress", "fix the sum"),),
    requests=("make the tests pass",),
    omitted={"Errors": 2},
    hints={"Errors": '"AssertionError"'},
    counted_through="toolu_0003",
)


def history(*, newest: bool = True, ids: str = "toolu") -> list[Message]:
    out = [Message.user("never edit vendor/", pinned=True), Message.assistant("noted")]
    for n in range(5):
        call = tool_call("bash", {"command": f"pytest -q tests/test_{n}.py"}, call_id=f"{ids}_{n}")
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "FAILED\nexit 1"}
        out += [
            Message.user(f"request {n}: " + "word " * 300),
            Message.assistant([call]),
            Message.user([result]),
            Message.assistant(f"answer {n}"),
        ]
    return [*out, Message.user("the newest request")] if newest else out


def compacter() -> ConversationCompacter:
    return ConversationCompacter(
        model_name=SONNET_55,
        context_window=8_000,
        model=ScriptedModel(on_demand_compaction=True),
        max_output_tokens=500,
        settings=CompactionSettings(strategy="summarize", prepare_at=None),
        counter=CharCounter(),
        hooks=[PreservedStateHook("todos", lambda: "- [ ] ship the fix")],
        clock=lambda: datetime(2026, 11, 29, tzinfo=UTC),
        new_session_id=lambda: "child",
    )


def test_the_compaction_hands_the_parts_to_the_message_that_renders_them() -> None:
    transition = compacter().compact_and_transition("p", history(), force=True)
    assert transition is not None
    carried_message = transition.compacted_messages[-1]
    carried = carried_message.carried
    assert carried_message.role == "system" and carried is not None
    assert carried.state == "- [ ] ship the fix"  # the hooks' own, the ledger apart
    assert carried.ledger is not None
    assert any("pytest -q tests/test_0.py" in c.command for c in carried.ledger.commands)
    assert carried.pinned == (Pin("user", "never edit vendor/"),)
    # Rendered once, from the parts: the ledger first in the preserved state.
    assert carried_message.text == render_carried(carried)
    assert carried_message.text.startswith(CARRIED_OPEN)
    assert f"<preserved-state>\n{render(carried.ledger)}\n\n- [ ] ship the fix\n" in (
        carried_message.text
    )
    assert "[pinned user message]\nnever edit vendor/" in carried_message.text


def test_the_next_compaction_reads_the_parts_not_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parts = Carried("- state", LEDGER, (Pin("system", "answer in French"),), "the old request")
    opaque = Message("system", ({"type": "text", "text": "(rewritten)"},), carried=parts)
    msgs = [Message.user("go"), Message.assistant("ok"), Message.user("more"), opaque]
    msgs += [Message.assistant("done"), Message.user("next")]

    def no_parse(text: str) -> None:
        raise AssertionError("the ledger was read from text")

    monkeypatch.setattr(ledger_module, "parse", no_parse)
    assert find_ledger(msgs) == LEDGER
    again = carried_over(msgs, 5, "- new state", LEDGER)
    assert again.pinned == parts.pinned and again.instructions == ("answer in French",)
    assert again.request == ""  # the newest request is kept: nothing to carry


def test_a_carried_message_stored_as_text_alone_has_one_reader() -> None:
    parts = Carried("- state", LEDGER, (Pin("user", "keep me\n\nwhole"),), "do it")
    text_alone = Message.system(render_carried(parts))
    read = read_carried(text_alone)
    assert read is not None and (read.pinned, read.request) == (parts.pinned, "do it")
    assert find_ledger([text_alone]) == LEDGER  # the ledger's own reader (its text)
    assert read_carried(Message.system("a rule of the caller's")) is None
    assert read_carried(Message.assistant(render_carried(parts))) is None  # no reply is ours


def test_the_store_keeps_the_parts_beside_the_text() -> None:
    parts = Carried("- state", LEDGER, (Pin("assistant", "the plan"),), "do it")
    message = Message("system", ({"type": "text", "text": render_carried(parts)},), carried=parts)
    record = to_record(message)
    stored: Any = type("Stored", (), {})()
    for name in ("role", "content", "token_estimate", "usage", "metadata"):
        setattr(stored, name, getattr(record, name))
    back = from_record(stored)
    assert (back.role, back.content, back.carried) == ("system", message.content, parts)
    del stored.metadata["carried"]  # a message stored before the parts were kept
    assert from_record(stored).carried is None


def test_the_parts_as_data_round_trip_and_refuse_what_is_not_them() -> None:
    assert ledger_from_dict(ledger_to_dict(LEDGER)) == LEDGER
    parts = Carried("s", LEDGER, (Pin("system", "rule"),), "r")
    assert Carried.from_dict(parts.to_dict()) == parts
    assert Carried.from_dict(Carried().to_dict()) == Carried()
    bad = parts.to_dict() | {"pinned": [["robot", "x"]]}
    cases: list[object] = [None, [], {"state": "s"}, bad]
    for data in cases:
        assert Carried.from_dict(data) is None
    assert not Carried() and Carried(ledger=LEDGER) and not Carried(ledger=Ledger())


def test_a_waiting_carried_message_comes_back_with_its_parts_after_a_restart() -> None:
    c = compacter()
    transition = c.compact_and_transition("p", history(newest=False), force=True)
    assert transition is not None and c.later is not None and c.later.carried is not None
    content, parts = list(c.later.content), c.later.carried.to_dict()
    back = _carried_from_metadata(content, parts)
    assert back is not None and back.carried == c.later.carried and back.content == c.later.content
    older = _carried_from_metadata(content)  # kept by an agentloop that stored no parts
    assert older is not None and older.carried is None


def test_on_a_model_without_system_messages_the_user_turn_holds_the_parts() -> None:
    c = compacter()
    c.model_name = "claude-sonnet-5"  # reads no system messages
    transition = c.compact_and_transition("p", history(), force=True)
    assert transition is not None
    last = transition.compacted_messages[-1]
    assert last.role == "user" and last.carried is not None
    assert last.content[-1]["text"] == render_carried(last.carried)
    validate_messages(transition.compacted_messages, allow_pending_tool_use=False)
    # The next compaction restates the pin from the parts that user turn holds.
    grown = [*transition.compacted_messages, Message.assistant("ok"), *history(ids="again")[2:]]
    second = c.compact_and_transition("child", grown, force=True)
    assert second is not None
    assert "[pinned user message]\nnever edit vendor/" in second.compacted_messages[-1].text


def test_the_api_module_renders_with_the_one_function() -> None:
    parts = Carried("- s", None, (Pin("user", "p"),), "r")
    expected = api_compaction.carried_text("- s", pinned=["[pinned user message]\np"], request="r")
    assert render_carried(parts) == expected


def test_a_carried_block_joined_to_a_user_turn_is_no_request_of_the_users() -> None:
    joined = Message.user(
        [
            {"type": "text", "text": "the real request"},
            {"type": "text", "text": render_carried(Carried("- state, no ledger"))},
        ]
    )
    assert derive([joined]).requests == ("the real request",)
