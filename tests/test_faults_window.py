"""Fault injection, a tool round too big for what is left of the window, through
``AgentLoop`` and the real ``anthropic`` SDK against the test server (which refuses a request
over its window, as the API does).

As in the replayed session that found it: a large fixed prefix (system prompt and tools), a
60k window, and a tool result that cannot fit beside them. Compaction cannot help (the newest
tool results must stay), so the result goes to the model shortened — head, tail and the lines
that look like errors, saying how much was left out — while the store keeps it whole, and the
turn goes on. A result shortened once is sent the same way in the next requests.

A session that is one long user turn of big tool rounds beside such a prefix goes on
too. When the summary and the smallest tail are still too big, the compaction shortens the
newest round's largest results (the parent session keeps them whole) instead of giving up; a
compaction asked for that nothing more can bring under the trigger is kept when it fits beside
a reply, said in one line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fake_api import FakeAnthropicServer, ToolCall, text_reply, tool_reply
from support.histories import CharCounter
from support.loop_scripts import Script

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ConversationCompacter,
    LoopEvents,
    Message,
    ToolResult,
)
from agentloop._adapters.anthropic import AnthropicModel
from agentloop._adapters.records import from_record
from agentloop.testing import FunctionModel, tool_call
from sessions import open_store

MODEL = "claude-sonnet-4-6"
WINDOW = 60_000
PREFIX = " ".join(f"rule{n} of the house style, kept in every request" for n in range(2_600))
"""A system prompt of about 26k tokens: the fixed prefix of the replayed session."""
ERROR_LINE = "ERROR: test_payment failed at billing/charge.py:212 (card declined)"
BIG = "\n".join(
    ERROR_LINE if n == 2_500 else f"line {n}: an ordinary log line with nothing in it"
    for n in range(4_000)
)
"""A tool result of about 50k tokens, an error line in its middle."""


class BigOutput:
    """A tool whose output alone leaves no room in the window."""

    name = "read_log"
    description = "Read the build log."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        return ToolResult(BIG)


class Warnings(LoopEvents):
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def on_warning(self, message: str) -> None:
        self.warnings.append(message)


@pytest.fixture
def server() -> Iterator[tuple[FakeAnthropicServer, Script]]:
    script = Script()
    with FakeAnthropicServer(handler=script, context_window=WINDOW) as running:
        yield running, script
        assert running.violations == []


def test_a_tool_result_that_cannot_fit_goes_shortened_and_the_turn_goes_on(
    server: tuple[FakeAnthropicServer, Script], tmp_path: Path
) -> None:
    fake, script = server
    script.add(
        tool_reply(ToolCall("read_log", {}, id="toolu_log")),
        text_reply("the payment test fails: the card was declined"),
        text_reply("and the rest is fine"),
    )
    model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=0)
    events = Warnings()
    store = open_store(tmp_path / "sessions.db")
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=ConversationCompacter(model_name=MODEL, context_window=WINDOW, model=model),
        store=store,
        system=PREFIX,
        tools=[BigOutput()],
        max_tokens=4_096,
        events=events,
    )

    try:
        result = loop.run_turn("why does the build fail?")
        again = loop.run_turn("anything else?")
    finally:
        loop.close()  # (no summary left being prepared in the background)

    assert result.text == "the payment test fails: the card was declined"
    assert again.text == "and the rest is fine"
    sent = [body for body in script.conversation if body["messages"][-1]["role"] == "user"]
    shown = [
        block["content"]
        for body in sent[1:]
        for message in body["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(shown) == 2 and shown[0] == shown[1]  # the same shortened text each time
    text = str(shown[0])
    assert text.startswith("[This tool result was shortened to fit the context window:")
    assert ERROR_LINE in text  # the salient line survives the cut
    assert len(text) < len(BIG)
    # Said in one line: by the compaction that shortened it, or as it was sent.
    notes = [n for t in result.transitions for n in t.summary.notes] + events.warnings
    assert any("shortened to" in note and "\n" not in note for note in notes)
    # The store keeps it whole (in the parent, when a compaction shortened it).
    stored = [
        from_record(m)
        for session in store.list_sessions(limit=None)
        for m in store.get_messages(session.id)
    ]
    results = [b for m in stored for b in m.content if b.get("type") == "tool_result"]
    assert BIG in [r["content"] for r in results]
    store.close()


# -- a session that is one long turn of big tool rounds -----------------------------------------

ROUND = "\n".join(
    f"src/module_{n % 7}.py:{n}: def handler_{n}(request): return route({n})" for n in range(1_300)
)
"""A tool result of about 27k tokens: with the fixed prefix, one round and a summary are over
the trigger (51k of the 60k window)."""


class BigReads:
    """A tool whose every result is about half of what the window leaves beside the prefix."""

    name = "read_file"
    description = "Read a file."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
    }

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        return ToolResult(f"{tool_input.get('path')}\n{ROUND}")


def test_one_long_turn_beside_a_large_fixed_prefix_goes_on_with_its_newest_round_shortened(
    server: tuple[FakeAnthropicServer, Script], tmp_path: Path
) -> None:
    fake, script = server
    rounds = 4
    script.add(
        *(tool_reply(ToolCall("read_file", {"path": f"file{n}.py"})) for n in range(rounds)),
        text_reply("all four files read"),
    )
    model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=0)
    events = Warnings()
    store = open_store(tmp_path / "sessions.db")
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=ConversationCompacter(model_name=MODEL, context_window=WINDOW, model=model),
        store=store,
        system=PREFIX,
        tools=[BigReads()],
        max_tokens=4_096,
        events=events,
    )
    try:
        result = loop.run_turn("read the four files")
    finally:
        loop.close()

    assert result.text == "all four files read"  # the turn went on to its end
    assert len(script.conversation) == rounds + 1  # no request refused as too long
    assert result.transitions  # compacted, each time with the newest round shortened
    notes = [note for t in result.transitions for note in t.summary.notes]
    assert any("in the newest tool round was shortened" in note for note in notes)
    assert all("\n" not in note for note in notes)
    # The store keeps every result whole in the parents; the children hold the shortened ones.
    sessions = store.list_sessions(limit=None)
    whole = [
        block["content"]
        for session in sessions
        for message in store.get_messages(session.id)
        for block in message.content
        if block.get("type") == "tool_result" and ROUND in str(block.get("content"))
    ]
    assert len(whole) >= rounds
    store.close()


def _above_the_trigger_whatever_is_kept() -> tuple[ConversationCompacter, list[Message]]:
    """A 24k window and a 21k-token reply in the smallest tail: no cut, pruning or shortening
    brings it under the trigger, though it fits beside a reply."""
    summarizer = FunctionModel(lambda request: "## Progress\nread src/app.py")
    compacter = ConversationCompacter(
        model_name="claude-test",
        context_window=24_000,
        model=summarizer,
        max_output_tokens=1_000,
        settings=CompactionSettings(strategy="summarize"),
        counter=CharCounter(),
    )
    read = tool_call("read_file", {"path": "src/app.py"})
    make = tool_call("bash", {"command": "make"})
    history = [
        Message.user("Explain src/app.py"),
        Message.assistant([read]),
        Message.user([{"type": "tool_result", "tool_use_id": read["id"], "content": "y" * 6_000}]),
        Message.assistant([{"type": "text", "text": "z" * 84_000}, make]),
        Message.user([{"type": "tool_result", "tool_use_id": make["id"], "content": "built"}]),
    ]
    return compacter, history


def test_a_compaction_asked_for_that_stays_above_the_trigger_goes_on_and_says_so() -> None:
    compacter, history = _above_the_trigger_whatever_is_kept()
    assert compacter.compact_and_transition("p", history) is None  # automatic: not worth it
    compacter, history = _above_the_trigger_whatever_is_kept()

    transition = compacter.compact_and_transition("p", history, force=True)  # asked for
    assert transition is not None  # the turn goes on in what fits beside a reply
    summary = transition.summary
    assert summary.tokens_after is not None and summary.tokens_before is not None
    assert compacter.trigger_tokens <= summary.tokens_after < summary.tokens_before
    (warning,) = [w for w in summary.warnings if "under the trigger" in w]
    assert "it goes on above it" in warning and "\n" not in warning
