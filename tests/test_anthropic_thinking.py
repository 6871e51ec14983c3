"""The 2026 request rules of AnthropicModel over the real SDK, against the fake API: the Models
API's capabilities (read once, with a fallback), thinking and effort, thinking blocks sent back
verbatim, ``input_transformations`` / ``stop_details``, the binding 400, on-demand compaction
and its failures, ``max_tokens`` above the SDK's non-streaming limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    Reply,
    refusal_reply,
    text_reply,
    tool_reply,
)

from agentloop import Message, ModelRequest
from agentloop._adapters.anthropic import AnthropicModel, build_request_kwargs
from agentloop._adapters.anthropic_capabilities import builtin_capabilities
from agentloop._core.values.model import OnDemandCompaction, Thinking
from agentloop._errors import CompactionFailed, ModelError, ThinkingBindingError

SONNET = "claude-sonnet-5-5"
OLD = "claude-haiku-4-5"
SYSTEM = "You are a careful coding agent."
READ_TOOL = {
    "name": "read_file",
    "description": "Read a file of the workspace.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def _model(server: FakeAnthropicServer, **options: Any) -> AnthropicModel:
    options.setdefault("max_retries", 0)
    return AnthropicModel(api_key=TEST_API_KEY, base_url=server.base_url, **options)


def _request(*messages: Message, model: str = SONNET, **options: Any) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=messages or (Message.user("Read a.py please"),),
        system=SYSTEM,
        tools=(READ_TOOL,),
        max_tokens=options.pop("max_tokens", 4096),
        **options,
    )


def _betas(server: FakeAnthropicServer, index: int = -1) -> set[str]:
    posts = [r for r in server.requests if r.path == "/v1/messages"]
    header = posts[index].headers.get("anthropic-beta") or ""
    return {part.strip() for part in header.split(",") if part.strip()}


class _Listener:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []

    def __call__(self, delta: str) -> None:
        self.text.append(delta)

    def on_thinking(self, delta: str) -> None:
        self.thinking.append(delta)


# ---------------------------------------------------------------------------------------------
# Capabilities


def test_capabilities_are_read_once_with_the_compaction_beta(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("one"), text_reply("two"))
    model = _model(fake_api)
    model.complete(_request())
    model.complete(_request())
    lookups = [r for r in fake_api.requests if r.method == "GET"]
    assert [r.path for r in lookups] == [f"/v1/models/{SONNET}"]
    assert "compact-2026-09-04" in lookups[0].headers["anthropic-beta"]
    caps = model.capabilities(SONNET)
    assert caps.source == "models_api" and caps.on_demand_compaction and caps.thinks_by_default
    assert caps.max_output_tokens == 128_000 and "between_tools" in caps.thinking_types
    assert model.supports_on_demand_compaction(SONNET)
    assert model.max_reply_tokens(SONNET) == 128_000
    assert fake_api.violations == []


def test_a_failing_lookup_falls_back_by_model_id(fake_api: FakeAnthropicServer) -> None:
    fake_api.models_unavailable = True
    fake_api.enqueue(text_reply("still thinking"))
    model = _model(fake_api)
    response = model.complete(_request())
    lookups = len([r for r in fake_api.requests if r.method == "GET"])
    assert response.text == "still thinking" and lookups == 2  # one lookup, its one retry
    # The table says Sonnet 5.5 thinks: the request asks for it all the same.
    assert fake_api.message_requests[0]["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert not model.supports_on_demand_compaction(SONNET)  # never assumed
    with pytest.raises(ModelError, match="could not ask the Models API"):
        model.fetch_limits(SONNET)
    # Asked once: a failure is remembered too.
    assert len([r for r in fake_api.requests if r.method == "GET"]) == lookups
    assert fake_api.violations == []


def test_bedrock_never_has_on_demand_compaction() -> None:
    model = AnthropicModel(api_key="k", base_url="https://bedrock-runtime.us-east-1.amazonaws.com")
    assert model.supports_on_demand_compaction(SONNET) is False


def test_models_without_capabilities_use_the_table(fake_api: FakeAnthropicServer) -> None:
    table = builtin_capabilities("claude-opus-4-8-20260101")
    assert table.thinking_types == {"adaptive", "disabled"} and not table.thinks_by_default
    assert builtin_capabilities("claude-haiku-5-5").thinks_by_default
    assert builtin_capabilities("claude-sonnet-5-5").system_messages
    assert not builtin_capabilities("claude-sonnet-5").system_messages
    unknown = builtin_capabilities("claude-nova-9")
    assert not unknown.thinking_types and not unknown.on_demand_compaction


# ---------------------------------------------------------------------------------------------
# Thinking and effort


def test_five_five_thinks_adaptively_with_summarized_display(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(tool_reply(("read_file", {"path": "a.py"})))
    listener = _Listener()
    response = _model(fake_api).complete(_request(), on_text=listener)
    body = fake_api.message_requests[0]
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert "output_config" not in body and "tool_choice" not in body
    assert "thinking-binding-controls-2026-08-01" in _betas(fake_api)
    thinking = [b for b in response.content if b["type"] == "thinking"]
    assert thinking and all(b["signature"] for b in thinking)
    assert "".join(listener.thinking).strip()  # the notes reached the listener
    assert fake_api.violations == []


def test_effort_and_drop_block_go_where_the_api_wants_them(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("ok"))
    _model(fake_api).complete(_request(thinking=Thinking(effort="xhigh", drop_block=True)))
    body = fake_api.message_requests[0]
    assert body["output_config"] == {"effort": "xhigh"}
    assert body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    assert "thinking-binding-controls-2026-08-01" in _betas(fake_api)
    assert fake_api.violations == []


def test_models_without_thinking_get_no_thinking_param() -> None:
    caps = builtin_capabilities(OLD)
    plain = build_request_kwargs(_request(model=OLD), capabilities=caps)
    assert "thinking" not in plain and "betas" not in plain
    # An effort the model does not take is not sent; adaptive is never forced on it.
    asked = build_request_kwargs(
        _request(model=OLD, thinking=Thinking(effort="max")), capabilities=caps
    )
    assert "thinking" not in asked and "output_config" not in asked
    for kind in ("disabled", "enabled"):
        kwargs = build_request_kwargs(_request(thinking=Thinking(kind=kind)))
        assert "thinking" not in kwargs  # never sent: a 400 on the 5.5 models


def test_thinking_blocks_go_back_exactly_as_received(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(Reply(content=({"type": "text", "text": "first"},), redacted=True))
    model = _model(fake_api)
    first = model.complete(_request(thinking=Thinking(display="omitted")))
    blocks = {b["type"]: b for b in first.content}
    assert set(blocks["redacted_thinking"]) == {"type", "data"}
    fake_api.enqueue(text_reply("second"))
    history = (Message.user("Read a.py please"), first.to_message(), Message.user("And b.py?"))
    model.complete(_request(*history))
    sent = fake_api.message_requests[1]["messages"][1]["content"]
    assert sent[: len(first.content)] == [
        {k: v for k, v in b.items() if k != "cache_control"} for b in first.content
    ]
    assert all("citations" not in b for b in sent)
    assert fake_api.violations == []


def test_an_empty_thinking_text_is_kept(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("first"))
    model = _model(fake_api)
    first = model.complete(_request(thinking=Thinking(display="omitted")))
    thinking = next(b for b in first.content if b["type"] == "thinking")
    assert thinking["thinking"] == "" and thinking["signature"]
    fake_api.enqueue(text_reply("second"))
    model.complete(
        _request(Message.user("Read a.py please"), first.to_message(), Message.user("b"))
    )
    assert fake_api.message_requests[1]["messages"][1]["content"][0]["thinking"] == ""
    assert fake_api.violations == []


# ---------------------------------------------------------------------------------------------
# What the response says


@pytest.mark.parametrize("stream", [False, True])
def test_stop_details_of_a_refusal(fake_api: FakeAnthropicServer, stream: bool) -> None:
    fake_api.enqueue(refusal_reply("cyber", text="I"))
    response = _model(fake_api).complete(_request(), on_text=_Listener() if stream else None)
    assert response.stop_reason == "refusal"
    assert response.stop_details is not None and response.stop_details["category"] == "cyber"
    assert fake_api.violations == []


def test_an_edited_prefix_is_a_binding_error_and_drop_block_reports_it(
    fake_api: FakeAnthropicServer,
) -> None:
    fake_api.enqueue(text_reply("first"))
    model = _model(fake_api)
    first = model.complete(_request())
    history = (Message.user("Read a.py please"), first.to_message(), Message.user("And b.py?"))
    edited = ModelRequest(
        model=SONNET, messages=history, system=SYSTEM + " Changed.", tools=(READ_TOOL,)
    )
    fake_api.expect_refusals()
    with pytest.raises(ThinkingBindingError) as refused:
        model.complete(edited)
    assert "bound to a different conversation" in str(refused.value)
    assert "\n" not in str(refused.value)
    fake_api.enqueue(text_reply("second"))
    for stream in (False, True):
        if stream:
            fake_api.enqueue(text_reply("third"))
        retried = ModelRequest(
            model=SONNET,
            messages=history,
            system=SYSTEM + " Changed.",
            tools=(READ_TOOL,),
            thinking=Thinking(drop_block=True),
        )
        response = model.complete(retried, on_text=_Listener() if stream else None)
        dropped = [t for t in response.input_transformations if t["type"] == "thinking_dropped"]
        assert dropped and dropped[0]["path"].startswith("messages.1.content.")
        assert dropped[0]["reason"] == "prefix_binding_mismatch"


# ---------------------------------------------------------------------------------------------
# On-demand compaction


def _compaction_request(**options: Any) -> ModelRequest:
    return _request(
        Message.user("Read a.py please"),
        Message.assistant("a.py prints hello."),
        compaction=OnDemandCompaction(options.pop("instructions", "Keep the file names.")),
        cache_newest=False,
        **options,
    )


@pytest.mark.parametrize("stream", [False, True])
def test_on_demand_compaction_request_and_reply(
    fake_api: FakeAnthropicServer, stream: bool
) -> None:
    model = _model(fake_api)
    response = model.complete(_compaction_request(), on_text=_Listener() if stream else None)
    body = fake_api.message_requests[0]
    assert body["compaction"] == {"type": "summarize", "instructions": "Keep the file names."}
    assert "context_management" not in body and "stop_sequences" not in body
    assert body["system"][0]["text"] == SYSTEM and body["tools"] == [READ_TOOL]
    assert "compact-2026-09-04" in _betas(fake_api)
    assert response.stop_reason == "compaction"
    (block,) = response.content
    assert block["type"] == "compaction" and block["content"] and block["signature"]
    assert None not in block.values()
    assert response.usage.input_tokens == 0 and response.iterations[0].kind == "compaction"
    assert response.iterations[0].usage.input_tokens > 0
    # Every later request carrying the block needs the beta (and the block byte-exact).
    fake_api.enqueue(text_reply("after the summary"))
    later = model.complete(_request(response.to_message(), Message.user("Go on")))
    assert later.text == "after the summary"
    assert "compact-2026-09-04" in _betas(fake_api)
    assert fake_api.violations == []


def test_blank_and_long_instructions(fake_api: FakeAnthropicServer) -> None:
    kwargs = build_request_kwargs(_compaction_request(instructions="   "))
    assert kwargs["compaction"] == {"type": "summarize"}
    kwargs = build_request_kwargs(_compaction_request(instructions="x" * 20_000))
    assert len(kwargs["compaction"]["instructions"]) == 16_384


@pytest.mark.parametrize("failure", ["max_tokens", "refusal", "tool_use", "end_turn"])
def test_a_compaction_without_summary_fails_in_one_line(
    fake_api: FakeAnthropicServer, failure: str
) -> None:
    fake_api.fail_next_compactions(failure)
    with pytest.raises(CompactionFailed) as failed:
        _model(fake_api).complete(_compaction_request())
    assert failed.value.stop_reason == failure
    assert failure in str(failed.value) and "\n" not in str(failed.value)


def test_compaction_unavailable_is_retried_then_fails_in_one_line(
    fake_api: FakeAnthropicServer,
) -> None:
    fake_api.fail_next_compactions("unavailable", "unavailable")
    with pytest.raises(CompactionFailed) as failed:
        _model(fake_api, max_retries=1).complete(_compaction_request())
    assert failed.value.status_code == 529
    assert "compaction_unavailable" in str(failed.value) and "after 1 retry" in str(failed.value)
    assert len(fake_api.message_requests) == 2  # the SDK's retry
    # Retried once more, it goes through: the failure was transient.
    fake_api.fail_next_compactions("unavailable")
    response = _model(fake_api, max_retries=1).complete(_compaction_request())
    assert response.stop_reason == "compaction"


def test_threshold_and_on_demand_betas_together() -> None:
    threshold = {"type": "compaction", "content": "old", "signature": "s"}
    history = (
        Message.user("Read a.py please"),
        Message("assistant", (threshold, {"type": "text", "text": "done"})),
        Message.user("Go on"),
    )
    kwargs = build_request_kwargs(_request(*history, compaction=OnDemandCompaction()))
    assert {"compact-2026-01-12", "compact-2026-09-04"} <= set(kwargs["betas"])
    leading = (Message("assistant", ({**threshold, "content": "new"},)), Message.user("Go on"))
    assert "compact-2026-01-12" not in build_request_kwargs(_request(*leading))["betas"]


# ---------------------------------------------------------------------------------------------
# max_tokens


def test_a_large_max_tokens_without_a_listener_is_streamed(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("long"))
    response = _model(fake_api).complete(_request(max_tokens=128_000))
    assert response.text == "long"
    assert fake_api.message_requests[0]["max_tokens"] == 128_000
    assert fake_api.message_requests[0]["stream"] is True
    assert fake_api.violations == []


def test_async_path_reads_capabilities_with_the_async_client(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("async"))
    model = _model(fake_api)
    response = asyncio.run(model.acomplete(_request()))
    assert response.text == "async"
    assert fake_api.message_requests[0]["thinking"]["type"] == "adaptive"
    assert all(r.headers["x-stainless-async"] != "false" for r in fake_api.requests)
