"""The fake Messages API, exercised with the real ``anthropic`` SDK over real HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    Reply,
    api_error,
    check_request,
    invalid_request,
    overloaded,
    prompt_too_long,
    rate_limited,
    text_reply,
    tool_reply,
    unauthorized,
)

MODEL = "claude-sonnet-4-6"
HELLO: Any = [{"role": "user", "content": "Hello"}]  # Any: the SDK wants its TypedDicts


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


def _tool_history() -> list[Any]:
    return [
        {"role": "user", "content": "Read a.py and b.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('a')"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "print('b')"}],
                    "is_error": False,
                },
                {"type": "text", "text": "Now summarize."},
            ],
        },
    ]


def _error_body(error: anthropic.APIStatusError) -> dict[str, Any]:
    assert isinstance(error.body, dict)
    return error.body


# ---------------------------------------------------------------------------------------------
# Replies in the API's wire format


def test_json_reply_reports_counted_usage(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("Hi there."))
    message = server.client().messages.create(
        model=MODEL, max_tokens=100, messages=HELLO, system="Be brief."
    )
    assert [block.type for block in message.content] == ["text"]
    block = message.content[0]
    assert block.type == "text" and block.text == "Hi there."
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    body = server.message_requests[0]
    assert message.usage.input_tokens == server.count_input_tokens(body) > 0
    assert message.usage.output_tokens == server.count_output_tokens(
        [{"type": "text", "text": "Hi there."}]
    )
    assert server.violations == []


def test_stream_text_and_parallel_tool_calls(server: FakeAnthropicServer) -> None:
    text = "Let me read both files before I change anything."
    server.enqueue(
        tool_reply(("read", {"path": "a.py"}), ("grep", {"pattern": "def \\w+", "n": 3}), text=text)
    )
    client = server.client()
    with client.messages.stream(model=MODEL, max_tokens=100, messages=HELLO) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(deltas) > 1 and "".join(deltas) == text
    assert [block.type for block in final.content] == ["text", "tool_use", "tool_use"]
    first, second = final.content[1], final.content[2]
    assert first.type == "tool_use" and second.type == "tool_use"
    assert (first.name, first.input) == ("read", {"path": "a.py"})
    assert (second.name, second.input) == ("grep", {"pattern": "def \\w+", "n": 3})
    assert first.id != second.id
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == server.count_input_tokens(server.message_requests[0])
    assert final.usage.output_tokens > 1  # the message_delta total, not message_start's 1
    assert server.message_requests[0]["stream"] is True
    assert server.violations == []


def test_raw_stream_event_sequence(server: FakeAnthropicServer) -> None:
    server.enqueue(tool_reply(("read", {"path": "a.py"}), text="Reading."))
    events: list[Any] = list(
        server.client().messages.create(model=MODEL, max_tokens=50, messages=HELLO, stream=True)
    )
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e for e in events if e.type == "content_block_start"]
    assert [e.content_block.type for e in starts] == ["text", "tool_use"]
    json_parts = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert json.loads("".join(json_parts)) == {"path": "a.py"}
    assert kinds.count("content_block_stop") == 2


def test_thinking_block_streams_with_signature(server: FakeAnthropicServer) -> None:
    blocks = (
        {"type": "thinking", "thinking": "The user greets me.", "signature": "sig-123"},
        {"type": "text", "text": "Hello!"},
    )
    server.enqueue(Reply(content=blocks))
    with server.client().messages.stream(model=MODEL, max_tokens=50, messages=HELLO) as stream:
        final = stream.get_final_message()
    thinking = final.content[0]
    assert thinking.type == "thinking"
    assert (thinking.thinking, thinking.signature) == ("The user greets me.", "sig-123")


def test_async_client_json_and_stream(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("first"), tool_reply(("ls", {})))

    async def run() -> tuple[anthropic.types.Message, anthropic.types.Message, list[str]]:
        client = server.async_client()
        message = await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
        async with client.messages.stream(model=MODEL, max_tokens=10, messages=HELLO) as stream:
            texts = [text async for text in stream.text_stream]
            final = await stream.get_final_message()
        return message, final, texts

    message, final, texts = asyncio.run(run())
    assert message.content[0].type == "text" and message.content[0].text == "first"
    assert texts == []
    assert final.content[0].type == "tool_use" and final.content[0].input == {}
    assert server.violations == []


def test_tool_round_trip_is_accepted(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("Both files print a letter."))
    message = server.client().messages.create(
        model=MODEL,
        max_tokens=100,
        messages=_tool_history(),
    )
    assert message.content[0].type == "text"
    assert server.violations == []


def test_handler_sees_the_request_and_queue_goes_first(server: FakeAnthropicServer) -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: dict[str, Any]) -> Reply:
        seen.append(request)
        return text_reply(f"you said {request['messages'][-1]['content']}")

    server.handler = handler
    server.enqueue(text_reply("from the queue"))
    client = server.client()
    first = client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    second = client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert first.content[0].type == "text" and first.content[0].text == "from the queue"
    assert second.content[0].type == "text" and second.content[0].text == "you said Hello"
    assert len(seen) == 1 and seen[0]["model"] == MODEL


def test_unscripted_request_is_a_violation_and_not_retried(server: FakeAnthropicServer) -> None:
    with pytest.raises(anthropic.InternalServerError):
        server.client(max_retries=2).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert len(server.message_requests) == 1
    assert any("no scripted reply" in v for v in server.violations)


# ---------------------------------------------------------------------------------------------
# Usage


def test_token_factor_scales_reported_input(server: FakeAnthropicServer) -> None:
    client = server.client()
    messages: Any = [{"role": "user", "content": "word " * 200}]
    server.enqueue(text_reply("a"), text_reply("b"))
    plain = client.messages.create(model=MODEL, max_tokens=10, messages=messages)
    server.token_factor = 1.25
    scaled = client.messages.create(model=MODEL, max_tokens=10, messages=messages)
    assert scaled.usage.input_tokens == math.ceil(plain.usage.input_tokens * 1.25)


def test_system_and_tools_count_as_input(server: FakeAnthropicServer) -> None:
    client = server.client()
    tool: Any = {"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}}
    server.enqueue(text_reply("a"), text_reply("b"))
    bare = client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    full = client.messages.create(
        model=MODEL,
        max_tokens=10,
        messages=HELLO,
        system="You are careful.",
        tools=[tool],
    )
    assert full.usage.input_tokens > bare.usage.input_tokens


def test_scripted_cache_numbers_are_carved_out_of_input(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("ok", cache_read_input_tokens=3, cache_creation_input_tokens=2))
    messages: Any = [{"role": "user", "content": "a question of some length " * 5}]
    message = server.client().messages.create(model=MODEL, max_tokens=10, messages=messages)
    counted = server.count_input_tokens(server.message_requests[0])
    usage = message.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (3, 2)
    assert counted > 5 and usage.input_tokens == counted - 5


def test_prompt_caching_of_a_marked_system(server: FakeAnthropicServer) -> None:
    server.cache_min_tokens = 1  # a short system prompt (fake_api.cache's own tests: the minimum)
    system: Any = [
        {
            "type": "text",
            "text": "A long stable system prompt.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    server.enqueue(text_reply("a"), text_reply("b"))
    client = server.client()
    first = client.messages.create(model=MODEL, max_tokens=10, messages=HELLO, system=system)
    second = client.messages.create(model=MODEL, max_tokens=10, messages=HELLO, system=system)
    assert first.usage.cache_creation_input_tokens and not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.input_tokens == first.usage.input_tokens


def test_count_tokens_endpoint(server: FakeAnthropicServer) -> None:
    result = server.client().messages.count_tokens(model=MODEL, messages=HELLO, system="Hi.")
    assert result.input_tokens == server.count_input_tokens(
        {"model": MODEL, "messages": HELLO, "system": "Hi."}
    )


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("reply", "error_class", "status"),
    [
        (unauthorized(), anthropic.AuthenticationError, 401),
        (rate_limited(), anthropic.RateLimitError, 429),
        (api_error(), anthropic.InternalServerError, 500),
        (overloaded(), anthropic.InternalServerError, 529),
        (prompt_too_long(), anthropic.BadRequestError, 400),
    ],
)
def test_scripted_errors_reach_the_sdk(
    server: FakeAnthropicServer,
    reply: Any,
    error_class: type[anthropic.APIStatusError],
    status: int,
) -> None:
    server.enqueue(reply)
    with pytest.raises(error_class) as caught:
        server.client().messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert caught.value.status_code == status
    assert _error_body(caught.value)["error"]["type"] == reply.error_type
    assert reply.message in str(caught.value)


def test_prompt_too_long_message_is_the_apis(server: FakeAnthropicServer) -> None:
    server.enqueue(prompt_too_long())
    with pytest.raises(anthropic.BadRequestError) as caught:
        server.client().messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert _error_body(caught.value)["error"]["message"] == (
        "prompt is too long: 210000 tokens > 200000 maximum"
    )


def test_529_is_retried_by_the_sdk_then_surfaced(server: FakeAnthropicServer) -> None:
    server.enqueue(overloaded(), overloaded(), overloaded())
    with pytest.raises(anthropic.InternalServerError) as caught:
        server.client(max_retries=2).messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert caught.value.status_code == 529
    retry_counts = [r.headers.get("x-stainless-retry-count") for r in server.requests]
    assert retry_counts == ["0", "1", "2"]
    assert server.pending == 0


def test_529_then_success_recovers(server: FakeAnthropicServer) -> None:
    server.enqueue(overloaded(), text_reply("recovered"))
    message = server.client(max_retries=1).messages.create(
        model=MODEL, max_tokens=10, messages=HELLO
    )
    assert message.content[0].type == "text" and message.content[0].text == "recovered"
    assert len(server.message_requests) == 2


def test_server_side_context_window(server: FakeAnthropicServer) -> None:
    server.context_window = 50
    client = server.client()
    server.enqueue(text_reply("fits"))
    assert client.messages.create(model=MODEL, max_tokens=10, messages=HELLO).content
    long_messages: Any = [{"role": "user", "content": "many words here " * 40}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=MODEL, max_tokens=10, messages=long_messages)
    counted = server.count_input_tokens(server.message_requests[-1])
    assert counted > 50
    assert _error_body(caught.value)["error"]["message"] == (
        f"prompt is too long: {counted} tokens > 50 maximum"
    )
    assert server.pending == 0 and server.violations == []


def test_a_foreign_api_key_is_refused_and_never_recorded(server: FakeAnthropicServer) -> None:
    secret = "sk-ant-not-the-test-key-123"
    client = anthropic.Anthropic(api_key=secret, base_url=server.base_url, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert any("other than the test key" in v for v in server.violations)
    recorded = json.dumps([dict(r.headers) for r in server.requests]) + " ".join(server.violations)
    assert secret not in recorded and "<other key>" in recorded


def test_the_test_key_is_accepted_and_redacted(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("ok"))
    server.client().messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    headers = server.requests[0].headers
    assert TEST_API_KEY not in json.dumps(dict(headers))
    assert "<test key>" in headers.values()
    assert headers.get("anthropic-version")


# ---------------------------------------------------------------------------------------------
# Models API


def test_models_retrieve(server: FakeAnthropicServer) -> None:
    server.add_model("claude-test-1", max_input_tokens=50_000, max_tokens=4_096)
    info = server.client().models.retrieve("claude-test-1")
    assert (info.id, info.type, info.max_input_tokens, info.max_tokens) == (
        "claude-test-1",
        "model",
        50_000,
        4_096,
    )
    default = server.client().models.retrieve("claude-opus-4-6")
    assert default.max_input_tokens == 1_000_000
    listed = server.client().models.list()
    assert "claude-test-1" in [model.id for model in listed.data]


def test_models_unknown_and_unavailable(server: FakeAnthropicServer) -> None:
    client = server.client()
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-nonexistent")
    server.models_unavailable = True
    with pytest.raises(anthropic.InternalServerError):
        client.models.retrieve("claude-opus-4-6")
    assert server.violations == []


# ---------------------------------------------------------------------------------------------
# The conversation rules


def test_bad_conversation_gets_400_and_a_violation(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("never sent"))
    bad: Any = [{"role": "assistant", "content": "I speak first"}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        server.client().messages.create(model=MODEL, max_tokens=10, messages=bad)
    assert "first message" in str(caught.value)
    assert server.violations and "first message" in server.violations[0]
    assert server.pending == 1  # the scripted reply is not consumed by a refused request


def test_missing_max_tokens_is_refused_over_raw_http(server: FakeAnthropicServer) -> None:
    body = json.dumps({"model": MODEL, "messages": HELLO}).encode()
    request = urllib.request.Request(
        f"{server.base_url}/v1/messages",
        data=body,
        headers={
            "x-api-key": TEST_API_KEY,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["error"]["type"] == "invalid_request_error"
    assert any("max_tokens" in v for v in server.violations)


def _request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 10, "messages": messages, **extra}


def _tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "read", "input": {}}


def _tool_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def test_valid_requests_pass_the_checker() -> None:
    assert check_request(_request(_tool_history())) == []
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [thinking, _tool_use("t1")]},
        {"role": "user", "content": [_tool_result("t1")]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]
    system: Any = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    assert check_request(_request(history, system=system, tools=tools)) == []
    assert check_request(_request(history, metadata={"user_id": "u1"})) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_request([{"role": "assistant", "content": "hi"}]), "first message"),
        (
            _request([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
            "alternate",
        ),
        (
            _request(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": [_tool_use("t1")]},
                    {"role": "user", "content": "no result"},
                ]
            ),
            "without `tool_result`",
        ),
        (
            _request(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "text"},
                    {"role": "user", "content": [_tool_result("t9")]},
                ]
            ),
            "unexpected `tool_use_id`",
        ),
        (
            _request(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": [_tool_use("t1")]},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "x"}, _tool_result("t1")],
                    },
                ]
            ),
            "must come first",
        ),
        (
            _request(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": [_tool_use("t1")]},
                ]
            ),
            "final assistant message",
        ),
        (_request([{"role": "user", "content": []}]), "non-empty content"),
        (_request([{"role": "user", "content": ""}]), "non-empty content"),
        (_request([{"role": "user", "content": [{"type": "text", "text": "  "}]}]), "whitespace"),
        ({"messages": HELLO, "max_tokens": 5}, "model"),
        ({"model": MODEL, "messages": HELLO}, "max_tokens"),
        (_request([]), "at least one message"),
        (_request(HELLO, metadata={"purpose": "summary"}), "metadata.purpose"),
        (_request(HELLO, purpose="summary"), "purpose: Extra inputs"),
        (
            _request(
                [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "x", "parsed_output": None}],
                    }
                ]
            ),
            "parsed_output: Extra inputs",
        ),
        (_request([{"role": "user", "content": [_tool_use("t1")]}]), "only allowed in assistant"),
        (
            _request(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": [_tool_use("t1")]},
                    {"role": "user", "content": [_tool_result("t1"), _tool_result("t1")]},
                ]
            ),
            "more than one tool_result",
        ),
        (_request(HELLO, system=[{"type": "text", "text": ""}]), "system.0"),
    ],
)
def test_checker_finds_each_rule_violation(body: dict[str, Any], expected: str) -> None:
    problems = check_request(body)
    assert any(expected in problem for problem in problems), problems


def test_invalid_request_helper_round_trips(server: FakeAnthropicServer) -> None:
    server.enqueue(invalid_request("tools.0.name: String should match pattern"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        server.client().messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert "String should match pattern" in str(caught.value)
