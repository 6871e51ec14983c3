"""What the fake API's late-2026 models refuse (notes 1.5 and 2), what the Models API says
about them, and the stop reasons a loop must handle, through the real SDK over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    FakeAnthropicServer,
    context_exceeded_reply,
    cut_tool_reply,
    pause_reply,
    refusal_reply,
    text_reply,
    tool_reply,
)

SONNET = "claude-sonnet-5-5"
HI: Any = [{"role": "user", "content": "Hi"}]
TOOLS: Any = [{"name": "read", "description": "Read", "input_schema": {"type": "object"}}]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


def refused(server: FakeAnthropicServer, **body: Any) -> str:
    server.expect_refusals()
    request = {"max_tokens": 1000, "messages": HI, **body}
    with pytest.raises(anthropic.BadRequestError) as caught:
        server.client().messages.create(**request)
    error = caught.value.body
    assert isinstance(error, dict)
    return str(error["error"]["message"])


def accepted(server: FakeAnthropicServer, **body: Any) -> Any:
    server.enqueue(text_reply("ok"))
    message = server.client().messages.create(**{"max_tokens": 1000, "messages": HI, **body})
    assert server.violations == []
    return message


# ---------------------------------------------------------------------------------------------
# Thinking settings and companions


def test_sonnet_55_refuses_disabled_and_enabled_thinking(server: FakeAnthropicServer) -> None:
    assert refused(server, model=SONNET, thinking={"type": "disabled"}) == (
        'To turn thinking off on this model, send "thinking": {"type": "between_tools"} instead '
        'of {"type": "disabled"}.'
    )
    enabled = {"type": "enabled", "budget_tokens": 2000}
    assert refused(server, model=SONNET, thinking=enabled).startswith(
        '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive"'
    )
    assert server.violations == [] and len(server.refusals) == 2


def test_disabled_is_fine_where_the_model_allows_it(server: FakeAnthropicServer) -> None:
    message = accepted(server, model="claude-haiku-5-5", thinking={"type": "disabled"})
    assert [b.type for b in message.content] == ["text"]


@pytest.mark.parametrize("model", [SONNET, "claude-opus-5-5", "claude-fable-5-1"])
def test_forced_tool_choice_is_refused_on_messages_and_count_tokens(
    server: FakeAnthropicServer, model: str
) -> None:
    expected = 'tool_choice: type "tool" and "any" are not supported for this model.'
    choice = {"type": "tool", "name": "read"}
    assert refused(server, model=model, tools=TOOLS, tool_choice=choice) == expected
    with pytest.raises(anthropic.BadRequestError, match="not supported for this model"):
        server.client().messages.count_tokens(
            model=model, messages=HI, tools=TOOLS, tool_choice={"type": "any"}
        )


def test_haiku_55_takes_a_forced_tool_choice_and_then_does_not_think(
    server: FakeAnthropicServer,
) -> None:
    server.enqueue(tool_reply(("read", {})))
    message = server.client().messages.create(
        model="claude-haiku-5-5", max_tokens=500, messages=HI, tools=TOOLS,
        tool_choice={"type": "any"},
    )  # fmt: skip
    assert [b.type for b in message.content] == ["tool_use"]


@pytest.mark.parametrize(("option", "value"), [("temperature", 0.2), ("top_p", 0.9), ("top_k", 5)])
def test_5x_models_refuse_sampling_options(
    server: FakeAnthropicServer, option: str, value: float
) -> None:
    # The SDK no longer has these parameters: sent as a client that still does would, under
    # the version that still had them (2026-10-21 refuses them on every model).
    old = {"anthropic-version": "2023-06-01"}
    assert option in refused(server, model=SONNET, extra_body={option: value}, extra_headers=old)
    server.expect_refusals(False)
    accepted(server, model="claude-sonnet-4-6", extra_body={option: value}, extra_headers=old)


def test_5x_models_refuse_a_prefill(server: FakeAnthropicServer) -> None:
    prefill = [*HI, {"role": "assistant", "content": "The answer is"}]
    assert refused(server, model=SONNET, messages=prefill) == (
        "This model does not support assistant message prefill. The conversation must end with "
        "a user message."
    )
    server.expect_refusals(False)
    accepted(server, model="claude-sonnet-4-6", messages=prefill)


def test_between_tools_takes_no_field_and_no_high_effort(server: FakeAnthropicServer) -> None:
    between = {"type": "between_tools", "display": "summarized"}
    assert "Extra inputs are not permitted" in refused(server, model=SONNET, thinking=between)
    message = refused(
        server, model=SONNET, thinking={"type": "between_tools"}, output_config={"effort": "max"}
    )
    assert "between_tools" in message and "max" in message
    assert "not supported" in refused(
        server, model="claude-opus-5-5", thinking={"type": "between_tools"}
    )


def test_between_tools_writes_only_progress_updates(server: FakeAnthropicServer) -> None:
    server.enqueue(tool_reply(("read", {})))
    message = server.client().messages.create(
        model=SONNET, max_tokens=500, messages=HI, tools=TOOLS, thinking={"type": "between_tools"}
    )
    assert [b.type for b in message.content] == ["thinking", "tool_use"]
    first = message.content[0]
    assert first.type == "thinking" and first.thinking  # a summary, not omitted


# ---------------------------------------------------------------------------------------------
# Mid-conversation system messages


def _with_system(at: int, model: str = SONNET) -> dict[str, Any]:
    messages: list[Any] = [
        {"role": "user", "content": "Fix it"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks"},
    ]
    messages.insert(at, {"role": "system", "content": "From now on, answer in French."})
    return {"model": model, "messages": messages}


@pytest.mark.parametrize("at", [1, 3])
def test_a_system_message_after_a_user_turn_is_accepted(
    server: FakeAnthropicServer, at: int
) -> None:
    accepted(server, **_with_system(at))


def test_a_system_message_after_tool_results_is_accepted(server: FakeAnthropicServer) -> None:
    messages: Any = [
        {"role": "user", "content": "Read"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "x"}]},
        {"role": "system", "content": "The file changed since."},
    ]  # fmt: skip
    accepted(server, model=SONNET, messages=messages, tools=TOOLS)


@pytest.mark.parametrize(
    ("at", "words"), [(0, "cannot be the first"), (2, "directly follow a user turn")]
)
def test_a_misplaced_system_message_is_refused(
    server: FakeAnthropicServer, at: int, words: str
) -> None:
    assert words in refused(server, **_with_system(at))


def test_a_system_message_between_tool_use_and_result_is_refused(
    server: FakeAnthropicServer,
) -> None:
    messages: Any = [
        {"role": "user", "content": "Read"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]},
        {"role": "system", "content": "Careful."},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "x"}]},
    ]  # fmt: skip
    assert "system message" in refused(server, model=SONNET, messages=messages, tools=TOOLS)


@pytest.mark.parametrize("model", ["claude-sonnet-5", "claude-sonnet-4-6"])
def test_models_without_system_messages_refuse_them(
    server: FakeAnthropicServer, model: str
) -> None:
    server.add_model(model)
    assert "not supported for model" in refused(server, **_with_system(1, model))


def test_a_system_message_is_part_of_the_prefix(server: FakeAnthropicServer) -> None:
    client = server.client()
    body = _with_system(3)
    server.enqueue(text_reply("D'accord."))
    reply = client.messages.create(max_tokens=500, **body)
    answer = {"role": "assistant", "content": [b.to_dict() for b in reply.content]}
    history = [*body["messages"], answer, {"role": "user", "content": "Merci"}]
    server.enqueue(text_reply("De rien."))
    client.messages.create(model=SONNET, max_tokens=500, messages=history)
    assert server.violations == []
    history[3] = {"role": "system", "content": "From now on, answer in German."}
    server.expect_refusals()
    with pytest.raises(anthropic.BadRequestError, match="bound to a different conversation"):
        client.messages.create(model=SONNET, max_tokens=500, messages=history)


# ---------------------------------------------------------------------------------------------
# The Models API


def test_the_models_api_reports_capabilities(server: FakeAnthropicServer) -> None:
    models = server.client().beta.models
    sonnet = models.retrieve(SONNET)
    assert sonnet.capabilities is not None
    types = sonnet.capabilities.thinking.types
    assert (types.adaptive.supported, types.between_tools.supported) == (True, True)
    assert (types.disabled.supported, types.enabled.supported) == (False, False)
    assert sonnet.capabilities.compaction is not None
    assert sonnet.capabilities.compaction.summarize.supported
    assert sonnet.max_tokens == 128_000 and sonnet.max_input_tokens == 1_000_000
    haiku = models.retrieve("claude-haiku-4-5").capabilities
    assert haiku is not None and haiku.compaction is not None
    assert not haiku.compaction.supported and haiku.thinking.types.enabled.supported


def test_a_model_can_be_marked_without_compaction(server: FakeAnthropicServer) -> None:
    server.models_without_compaction.add(SONNET)
    capabilities = server.client().beta.models.retrieve(SONNET).capabilities
    assert capabilities is not None and capabilities.compaction is not None
    assert not capabilities.compaction.supported


# ---------------------------------------------------------------------------------------------
# Stop reasons on demand


def test_stop_reasons_on_demand(server: FakeAnthropicServer) -> None:
    client = server.client()
    server.enqueue(
        pause_reply(),
        refusal_reply("cyber", explanation="No."),
        context_exceeded_reply(),
        cut_tool_reply("read"),
    )
    stops = []
    for _ in range(4):
        message = client.beta.messages.create(
            model=SONNET, max_tokens=500, messages=HI, tools=TOOLS
        )
        stops.append(message)
    assert [m.stop_reason for m in stops] == [
        "pause_turn", "refusal", "model_context_window_exceeded", "max_tokens"
    ]  # fmt: skip
    details = stops[1].stop_details
    assert details is not None and details.category == "cyber" and details.explanation == "No."
    assert stops[0].stop_details is None
    assert stops[3].content[-1].type == "tool_use" and stops[3].content[-1].input == {}


def test_a_paused_turn_is_sent_back_as_it_is(server: FakeAnthropicServer) -> None:
    client = server.client()
    server.enqueue(pause_reply("looking"), text_reply("found it"))
    paused = client.messages.create(model=SONNET, max_tokens=500, messages=HI)
    history: Any = [*HI, {"role": "assistant", "content": [b.to_dict() for b in paused.content]}]
    message = client.messages.create(model=SONNET, max_tokens=500, messages=history)
    assert message.content[-1].type == "text" and server.violations == []


def test_a_refusal_streams_its_stop_details(server: FakeAnthropicServer) -> None:
    server.enqueue(refusal_reply("bio", text="I can"))
    with server.client().beta.messages.stream(model=SONNET, max_tokens=500, messages=HI) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "refusal"
    assert final.stop_details is not None and final.stop_details.category == "bio"
