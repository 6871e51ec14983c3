"""agentloop's CompactionMiddleware in a real LangChain v1 agent (``create_agent`` with
``ChatAnthropic``) against the test server: real SDK, real HTTP on 127.0.0.1, every request
checked against the Messages API's rules by the server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_anthropic", reason='needs the extra: pip install -e ".[langchain]"')

from fake_api import TEST_API_KEY, FakeAnthropicServer
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from support.integrations import (
    FACT,
    FIRST_TURN,
    SYSTEM,
    Assistant,
    lineage_chain,
    note_text,
    stored_text,
)

from agentloop import FileTouched, default_tool_facts
from agentloop.integrations.langchain import SESSION_KEY, CompactionMiddleware
from sessions import SessionStore, open_store

MODEL = "claude-sonnet-4-6"
WINDOW = 3_000


@tool
def note(n: int) -> str:
    """Record note number n."""
    return note_text(n)


def _agent(server: FakeAnthropicServer, middleware: CompactionMiddleware) -> Any:
    model = ChatAnthropic(
        model=MODEL,
        base_url=server.base_url,
        api_key=TEST_API_KEY,  # type: ignore[arg-type]
        max_retries=0,
        max_tokens=512,  # type: ignore[call-arg]
    )
    return create_agent(model, tools=[note], system_prompt=SYSTEM, middleware=[middleware])


def _turns(agent: Any, count: int, state: dict[str, Any] | None = None) -> dict[str, Any]:
    state = state or {"messages": [HumanMessage(FIRST_TURN)]}
    for turn in range(count):
        state = agent.invoke(state)
        state = {**state, "messages": [*state["messages"], HumanMessage(f"More notes, {turn}.")]}
    return state


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return open_store(tmp_path / "sessions.db")


def test_a_langchain_agent_compacts_twice_and_keeps_its_lineage(store: SessionStore) -> None:
    assistant = Assistant()
    with FakeAnthropicServer(handler=assistant) as server:
        middleware = CompactionMiddleware(context_window=WINDOW, store=store)
        agent = _agent(server, middleware)
        state = _turns(agent, 6)
        assert server.violations == []
        requests = server.message_requests
    transitions = middleware.transitions
    assert len(transitions) >= 2
    # Measured with the usage the API reported through LangChain, not the estimate alone.
    assert all(t.summary.tokens_before_source.startswith("api") for t in transitions)
    assert all(t.summary.tokens_after < t.summary.tokens_before for t in transitions)
    # The graph state holds the compacted history: far fewer messages than were exchanged.
    assert state[SESSION_KEY] == middleware.session_id == transitions[-1].new_session_id
    calls = sum(len(m.tool_calls) for m in state["messages"] if isinstance(m, AIMessage))
    results = sum(isinstance(m, ToolMessage) for m in state["messages"])
    assert calls == results and len(state["messages"]) < 3 * len(requests)

    # Parent and child in the store: a chain root → child → grandchild, resumed at the newest.
    chain = lineage_chain(store, middleware.session_id or "")
    assert len(chain) == len(transitions) + 1
    assert [t.original_session_id for t in transitions] == chain[:-1]
    assert store.newest_descendant(chain[0]).id == chain[-1]
    assert [store.get_session(s).status for s in chain] == ["compacted"] * len(transitions) + [
        "active"
    ]
    # Each child records where its figures came from, as the agent's own loop does: the
    # sessions commands show them the same way (no "~" on what the API counted).
    for transition, child in zip(transitions, chain[1:], strict=True):
        recorded = store.get_session(child).metadata["compaction_token_sources"]
        assert recorded == {
            "tokens_before": transition.summary.tokens_before_source,
            "tokens_after": transition.summary.tokens_after_source,
        }
    # Nothing is thrown away: the root keeps the first turn verbatim, every message it had.
    root = store.get_messages(chain[0])
    assert root[0].content[0]["text"] == FIRST_TURN
    assert len(root) == transitions[0].summary.original_message_count

    # The first turn's fact reached the summarizer and so the summary, through two compactions.
    assert len(assistant.summaries) >= 2
    assert all(FACT in json.dumps(body) for body in assistant.summaries)
    for session in chain[1:]:
        assert f"The deploy key is {FACT}." in stored_text(store, session)


def test_a_new_process_resumes_at_the_newest_descendant(store: SessionStore) -> None:
    with FakeAnthropicServer(handler=Assistant()) as server:
        first = CompactionMiddleware(context_window=WINDOW, store=store)
        _turns(_agent(server, first), 6)
        root = lineage_chain(store, first.session_id or "")[0]
        newest = first.session_id
        before = len(store.get_messages(newest or ""))
        # Another process: only the root's id and a new question, no LangChain state.
        second = CompactionMiddleware(context_window=WINDOW, store=store, session_id=root)
        state = _turns(_agent(server, second), 1, {"messages": [HumanMessage("What is next?")]})
        assert server.violations == []
        sent = server.message_requests[-1]
    # The request carried the stored conversation (its summary) before the new question.
    assert f"The deploy key is {FACT}." in json.dumps(sent["messages"][0])
    if not second.transitions:  # it continued the very session the first process left
        assert second.session_id == newest
        assert len(store.get_messages(newest or "")) > before
    assert state[SESSION_KEY] == second.session_id
    assert lineage_chain(store, second.session_id or "")[0] == root


def test_the_async_agent_compacts_without_blocking(store: SessionStore) -> None:
    assistant = Assistant()
    with FakeAnthropicServer(handler=assistant) as server:
        middleware = CompactionMiddleware(context_window=WINDOW, store=store)
        agent = _agent(server, middleware)

        async def run() -> None:
            state: dict[str, Any] = {"messages": [HumanMessage(FIRST_TURN)]}
            for turn in range(5):
                state = await agent.ainvoke(state)
                state["messages"].append(HumanMessage(f"More notes, {turn}."))

        asyncio.run(run())
        assert server.violations == []
    assert middleware.transitions
    assert f"The deploy key is {FACT}." in stored_text(store, middleware.session_id or "")


def test_the_middleware_reads_a_tools_facts_through_the_seam(store: SessionStore) -> None:
    """The agent's own ``note`` tool declares what it did (a file written); the compacted
    contexts carry it in the ledger, as they would a shipped tool's."""
    facts = default_tool_facts().register(
        "note", lambda call: [FileTouched(f"notes/{call.input['n']}.md", "created")]
    )
    with FakeAnthropicServer(handler=Assistant()) as server:
        middleware = CompactionMiddleware(context_window=WINDOW, store=store, tool_facts=facts)
        _turns(_agent(server, middleware), 6)
        assert server.violations == []
    assert len(middleware.transitions) >= 2
    child = store.get_messages(middleware.transitions[-1].new_session_id)
    text = "\n".join(str(b.get("text", "")) for m in child for b in m.content)
    assert "<ledger>" in text and "- created · unchanged since written: notes/1.md" in text
