"""agentloop's Compaction capability in a real pydantic-ai ``Agent`` on its Anthropic model
against the test server: real SDK, real HTTP on 127.0.0.1, every request checked against the
Messages API's rules by the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason='needs the extra: pip install -e ".[pydantic-ai]"')

from fake_api import FakeAnthropicServer
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from support.integrations import (
    FACT,
    FIRST_TURN,
    SYSTEM,
    Assistant,
    lineage_chain,
    note_text,
    stored_text,
)

from agentloop.integrations.pydantic_ai import Compaction
from sessions import SessionStore, open_store

MODEL = "claude-sonnet-4-6"
WINDOW = 3_000


def _agent(server: FakeAnthropicServer, capability: Compaction) -> Agent[None, str]:
    model = AnthropicModel(
        MODEL, provider=AnthropicProvider(anthropic_client=server.async_client())
    )
    agent = Agent(
        model, instructions=SYSTEM, capabilities=[capability], model_settings={"max_tokens": 512}
    )

    @agent.tool_plain
    def note(n: int) -> str:
        """Record note number n."""
        return note_text(n)

    return agent


def _turns(
    agent: Agent[None, str], count: int, history: list[ModelMessage] | None = None
) -> list[ModelMessage]:
    prompt = FIRST_TURN if history is None else "What is next?"
    for turn in range(count):
        result = agent.run_sync(prompt, message_history=history)
        history = result.all_messages()
        prompt = f"More notes, {turn}."
    assert history is not None
    return history


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return open_store(tmp_path / "sessions.db")


def test_a_pydantic_ai_agent_compacts_twice_and_keeps_its_lineage(store: SessionStore) -> None:
    assistant = Assistant()
    with FakeAnthropicServer(handler=assistant) as server:
        capability = Compaction(context_window=WINDOW, store=store)
        history = _turns(_agent(server, capability), 8)
        assert server.violations == []
        requests = server.message_requests
    transitions = capability.transitions
    assert len(transitions) >= 2
    # Measured with the usage the API reported through pydantic-ai, not the estimate alone.
    assert all(t.summary.tokens_before_source.startswith("api") for t in transitions)
    assert all(t.summary.tokens_after < t.summary.tokens_before for t in transitions)
    # The run's history is the compacted one, every tool call beside its return.
    assert len(history) < len(requests)
    calls = [
        part
        for message in history
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    assert calls and all(FACT not in json.dumps(str(c.args)) for c in calls)

    chain = lineage_chain(store, capability.session_id or "")
    assert len(chain) == len(transitions) + 1
    assert [t.original_session_id for t in transitions] == chain[:-1]
    assert store.newest_descendant(chain[0]).id == chain[-1]
    statuses = [store.get_session(s).status for s in chain]
    assert statuses == ["compacted"] * len(transitions) + ["active"]
    root = store.get_messages(chain[0])
    assert root[0].content[0]["text"] == FIRST_TURN
    assert len(root) == transitions[0].summary.original_message_count

    assert len(assistant.summaries) >= 2
    assert all(FACT in json.dumps(body) for body in assistant.summaries)
    for session in chain[1:]:
        assert f"The deploy key is {FACT}." in stored_text(store, session)


def test_a_new_process_resumes_at_the_newest_descendant(store: SessionStore) -> None:
    with FakeAnthropicServer(handler=Assistant()) as server:
        first = Compaction(context_window=WINDOW, store=store)
        _turns(_agent(server, first), 8)
        assert first.transitions and first.session_id is not None
        root = lineage_chain(store, first.session_id)[0]
        # Another process: only the root's id and a new question, no message history.
        second = Compaction(context_window=WINDOW, store=store, session_id=root)
        result = _agent(server, second).run_sync("What is next?")
        assert server.violations == []
        sent: dict[str, Any] = server.message_requests[-1]
    assert f"The deploy key is {FACT}." in json.dumps(sent["messages"][0])
    history = str(result.all_messages())
    assert history.index(FACT) < history.index("What is next?")  # the stored history first
    assert second.session_id is not None
    assert lineage_chain(store, second.session_id)[0] == root
