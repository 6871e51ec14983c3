"""AnthropicModel over the real ``anthropic`` SDK, against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    Reply,
    api_error,
    invalid_request,
    overloaded,
    prompt_too_long,
    rate_limited,
    text_reply,
    tool_reply,
    unauthorized,
)

from agentloop import Message, ModelError, ModelRequest, PromptTooLongError
from agentloop._adapters.anthropic import AnthropicModel, build_request_kwargs, fetch_model_limits
from agentloop._errors import ConfigurationError

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful coding agent."
READ_TOOL = {
    "name": "read_file",
    "description": "Read a file of the workspace.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


def _model(server: FakeAnthropicServer, max_retries: int = 0) -> AnthropicModel:
    return AnthropicModel(api_key=TEST_API_KEY, base_url=server.base_url, max_retries=max_retries)


def _request(*messages: Message, **options: Any) -> ModelRequest:
    return ModelRequest(
        model=MODEL,
        messages=messages or (Message.user("Read a.py please"),),
        system=SYSTEM,
        tools=(READ_TOOL,),
        max_tokens=1024,
        **options,
    )


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# ---------------------------------------------------------------------------------------------
# Requests and responses


def test_complete_sends_cached_system_and_maps_the_reply(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("a.py prints hello."))
    response = _model(server).complete(_request(metadata={"purpose": "summary"}))

    assert response.text == "a.py prints hello."
    assert response.content == ({"type": "text", "text": "a.py prints hello."},)
    assert response.stop_reason == "end_turn"
    assert response.model == MODEL
    body = server.message_requests[0]
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [READ_TOOL]
    assert body["max_tokens"] == 1024
    assert "metadata" not in body and "stream" not in body
    assert response.usage.input_tokens == server.count_input_tokens(body)
    assert response.usage.output_tokens == server.count_output_tokens(response.content)
    assert server.violations == []


def test_empty_system_and_tools_are_omitted() -> None:
    kwargs = build_request_kwargs(ModelRequest(model=MODEL, messages=[Message.user("hi")]))
    assert set(kwargs) == {"model", "max_tokens", "messages"}
    # The newest message is the cache breakpoint the next request reads.
    assert kwargs["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]


def test_streaming_passes_each_text_delta(server: FakeAnthropicServer) -> None:
    text = "Reading the file now, then I will explain what it does."
    server.enqueue(text_reply(text))
    deltas: list[str] = []
    response = _model(server).complete(_request(), on_text=deltas.append)
    assert len(deltas) > 1 and "".join(deltas) == text
    assert response.content == ({"type": "text", "text": text},)
    assert server.message_requests[0]["stream"] is True
    assert response.usage.input_tokens == server.count_input_tokens(server.message_requests[0])
    assert server.violations == []


@pytest.mark.parametrize("streaming", [False, True])
def test_tool_use_round_trip_is_sent_back_verbatim(
    server: FakeAnthropicServer, streaming: bool
) -> None:
    server.enqueue(
        tool_reply(("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"}), text="Both."),
        text_reply("a.py and b.py print letters."),
    )
    model = _model(server)
    on_text = (lambda _text: None) if streaming else None
    user = Message.user("Read a.py and b.py")
    first = model.complete(_request(user), on_text=on_text)

    assert first.stop_reason == "tool_use"
    assert [(b["name"], b["input"]) for b in first.tool_uses] == [
        ("read_file", {"path": "a.py"}),
        ("read_file", {"path": "b.py"}),
    ]
    for block in first.content:  # only fields the API takes back (no parsed_output, caller...)
        expected = {"text": {"type", "text"}, "tool_use": {"type", "id", "name", "input"}}
        assert set(block) == expected[block["type"]]
    results = Message.user(
        [
            {"type": "tool_result", "tool_use_id": b["id"], "content": f"print({b['id']!r})"}
            for b in first.tool_uses
        ]
    )
    second = model.complete(_request(user, first.to_message(), results), on_text=on_text)

    assert second.text == "a.py and b.py print letters."
    sent_assistant = server.message_requests[1]["messages"][1]
    assert sent_assistant == {"role": "assistant", "content": list(first.content)}
    assert server.violations == []


def test_thinking_blocks_come_back_sendable(server: FakeAnthropicServer) -> None:
    thinking = {"type": "thinking", "thinking": "Check a.py first.", "signature": "sig-1"}
    server.enqueue(
        Reply(content=(thinking, {"type": "redacted_thinking", "data": "opaque"})),
        text_reply("done"),
    )
    model = _model(server)
    first = model.complete(_request(), on_text=lambda _text: None)
    assert first.content == (thinking, {"type": "redacted_thinking", "data": "opaque"})
    model.complete(_request(Message.user("go"), first.to_message(), Message.user("and?")))
    assert server.violations == []


def test_usage_with_cache_numbers(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("ok", cache_read_input_tokens=7, cache_creation_input_tokens=5))
    response = _model(server).complete(_request(Message.user("a question of some length " * 5)))
    counted = server.count_input_tokens(server.message_requests[0])
    usage = response.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (7, 5)
    assert usage.input_tokens == counted - 12
    assert usage.context_tokens == counted + usage.output_tokens


def test_prompt_caching_of_the_system_prompt_is_reported(server: FakeAnthropicServer) -> None:
    server.cache_min_tokens = 1  # the system prompt here is shorter than the API's minimum
    server.enqueue(text_reply("a"), text_reply("b"))
    model = _model(server)
    first = model.complete(_request())
    second = model.complete(_request())
    assert first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_errors_in_on_text_are_not_disguised(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("some streamed text"))

    def broken(_text: str) -> None:
        raise RuntimeError("terminal went away")

    with pytest.raises(RuntimeError, match="terminal went away"):
        _model(server).complete(_request(), on_text=broken)


# ---------------------------------------------------------------------------------------------
# Error mapping


def _one_line_error(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("streaming", [False, True])
def test_401_says_check_the_key(server: FakeAnthropicServer, streaming: bool) -> None:
    server.enqueue(unauthorized())
    on_text = (lambda _text: None) if streaming else None
    with pytest.raises(ModelError) as caught:
        _model(server).complete(_request(), on_text=on_text)
    assert not isinstance(caught.value, PromptTooLongError)
    assert _one_line_error(caught.value) == "authentication failed: check ANTHROPIC_API_KEY"
    assert caught.value.status_code == 401


@pytest.mark.parametrize("streaming", [False, True])
def test_529_after_the_sdks_retries(server: FakeAnthropicServer, streaming: bool) -> None:
    server.enqueue(overloaded(), overloaded(), overloaded())
    on_text = (lambda _text: None) if streaming else None
    with pytest.raises(ModelError) as caught:
        _model(server, max_retries=2).complete(_request(), on_text=on_text)
    text = _one_line_error(caught.value)
    assert "overloaded (529)" in text and "after 2 retries" in text
    assert caught.value.status_code == 529
    assert len(server.message_requests) == 3  # the SDK really retried


def test_529_then_success_is_invisible(server: FakeAnthropicServer) -> None:
    server.enqueue(overloaded(), text_reply("fine"))
    assert _model(server, max_retries=1).complete(_request()).text == "fine"


@pytest.mark.parametrize(
    ("reply", "status", "fragment"),
    [
        (rate_limited(), 429, "rate limited by the API (429): Number of request tokens"),
        (api_error(), 500, "server error (500): Internal server error"),
        (invalid_request("tools.0.name: bad"), 400, "refused the request (400 "),
    ],
)
def test_other_statuses_are_one_line_model_errors(
    server: FakeAnthropicServer, reply: Any, status: int, fragment: str
) -> None:
    server.enqueue(reply)
    with pytest.raises(ModelError) as caught:
        _model(server).complete(_request())
    assert not isinstance(caught.value, PromptTooLongError)
    assert fragment in _one_line_error(caught.value)
    assert caught.value.status_code == status


def test_prompt_too_long_is_its_own_error(server: FakeAnthropicServer) -> None:
    server.enqueue(prompt_too_long())
    with pytest.raises(PromptTooLongError) as caught:
        _model(server).complete(_request())
    assert "prompt is too long: 210000 tokens > 200000 maximum" in _one_line_error(caught.value)
    assert caught.value.status_code == 400


def test_input_plus_max_tokens_over_the_window_is_prompt_too_long(
    server: FakeAnthropicServer,
) -> None:
    server.enqueue(
        invalid_request(
            "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again"
        )
    )
    with pytest.raises(PromptTooLongError, match="exceed context limit"):
        _model(server).complete(_request())


def test_prompt_too_long_from_the_servers_window(server: FakeAnthropicServer) -> None:
    server.context_window = 100
    with pytest.raises(PromptTooLongError, match="> 100 maximum"):
        _model(server).complete(_request(Message.user("lots of words " * 100)))
    assert server.violations == []


def test_connection_refused_names_the_url() -> None:
    base_url = f"http://127.0.0.1:{_unused_port()}"
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=base_url, max_retries=0)
    with pytest.raises(ModelError) as caught:
        model.complete(_request())
    text = _one_line_error(caught.value)
    assert text.startswith(f"could not reach the API at {base_url}")
    assert caught.value.status_code is None


def test_timeout_is_a_model_error(server: FakeAnthropicServer) -> None:
    server.enqueue(Reply(content=({"type": "text", "text": "too late"},), delay=1.0))
    model = AnthropicModel(
        api_key=TEST_API_KEY, base_url=server.base_url, max_retries=0, timeout=0.2
    )
    with pytest.raises(ModelError) as caught:
        model.complete(_request())
    assert _one_line_error(caught.value) == (
        f"could not reach the API at {server.base_url}: the request timed out"
    )


def test_no_api_key_anywhere_is_a_model_error(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Nothing for the SDK to discover: no credential variables, no config directory.
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in [*(n for n in os.environ if n.startswith("ANTHROPIC_")), "XDG_CONFIG_HOME"]:
        monkeypatch.delenv(name, raising=False)
    model = AnthropicModel(base_url=server.base_url, max_retries=0)
    with pytest.raises(ModelError, match="no API key: set ANTHROPIC_API_KEY"):
        model.complete(_request())
    with pytest.raises(ModelError, match="no API key"):
        fetch_model_limits("claude-opus-4-6", base_url=server.base_url)
    assert server.requests == []


# ---------------------------------------------------------------------------------------------
# Async


def test_async_json_stream_and_errors(server: FakeAnthropicServer) -> None:
    text = "An async streamed reply with several chunks."
    server.enqueue(text_reply("plain"), text_reply(text), overloaded(), overloaded())
    model = _model(server, max_retries=1)
    deltas: list[str] = []

    async def run() -> tuple[str, str, ModelError]:
        plain = await model.acomplete(_request())
        streamed = await model.acomplete(_request(), on_text=deltas.append)
        try:
            await model.acomplete(_request())
        except ModelError as error:
            return plain.text, streamed.text, error
        raise AssertionError("the 529 was not raised")

    plain, streamed, error = asyncio.run(run())
    assert (plain, streamed) == ("plain", text)
    assert len(deltas) > 1 and "".join(deltas) == text
    assert error.status_code == 529 and "after 1 retry" in str(error)
    assert all(r.headers["x-stainless-async"] != "false" for r in server.requests)
    assert server.violations == []


def test_async_with_only_a_sync_client_runs_in_a_thread(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("via thread"))
    model = AnthropicModel(server.client())
    response = asyncio.run(model.acomplete(_request()))
    assert response.text == "via thread"


def test_given_clients_are_used_as_they_are(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("sync"), text_reply("async"))
    model = AnthropicModel(server.client(), async_client=server.async_client())
    assert model.complete(_request()).text == "sync"
    assert asyncio.run(model.acomplete(_request())).text == "async"
    sync_request, async_request = [r for r in server.requests if r.path == "/v1/messages"]
    assert sync_request.headers["x-stainless-async"] == "false"
    assert async_request.headers["x-stainless-async"] != "false"


def test_only_an_async_client_refuses_sync_calls(server: FakeAnthropicServer) -> None:
    model = AnthropicModel(async_client=server.async_client())
    with pytest.raises(ConfigurationError, match="only an async_client"):
        model.complete(_request())


def test_clients_and_settings_are_exclusive(server: FakeAnthropicServer) -> None:
    with pytest.raises(ConfigurationError):
        AnthropicModel(server.client(), api_key=TEST_API_KEY)


# ---------------------------------------------------------------------------------------------
# Models API


def test_fetch_model_limits(server: FakeAnthropicServer) -> None:
    server.add_model("claude-test-1", max_input_tokens=123_000, max_tokens=9_000)
    assert fetch_model_limits("claude-test-1", api_key=TEST_API_KEY, base_url=server.base_url) == (
        123_000,
        9_000,
    )
    assert fetch_model_limits("claude-opus-4-6", client=server.client()) == (1_000_000, 128_000)
    assert server.requests[0].path == "/v1/models/claude-test-1"
    assert server.violations == []


def test_fetch_model_limits_failures_are_model_errors(server: FakeAnthropicServer) -> None:
    with pytest.raises(ModelError) as unknown:
        fetch_model_limits("claude-nope", client=server.client())
    assert unknown.value.status_code == 404 and "claude-nope" in _one_line_error(unknown.value)
    server.models_unavailable = True
    with pytest.raises(ModelError) as unavailable:
        fetch_model_limits("claude-opus-4-6", api_key=TEST_API_KEY, base_url=server.base_url)
    assert unavailable.value.status_code == 500
    assert len(server.requests) == 3  # the unknown model once, the outage once plus one retry
    with pytest.raises(ModelError, match="could not reach the API"):
        fetch_model_limits(
            "claude-opus-4-6",
            client=anthropic.Anthropic(
                api_key=TEST_API_KEY, base_url=f"http://127.0.0.1:{_unused_port()}", max_retries=0
            ),
        )


# ---------------------------------------------------------------------------------------------
# Import cost


def test_importing_agentloop_does_not_import_anthropic() -> None:
    code = (
        "import sys, json, agentloop, agentloop._cli.main, agentloop._adapters.anthropic\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] "
        "in ('anthropic', 'httpx', 'httpx2'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(result.stdout) == []


def test_on_retry_reports_each_retry_with_its_reason(server: FakeAnthropicServer) -> None:
    seen: list[tuple[int, int, str]] = []
    server.enqueue(overloaded(), overloaded(), text_reply("third time lucky"))
    model = AnthropicModel(
        api_key=TEST_API_KEY,
        base_url=server.base_url,
        max_retries=2,
        on_retry=lambda attempt, most, reason: seen.append((attempt, most, reason)),
    )
    assert model.complete(_request()).text == "third time lucky"
    assert seen == [(1, 2, "the API answered 529"), (2, 2, "the API answered 529")]


def test_on_retry_reports_a_refused_connection_too() -> None:
    seen: list[tuple[int, int, str]] = []
    model = AnthropicModel(
        api_key=TEST_API_KEY,
        base_url=f"http://127.0.0.1:{_unused_port()}",
        max_retries=1,
        on_retry=lambda attempt, most, reason: seen.append((attempt, most, reason)),
    )
    with pytest.raises(ModelError, match="could not reach the API"):
        model.complete(_request())
    assert seen == [(1, 1, "no answer (the connection failed or timed out)")]
