"""LangChain and pydantic-ai loops on a model that thinks by default (claude-sonnet-5-5)
against the test server, which binds every signed thinking block to the exact prefix it was
produced after and refuses a request that replays one under another prefix: both go through
compactions with no request refused, the thinking and redacted thinking they send back are the
server's blocks verbatim (empty text and all), and the conversions keep them both ways."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic", reason='needs the extra: pip install -e ".[langchain]"')
pytest.importorskip("pydantic_ai", reason='needs the extra: pip install -e ".[pydantic-ai]"')

from fake_api import TEST_API_KEY, FakeAnthropicServer, Reply, ReplySpec
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest as LCModelRequest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from support.integrations import FIRST_TURN, SYSTEM, Assistant, is_summary_request, note_text

from agentloop import Message
from agentloop.integrations import langchain as lc
from agentloop.integrations import pydantic_ai as pai
from agentloop.integrations.langchain import CompactionMiddleware
from agentloop.integrations.pydantic_ai import Compaction
from sessions import SessionStore, open_store

MODEL = "claude-sonnet-5-5"
WINDOW = 6_000
THINKING = ("thinking", "redacted_thinking")


class Redacting(Assistant):
    """Every other conversation reply opens with redacted thinking instead of thinking."""

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        reply = super().__call__(body)
        if isinstance(reply, Reply) and not is_summary_request(body) and self.calls % 2:
            return dataclasses.replace(reply, redacted=True)
        return reply


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return open_store(tmp_path / "sessions.db")


def _sent_thinking(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for body in bodies
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") in THINKING
    ]


def _check(server: FakeAnthropicServer, transitions: int) -> None:
    """No request refused; thinking of both kinds went back, as the server wrote it."""
    assert server.violations == []
    assert transitions >= 1
    conversation = [b for b in server.message_requests if not is_summary_request(b)]
    sent = _sent_thinking(conversation)
    kinds = {block["type"] for block in sent}
    assert kinds == set(THINKING)
    # Display omitted: the text is empty, the signature carries it; sent back as it came.
    assert all(b["thinking"] == "" and b["signature"] for b in sent if b["type"] == "thinking")
    assert all(b["data"] for b in sent if b["type"] == "redacted_thinking")
    # Thinking is replayed after the compactions too (kept, not stripped for good).
    newest = conversation[-1]
    assert _sent_thinking([newest])


@tool
def note(n: int) -> str:
    """Record note number n."""
    return note_text(n)


def test_a_langchain_loop_on_a_thinking_model_compacts_with_no_request_refused(
    store: SessionStore,
) -> None:
    with FakeAnthropicServer(handler=Redacting()) as server:
        middleware = CompactionMiddleware(context_window=WINDOW, store=store)
        model = ChatAnthropic(
            model=MODEL,
            base_url=server.base_url,
            api_key=TEST_API_KEY,  # type: ignore[arg-type]
            max_retries=0,
            max_tokens=2_048,  # type: ignore[call-arg]
        )
        agent: Any = create_agent(
            model, tools=[note], system_prompt=SYSTEM, middleware=[middleware]
        )
        state: dict[str, Any] = {"messages": [HumanMessage(FIRST_TURN)]}
        for turn in range(6):
            state = agent.invoke(state)
            state = {**state, "messages": [*state["messages"], HumanMessage(f"More, {turn}.")]}
        _check(server, len(middleware.transitions))


def test_a_pydantic_ai_loop_on_a_thinking_model_compacts_with_no_request_refused(
    store: SessionStore,
) -> None:
    with FakeAnthropicServer(handler=Redacting()) as server:
        capability = Compaction(context_window=WINDOW, store=store)
        model = AnthropicModel(
            MODEL, provider=AnthropicProvider(anthropic_client=server.async_client())
        )
        agent = Agent(
            model,
            instructions=SYSTEM,
            capabilities=[capability],
            model_settings={"max_tokens": 2_048},
        )

        @agent.tool_plain
        def note(n: int) -> str:
            """Record note number n."""
            return note_text(n)

        history: list[ModelMessage] | None = None
        prompt = FIRST_TURN
        for turn in range(6):
            history = agent.run_sync(prompt, message_history=history).all_messages()
            prompt = f"More, {turn}."
        _check(server, len(capability.transitions))


# -- the conversions, both ways --------------------------------------------------------------

BLOCKS: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "", "signature": "sig-1"},
    {"type": "redacted_thinking", "data": "opaque-2"},
    {"type": "text", "text": "Done."},
]


def test_langchain_keeps_thinking_and_redacted_thinking_verbatim() -> None:
    streamed = [{**block, "index": n} for n, block in enumerate(BLOCKS)]
    message = lc._to_message([AIMessage(content=streamed)], False)  # type: ignore[arg-type]
    assert list(message.content) == BLOCKS
    (back,) = lc._from_message(Message.assistant(BLOCKS))
    assert isinstance(back, AIMessage) and back.content == BLOCKS


def test_langchain_mirrors_a_system_message_of_the_conversation_and_asks_for_the_beta() -> None:
    note_text_ = Message.system("The rules changed.")
    (system,) = lc._from_message(note_text_)
    assert isinstance(system, SystemMessage)
    blocks: list[str | dict[Any, Any]] = [dict(b) for b in BLOCKS]
    history = [HumanMessage("hi"), AIMessage(content=blocks), HumanMessage("go"), system]
    groups = CompactionMiddleware()._mirror.groups(history)
    assert [g.message.role for g in groups] == ["user", "assistant", "user", "system"]
    assert groups[-1].message.content == note_text_.content

    model = ChatAnthropic(model=MODEL, api_key="unused", betas=["other-beta"])  # type: ignore[call-arg,arg-type]
    block = {"type": "compaction", "content": "summary", "signature": "sig-3"}
    plain = LCModelRequest(model=model, messages=[HumanMessage("hi")])
    assert lc._sent(plain, None) is plain
    summarized = [AIMessage(content=[block]), HumanMessage("go")]
    sent = lc._sent(plain, summarized)  # type: ignore[arg-type]
    assert sent.messages == summarized
    assert sent.model_settings["betas"] == ["other-beta", "compact-2026-09-04"]


def test_pydantic_ai_keeps_thinking_and_redacted_thinking_verbatim() -> None:
    response = ModelResponse(
        parts=[
            ThinkingPart(content="", signature="sig-1", provider_name="anthropic"),
            ThinkingPart(
                content="", id="redacted_thinking", signature="opaque-2", provider_name="anthropic"
            ),
            TextPart(content="Done."),
        ]
    )
    assert list(pai._to_message([response], False).content) == BLOCKS
    back = pai._from_message(Message.assistant(BLOCKS), {}, MODEL)
    assert isinstance(back, ModelResponse)
    assert list(pai._to_message([back], False).content) == BLOCKS
    thinking, redacted, _text = back.parts
    assert isinstance(redacted, ThinkingPart) and redacted.id == "redacted_thinking"
    assert isinstance(thinking, ThinkingPart) and thinking.signature == "sig-1"


def test_an_api_summary_block_opens_the_history_alone_in_both_frameworks() -> None:
    block = {"type": "compaction", "content": "summary", "signature": "sig-3"}
    kept = Message.assistant([{"type": "text", "text": "Kept."}])
    items = [*lc._from_message(Message.assistant([block])), *lc._from_message(kept)]
    groups = CompactionMiddleware()._mirror.groups(items)
    assert [list(g.message.content) for g in groups] == [[block], list(kept.content)]
    response = pai._from_message(Message.assistant([block]), {}, MODEL)
    again = pai._from_message(kept, {}, MODEL)
    groups_p = Compaction()._mirror.groups([response, again])
    assert [list(g.message.content) for g in groups_p] == [[block], list(kept.content)]
    assert json.dumps(list(groups_p[0].message.content)) == json.dumps([block])
