"""A replay: a session shaped like a recorded Claude Code session — a 26k-token fixed
prefix (system prompt and tools), tool results of 30k characters, thinking of thousands of
tokens a reply — on ``claude-sonnet-5-5`` at a 60k window, through :class:`AgentLoop` and the
real SDK against the test server, which enforces preserved thinking, refuses a prompt over the
window and answers on-demand compaction.

Done when no request is refused: no compaction request over the window or on a history other
than the one its kept thinking was produced after (a tool result shortened to fit is sent as it
was sent), no turn request over the window when agentloop's own count says it is over, and at
most two summary requests a compaction."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply, tool_reply
from support.loop_scripts import Recorder, Script, filler, is_summary_request

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
)
from agentloop._core.values.tool import tool_definition
from sessions import open_store

SONNET_55 = "claude-sonnet-5-5"
WINDOW = 60_000
THINKING = 2_000
"""Each thinking block's hidden figure: thousands of tokens, as the docs' examples."""
REPLY_TOKENS = 8_000
RESULT_CHARS = 30_000
REQUEST = re.compile(r"request \d+(?=:)")


def _prefix() -> tuple[str, list[FunctionTool]]:
    """A system prompt and tools that together count about 26k tokens."""
    system = "\n".join(filler(f"Rule {n}. Follow the house style", 180) for n in range(86))
    tools = [
        FunctionTool(
            name=f"tool_{n}",
            description=filler(f"Tool {n} does its job carefully", 400),
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            function=lambda tool_input: "ok",
        )
        for n in range(19)
    ]
    return system, [read_tool(RESULT_CHARS), *tools]


def read_tool(chars: int) -> FunctionTool:
    """``read``: a numbered chunk of the project, ``chars`` characters long."""

    def read(tool_input: Mapping[str, Any]) -> str:
        line = filler(f"line of chunk {tool_input.get('n')}", 12)
        return "\n".join([line] * (chars // (len(line) + 1)))

    return FunctionTool(
        name="read",
        description="Read a numbered chunk of the project.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        function=read,
    )


class Warnings(Recorder):
    """A recorder that also keeps the loop's warnings."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.warnings: list[str] = []

    def on_warning(self, text: str) -> None:
        self.warnings.append(text)


class Replay(Script):
    """Each user request: two rounds of reads of 30k characters (one of four reads at once
    every third request), then an answer (counted per request, so
    that a compaction in between changes nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        assert body.get("compaction") is None, "the server answers compaction requests"
        reply = super().__call__(body)
        if is_summary_request(body):
            return reply
        request = latest_request(body)
        done = self.calls.get(request, 0)
        if done >= 2:
            return text_reply(filler(f"answer {len(self.conversation)}", 150))
        self.calls[request] = done + 1
        n = len(self.conversation)
        if done == 1 and len(self.calls) % 3 == 2:  # now and then, four reads at once: more
            # than the window holds beside the prefix and a reply, whatever a compaction left
            return tool_reply(*[("read", {"n": n * 10 + k}) for k in range(4)], text="Reading.")
        return tool_reply(("read", {"n": n}), text="Reading.")


def latest_request(body: Mapping[str, Any]) -> str:
    """The newest "request N" the conversation shows (a user message, or the system message
    a compaction carried it in)."""
    found = ""
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text":
                found = next(iter(REQUEST.findall(block["text"])[-1:]), found)
    return found


def run_session(
    tmp_path: Path,
    strategy: Any,
    *,
    window: int,
    system: str,
    tools: list[FunctionTool],
    turns: int,
    reply_tokens: int,
    thinking: int,
    prepare_at: float | None,
) -> tuple[FakeAnthropicServer, Replay, Warnings]:
    """``turns`` requests through an :class:`AgentLoop` on the server (stopped on return; its
    records stay readable)."""
    with (
        FakeAnthropicServer(context_window=window, thinking_tokens=thinking) as fake,
        open_store(tmp_path / "sessions.db") as store,
    ):
        fake.expect_refusals()  # asserted by the tests, with what they were
        script = Replay()
        fake.handler = script
        model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=0)
        compacter = ConversationCompacter(
            model_name=SONNET_55,
            context_window=window,
            model=model,
            max_output_tokens=reply_tokens,
            settings=CompactionSettings(strategy=strategy, prepare_at=prepare_at),
        )
        recorder = Warnings(script)
        loop = AgentLoop(
            model=model,
            model_name=SONNET_55,
            compacter=compacter,
            store=store,
            workspace=str(tmp_path),
            title="a 26k-prefix replay",
            system=system,
            tools=tools,
            max_tokens=reply_tokens,
            events=recorder,
        )
        recorder.loop = loop
        for n in range(turns):
            loop.run_turn(filler(f"request {n}", 60))
        loop.close()
    return fake, script, recorder


def summary_requests(fake: FakeAnthropicServer, script: Replay) -> int:
    """The API's compaction requests and agentloop's own summary requests."""
    compactions = [b for b in fake.message_requests if b.get("compaction") is not None]
    return len(compactions) + len(script.summaries)


@pytest.mark.heavy
@pytest.mark.parametrize("strategy", ["auto", "summarize"])
def test_a_26k_prefix_session_at_60k_on_sonnet_55_sends_no_refused_request(
    tmp_path: Path, strategy: Any
) -> None:
    system, tools = _prefix()
    fixed = FakeAnthropicServer().count_input_tokens(
        {"system": system, "tools": [tool_definition(t) for t in tools], "messages": []}
    )
    assert 24_000 <= fixed <= 28_000, fixed
    fake, script, recorder = run_session(
        tmp_path, strategy, window=WINDOW, system=system, tools=tools, turns=8,
        reply_tokens=REPLY_TOKENS, thinking=THINKING, prepare_at=0.5,
    )  # fmt: skip
    assert fake.refusals == [] and fake.violations == []
    assert fake.too_long == []  # no request over the window was sent
    assert len(recorder.transitions) >= 3, "the session compacted too little to tell"
    # Tool results were shortened to fit (the case this replay reproduces), and the compaction
    # requests after it sent them as they were sent: none refused, none over the window.
    assert any("shortened" in text for text in recorder.warnings)
    compactions = [b for b in fake.message_requests if b.get("compaction") is not None]
    assert compactions and all(fake.count_input_tokens(b) <= WINDOW for b in compactions)
    assert summary_requests(fake, script) <= 2 * len(recorder.transitions)
    for transition in recorder.transitions:
        summary = transition.summary
        assert summary.summary_calls + summary.discarded_calls <= 2
    # No summary prepared before the fixed prefix leaves room for one to be used: each
    # compaction request holds at least a fifth of the room the trigger leaves beside it (the
    # order of requests is not asserted: a prepared one runs beside the turn's own).
    mark = fixed + (0.85 * WINDOW - fixed) * 0.2
    assert all(fake.count_input_tokens(b) >= mark for b in compactions)


def _preparing(
    system: str, prepare_at: float = 0.5, refresh_at: float = 0.2
) -> tuple[ConversationCompacter, list[Any]]:
    from agentloop import Message
    from agentloop.testing import ScriptedModel

    model = ScriptedModel(on_demand_compaction=True)
    compacter = ConversationCompacter(
        model_name=SONNET_55,
        context_window=WINDOW,
        model=model,
        max_output_tokens=REPLY_TOKENS,
        settings=CompactionSettings(strategy="auto", prepare_at=prepare_at, refresh_at=refresh_at),
    )
    return compacter, [Message.user(filler("request 0", 2_000))]


def test_no_summary_is_prepared_below_the_mark_of_the_room_beside_the_fixed_prefix() -> None:
    system, tools = _prefix()  # the 26k fixed prefix
    definitions = [tool_definition(t) for t in tools]
    compacter, history = _preparing(system)
    # Past half the trigger (the old mark) by the fixed prefix, but little of the room beside
    # it is used yet: a summary now would summarize one message.
    decision = compacter.should_compact(history, system=system, tools=definitions)
    assert decision.usage.tokens > decision.trigger_tokens * 0.5
    job = compacter.prepare_job("s", history, system=system, tools=definitions, decision=decision)
    assert job is None
    small, history = _preparing("You are a careful coding agent.", prepare_at=0.01, refresh_at=0.01)
    assert small.prepare_job("s", history, system="You are a careful coding agent.") is not None


def test_at_most_two_summaries_are_prepared_between_two_compactions() -> None:
    system = "You are a careful coding agent."
    compacter, history = _preparing(system, prepare_at=0.01)
    compacter.settings = CompactionSettings(strategy="auto", prepare_at=0.01, refresh_at=0.01)
    started = 0
    for _ in range(4):
        if compacter.prepare_job("s", history, system=system) is not None:
            started += 1
            compacter.preparation.ready = None  # as if each one came back unusable
    assert started == 2
    compacter.preparation.take_discarded()  # a compaction ran: the count starts again
    assert compacter.prepare_job("s", history, system=system) is not None


def test_a_compaction_request_over_the_window_is_never_sent() -> None:
    from agentloop import Message
    from agentloop.testing import ScriptedModel, tool_call

    model = ScriptedModel(on_demand_compaction=True)
    compacter = ConversationCompacter(
        model_name=SONNET_55,
        context_window=8_000,
        model=model,
        max_output_tokens=500,
        settings=CompactionSettings(strategy="auto", prepare_at=None),
    )
    history: list[Message] = []
    for n in range(6):  # about 9,000 tokens: over the window (an emergency compaction)
        call = tool_call("read", {"n": n}, call_id=f"toolu_{n:04d}")
        history += [
            Message.user(filler(f"request {n}", 400)),
            Message.assistant([call]),
            Message.user(
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": call["id"],
                        "content": filler("chunk", 1_000),
                    }
                ]
            ),
            Message.assistant(f"answer {n}"),
        ]
    history.append(Message.user("the newest request"))
    assert compacter.should_compact(history, force=True).usage.tokens > 8_000
    result = compacter.compact_and_transition("p", history, force=True)
    assert result is not None
    assert [r for r in model.requests if r.compaction is not None] == []  # never sent
    assert "would not fit the window" in str(result.summary.fallback_reason)
    assert result.summary.strategy != "api_summary" and result.summary.summary_calls >= 1
