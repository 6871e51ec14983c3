"""A hand-written loop's history the way the SDK's documentation writes it: plain dicts, the
SDK's response objects, consecutive messages of one role, the malformed dicts a bug produces;
and a compacter configured once, through the loop it is given to.

The loops run the real ``anthropic`` SDK over HTTP against the test server on 127.0.0.1, which
checks every request against the Messages API's rules.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    CompactionTransition,
    ConfigurationError,
    ConversationCompacter,
    Message,
    MessageValidationError,
    as_messages,
    to_params,
    validate_messages,
)
from agentloop.testing import FunctionModel

MODEL = "claude-sonnet-4-6"
WINDOW = 3_000
FACT = "the staging password rotates on Tuesdays"


def _summary_or_reply(body: dict[str, Any]) -> ReplySpec:
    if "summary" in str(body.get("system", "")).lower():
        return text_reply("## Goal\nAnswer the questions.\n## Progress\nanswered them")
    return text_reply("Noted. " + " ".join(f"word{n}" for n in range(120)))


def _run_loop(
    server: FakeAnthropicServer, compacter: ConversationCompacter, *, keep_response: bool
) -> list[CompactionTransition]:
    """Twelve turns of the SDK documentation's loop: the history is a list the loop appends to
    and asks the compacter about before every request."""
    client = server.client()
    history: list[Any] = [{"role": "user", "content": f"Remember that {FACT}."}]
    session_id = "plain-loop"
    transitions: list[CompactionTransition] = []
    for turn in range(12):
        transition = compacter.compact_and_transition(session_id, history)
        if transition is not None:
            transitions.append(transition)
            history, session_id = list(transition.compacted_params), transition.new_session_id
        response = client.messages.create(model=MODEL, max_tokens=256, messages=to_params(history))
        if keep_response:
            history.append(response)  # the SDK's object itself: its usage comes along
        else:
            history.append({"role": "assistant", "content": response.content})  # as the docs do
        history.append({"role": "user", "content": f"And question {turn}?"})
    return transitions


def test_the_sdk_s_response_objects_are_taken_with_their_usage() -> None:
    with FakeAnthropicServer(handler=_summary_or_reply) as server:
        compacter = ConversationCompacter(
            model_name=MODEL,
            context_window=WINDOW,
            model=AnthropicModel(server.client()),
            # this loop sends plain requests (no beta): agentloop's own summary
            settings=CompactionSettings(api_summary=False),
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            transitions = _run_loop(server, compacter, keep_response=True)
        assert server.violations == []
    assert transitions
    # Measured from the usage the API reported, not from the local estimate alone.
    assert all(t.summary.tokens_before_source.startswith("api") for t in transitions)
    assert not [w for w in caught if "without usage" in str(w.message)]


def test_replies_kept_without_usage_are_warned_about_once() -> None:
    with FakeAnthropicServer(handler=_summary_or_reply) as server:
        compacter = ConversationCompacter(
            model_name=MODEL,
            context_window=WINDOW,
            model=AnthropicModel(server.client()),
            # this loop sends plain requests (no beta): agentloop's own summary
            settings=CompactionSettings(api_summary=False),
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            transitions = _run_loop(server, compacter, keep_response=False)
        assert server.violations == []
    told = [w for w in caught if "without usage" in str(w.message)]
    assert len(told) == 1
    assert "\n" not in str(told[0].message)
    assert Path(told[0].filename).name == "test_plain_history.py"  # points at the caller
    assert transitions and transitions[0].summary.tokens_before_source == "estimate"


def test_to_params_sends_what_the_api_takes_back() -> None:
    from anthropic.types import Message as SDKMessage

    response = SDKMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [
                {"type": "text", "text": "Looking.", "citations": None},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 3_361, "output_tokens": 20},
        }
    )
    sent = to_params([{"role": "user", "content": "Read a."}, response])
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        ],
    }
    (message,) = as_messages([{"role": "assistant", "content": "x", "usage": {"input_tokens": 5}}])
    assert message.usage is not None and message.usage.input_tokens == 5
    assert Message.from_param(response).usage == message.usage.__class__(3_361, 20)


BAD_ITEMS: list[Any] = [
    "hello",
    5,
    None,
    {"content": "no role"},
    {"role": "developer", "content": "a role the API does not have"},
    {"role": "user"},
    {"role": "user", "content": 5},
    {"role": "user", "content": {"type": "text", "text": "a block, not a list"}},
    {"role": "user", "content": ["a string where a block goes"]},
    {"role": "user", "content": [{"text": "a block without a type"}]},
    {"role": "user", "content": [{"type": "text"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "name": "read", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "content": "whose?"}]},
    {"role": "assistant", "content": "x", "usage": "lots"},
    {"role": "assistant", "content": "x", "usage": {"input_tokens": -1}},
    {"role": "assistant", "content": "x", "usage": {"input_tokens": "12"}},
]


@pytest.mark.parametrize("bad", BAD_ITEMS, ids=range(len(BAD_ITEMS)))
def test_a_malformed_message_is_a_message_validation_error(bad: Any) -> None:
    compacter = ConversationCompacter(
        model_name=MODEL, context_window=WINDOW, model=FunctionModel(lambda _r: "ok")
    )
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, bad]
    for attempt in (
        lambda: compacter.should_compact(history),
        lambda: compacter.compact_and_transition("s", history, force=True),
        lambda: to_params(history),
        lambda: as_messages(history),
    ):
        with pytest.raises(MessageValidationError) as error:
            attempt()
        assert "\n" not in str(error.value)


@pytest.mark.filterwarnings("ignore:assistant messages arrive without usage")
def test_consecutive_messages_of_one_role_are_merged_and_what_is_sent_alternates() -> None:
    compacter = ConversationCompacter(
        model_name=MODEL, context_window=WINDOW, model=FunctionModel(lambda _r: "summary")
    )
    history: list[Any] = [
        {"role": "user", "content": "Read a."},
        {"role": "user", "content": "Then b."},
        {"role": "assistant", "content": "Reading."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}],
        },
        {"role": "user", "content": "(also c)"},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a: 1"}],
        },
        {"role": "assistant", "content": "a holds 1."},
    ]
    merged = compacter.messages_of(history)
    assert [m.role for m in merged] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in merged[1].content] == ["text", "tool_use"]
    # The API wants a turn's tool results first: what was typed beside them goes after.
    assert [b["type"] for b in merged[2].content] == ["tool_result", "text"]
    for _ in range(8):
        history += [
            {"role": "user", "content": "More. " * 60},
            {"role": "user", "content": "Still more. " * 60},
            {"role": "assistant", "content": "Done. " * 60},
        ]
    transition = compacter.compact_and_transition("s", history)
    assert transition is not None
    validate_messages(transition.compacted_messages, allow_pending_tool_use=False)


def test_a_history_that_grows_between_calls_is_merged_where_it_grew() -> None:
    compacter = ConversationCompacter(model_name=MODEL, model=FunctionModel(str))
    history: list[Any] = [Message.user("a"), Message.assistant("b")]
    assert list(compacter.messages_of(history)) == history
    history += [Message.user("c"), Message.user("d")]
    merged = compacter.messages_of(history)
    assert [m.role for m in merged] == ["user", "assistant", "user"]
    assert compacter.messages_of(merged) is merged  # handed back: taken as it is
    history.append({"role": "assistant", "content": "e"})
    assert [m.role for m in compacter.messages_of(history)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_a_loop_given_consecutive_messages_sends_them_merged() -> None:
    model = FunctionModel(lambda _r: "fine")
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        messages=[Message.user("one"), Message.user("two"), Message.assistant("ok")],
    )
    loop.run_turn("three")
    sent = model.requests[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert [b["text"] for b in sent[0].content] == ["one", "two"]


def test_a_compacter_given_to_a_loop_is_configured_by_it() -> None:
    model = FunctionModel(lambda _r: "fine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has no model" warning: the loop's model summarizes
        compacter = ConversationCompacter(settings=CompactionSettings(threshold=0.5))
        AgentLoop(model=model, model_name="claude-haiku-4-5", max_tokens=777, compacter=compacter)
    assert compacter.model_name == "claude-haiku-4-5"
    assert compacter.model is model
    assert compacter.max_output_tokens == 777
    assert (compacter.context_window, compacter.window_source) == (200_000, "builtin")

    # What the compacter was told stays as it was told.
    own = FunctionModel(lambda _r: "summary")
    told = ConversationCompacter(
        model_name=MODEL, context_window=50_000, max_output_tokens=1_000, model=own
    )
    AgentLoop(model=model, model_name=MODEL, max_tokens=777, compacter=told)
    assert (told.context_window, told.max_output_tokens, told.model) == (50_000, 1_000, own)


def test_a_compacter_knows_its_model_s_window_and_needs_a_name_without_a_loop() -> None:
    compacter = ConversationCompacter(model_name="claude-haiku-4-5", model=FunctionModel(str))
    assert (compacter.context_window, compacter.window_source) == (200_000, "builtin")
    alone = ConversationCompacter()
    with pytest.raises(ConfigurationError, match="model_name") as error:
        alone.compact_and_transition("s", [{"role": "user", "content": "hi"}])
    assert "\n" not in str(error.value)
