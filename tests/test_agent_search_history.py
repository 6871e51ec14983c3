"""``search_history``: the tool that finds what only the compacted parts of a conversation hold.
Built, as a library user builds it, from a store and a session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.store_contract import assistant, call, compacted_conversation, result, user

from agentloop import Tool, search_history_tool
from agentloop._agent.search_history import MAX_OUTPUT_CHARS
from sessions import SessionStore, new_session_id, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with open_store(tmp_path / "sessions.db") as opened:
        yield opened


def search(tool: Tool, **tool_input: Any) -> str:
    outcome = tool.run(tool_input)
    assert not outcome.is_error, outcome.content
    return outcome.content


def test_the_tool_finds_a_detail_of_a_compacted_ancestor_and_says_where(
    store: SessionStore,
) -> None:
    root, _, grandchild = compacted_conversation(store)
    tool = search_history_tool(store, grandchild)
    assert isinstance(tool, Tool) and tool.name == "search_history"
    assert tool.input_schema["required"] == ["query"]

    text = search(tool, query="What is the deploy key called")
    assert "ORCHID-7" in text
    assert "No message holds every word" in text  # "what", "is", "called" are not all there
    text = search(tool, query="deploy key")
    assert text.startswith("1 match for 'deploy key'")
    assert f"earlier session {root[:8]}, message #1 (user)" in text
    assert "The deploy key is called ORCHID-7" in text

    output = search(tool, query="heliotrope")
    assert f"earlier session {root[:8]}, message #3 (result of run_command)" in output
    command = search(tool, query="release.toml")
    assert "message #2 (call of run_command)" in command and "cat config/release.toml" in command


def test_a_callable_session_follows_the_conversation(store: SessionStore) -> None:
    current = {"id": new_session_id()}
    tool = search_history_tool(store, lambda: current["id"])
    assert search(tool, query="orchid") == "Nothing of this conversation is stored yet."
    _, _, grandchild = compacted_conversation(store)
    current["id"] = grandchild
    assert "ORCHID-7" in search(tool, query="orchid")
    store.append_messages(grandchild, [user("this session says GARNET")])
    assert f"this session {grandchild[:8]}" in search(tool, query="garnet")


def test_another_conversations_text_is_never_returned(store: SessionStore) -> None:
    _, _, mine = compacted_conversation(store, workspace="/w")
    theirs = store.create_session(model="m", workspace="/w")
    store.append_messages(theirs.id, [user("their deploy key is called ORCHID-99, not yours")])
    for query in ("orchid", "orchid 99", "their", "deploy key"):
        assert "ORCHID-99" not in search(search_history_tool(store, mine), query=query)
    assert "ORCHID-99" in search(search_history_tool(store, theirs.id), query="orchid")


def test_secrets_are_redacted_even_where_an_excerpt_cuts_them(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(
        session.id, [user("x " * 40 + f"the marker then {secret} " + "y " * 200), assistant("ok")]
    )
    tool = search_history_tool(store, session.id)
    for width in range(80, 140, 4):  # where the window would end inside the secret
        text = search(tool, query="marker", excerpt_chars=width)
        assert "marker" in text
        assert secret[:8] not in text and secret[-8:] not in text, width
    assert "[redacted $GITHUB_TOKEN]" in search(tool, query="marker", excerpt_chars=400)


def test_the_output_is_bounded_whatever_the_limits_ask(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    long = " ".join(f"w{n}" for n in range(600))
    store.append_messages(session.id, [user(f"quartz {n} {long}") for n in range(30)])
    tool = search_history_tool(store, session.id)
    text = search(tool, query="quartz", limit=20, excerpt_chars=1000)
    assert len(text) <= MAX_OUTPUT_CHARS
    assert "more not shown" in text
    assert search(tool, query="quartz", limit=3).count("\n[") == 3


def test_its_own_earlier_searches_are_not_found_again(store: SessionStore) -> None:
    root, _, grandchild = compacted_conversation(store)
    tool = search_history_tool(store, grandchild)
    first = search(tool, query="orchid")
    store.append_messages(
        grandchild, [call("toolu_s", "search_history", query="orchid"), result("toolu_s", first)]
    )
    again = search(tool, query="orchid")
    assert again.startswith("1 match") and f"{root[:8]}, message #1" in again


@pytest.mark.parametrize(
    "tool_input, says",
    [
        ({}, "missing required parameter 'query'"),
        ({"query": 7}, "must be a string"),
        ({"query": "   "}, "must not be empty"),
        ({"query": "?!"}, "nothing to search for"),
        ({"query": "orchid", "limit": 0}, "at least 1"),
        ({"query": "orchid", "limit": 21}, "at most 20"),
        ({"query": "orchid", "excerpt_chars": 5000}, "at most 1000"),
    ],
)
def test_bad_input_is_an_error_result_for_the_model(
    store: SessionStore, tool_input: dict[str, Any], says: str
) -> None:
    _, _, grandchild = compacted_conversation(store)
    outcome = search_history_tool(store, grandchild).run(tool_input)
    assert outcome.is_error and says in outcome.content


def test_no_match_says_so(store: SessionStore) -> None:
    _, _, grandchild = compacted_conversation(store)
    text = search(search_history_tool(store, grandchild), query="zebra")
    assert text == "No message of this conversation matches 'zebra'."
