"""Compaction that never breaks thinking, through the real ``anthropic`` SDK against
the test server, which signs thinking on the 5.x models, checks each block's prefix (the 400
"bound to a different conversation" for a new account) and does on-demand compaction.

A 14-turn session with tools at a 16k window on ``claude-sonnet-5-5`` compacts and no request
is refused, whatever the strategy; on ``claude-haiku-4-5`` (no on-demand compaction) the
client summarizer does the work; the block round-trips through the store; a swap of a summary
the API prepared in the background keeps the turns appended meanwhile."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply, tool_reply
from support.cli import CLI
from support.loop_scripts import SYSTEM, Recorder, Script, filler, is_summary_request

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
    validate_messages,
)
from agentloop._adapters.records import from_record
from agentloop._core.compaction.api_compaction import API_SUMMARY
from agentloop._core.values.settings import StrategyName
from sessions import SqliteSessionStore, open_store

SONNET_55 = "claude-sonnet-5-5"
HAIKU_45 = "claude-haiku-4-5"
WINDOW = 16_000
TURNS = 14
REPLY = 4_000
"""The reply reserve: two thinking blocks and the answer fit in it."""
THINKING = 1_500
"""Each thinking block's hidden figure (the docs' examples run to thousands of tokens): two a
tool reply (the reply's own and a progress update), counted against ``max_tokens`` and, sent
back, as input."""


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(tmp_path / "sessions.db") as opened:
        yield opened


def _read(tool_input: Mapping[str, Any]) -> str:
    return filler(f"chunk {tool_input.get('n')}", 900)


READ = FunctionTool(
    name="read",
    description="Read a numbered chunk of the project.",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    function=_read,
)


class Turns(Script):
    """Each request: a tool call, then (after its result) an answer."""

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        if body.get("compaction") is not None:  # never reached: the server answers these
            raise AssertionError("a compaction request reached the script")
        reply = super().__call__(body)  # records it; a summary request gets the summary
        if is_summary_request(body):
            return reply
        last = [m for m in body["messages"] if m["role"] != "system"][-1]
        content = last["content"]
        if isinstance(content, list) and content[0].get("type") == "tool_result":
            return text_reply(filler(f"answer {len(self.conversation)}", 120))
        return tool_reply(("read", {"n": len(self.conversation)}), text="Reading.")


def session(
    fake: FakeAnthropicServer,
    store: SqliteSessionStore,
    tmp_path: Path,
    *,
    model_name: str = SONNET_55,
    strategy: StrategyName = "auto",
    prepare_at: float | None = None,
) -> tuple[AgentLoop, Turns, Recorder]:
    script = Turns()
    fake.handler = script
    fake.thinking_tokens = THINKING
    model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=model_name,
        context_window=WINDOW,
        model=model,
        max_output_tokens=REPLY,
        settings=CompactionSettings(strategy=strategy, prepare_at=prepare_at),
    )
    recorder = Recorder(script)
    loop = AgentLoop(
        model=model,
        model_name=model_name,
        compacter=compacter,
        store=store,
        workspace=str(tmp_path),
        title="thinking kept",
        system=SYSTEM,
        tools=[READ],
        max_tokens=REPLY,
        events=recorder,
    )
    recorder.loop = loop
    return loop, script, recorder


def talk(loop: AgentLoop, turns: int = TURNS) -> None:
    for n in range(turns):
        loop.run_turn(filler(f"request {n}", 150))


def thinking_sent(fake: FakeAnthropicServer) -> int:
    return sum(
        1
        for body in fake.message_requests
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    )


@pytest.mark.parametrize("strategy", ["summarize", "auto", "sliding_window", "prune", "server"])
def test_a_tool_session_on_sonnet_5_5_compacts_and_no_request_is_refused(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path, strategy: Any
) -> None:
    loop, _, recorder = session(fake_api, store, tmp_path, strategy=strategy)
    talk(loop)
    assert recorder.transitions, "the session never compacted"
    if strategy == "server":  # the API compacts at the trigger; /compact runs as auto here
        outcome = loop.compact()
        assert outcome is not None and outcome.transition is not None
        made = outcome.transition.summary.strategy
        assert made in ("prune", API_SUMMARY)
        loop.run_turn("and after /compact?")  # what was carried goes after this message
        assert any(m.role == "system" for m in loop.messages) == (made == API_SUMMARY)
    loop.close()
    assert fake_api.refusals == [] and fake_api.violations == []
    assert thinking_sent(fake_api) > 0  # thinking was sent back, and none was refused
    # Thinking of thousands of tokens a reply, and max_tokens still left room for the answer.
    assert recorder.replies and all(r.stop_reason != "max_tokens" for r in recorder.replies)
    turns = [b for b in fake_api.message_requests if b.get("compaction") is None]
    assert all(b["max_tokens"] > 2 * THINKING for b in turns if not is_summary_request(b))
    for transition in recorder.transitions:
        validate_messages(transition.compacted_messages)
        made = transition.summary.strategy
        # auto prunes first: the API's summary only when pruning does not reach the target
        expected = {"summarize": {API_SUMMARY}, "auto": {API_SUMMARY, "prune"}}
        assert made in expected.get(strategy, {made})
        if made == API_SUMMARY:
            assert transition.compacted_messages[0].is_compaction_only
            # The compacted context's figure: the API counted the child, block and all.
            assert transition.summary.tokens_after_source == "api"
    if strategy in ("summarize", "auto"):
        summaries = [b for b in fake_api.message_requests if b.get("compaction") is not None]
        signed = [t for t in recorder.transitions if t.summary.strategy == API_SUMMARY]
        assert len(summaries) == len(signed) > 0
        assert summaries[0]["model"] == SONNET_55 and summaries[0]["system"]


def test_kept_turns_keep_their_thinking_after_the_apis_summary(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, _, recorder = session(fake_api, store, tmp_path, strategy="summarize")
    talk(loop)
    assert recorder.transitions
    transition = recorder.transitions[0]
    kept = [m for m in transition.compacted_messages[1:] if m.role == "assistant"]
    assert any(b["type"] == "thinking" for m in kept for b in m.content)
    # The request after the compaction replays that thinking and is answered, nothing dropped.
    after = [b for b in fake_api.message_requests if b.get("compaction") is None][-1]
    assert after["messages"][0]["content"][0]["type"] == "compaction"
    assert fake_api.refusals == [] and fake_api.violations == []


def test_on_a_model_without_on_demand_compaction_the_client_summarizer_works(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = session(fake_api, store, tmp_path, model_name=HAIKU_45)
    talk(loop)
    loop.close()
    assert recorder.transitions and script.summaries
    assert all(b.get("compaction") is None for b in fake_api.message_requests)
    assert {t.summary.strategy for t in recorder.transitions} <= {"summarize", "prune"}
    assert fake_api.refusals == [] and fake_api.violations == []


def test_a_failed_api_compaction_falls_back_to_the_own_summarizer(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    fake_api.fail_next_compactions("max_tokens")
    loop, script, recorder = session(fake_api, store, tmp_path, strategy="summarize")
    talk(loop)
    first = recorder.transitions[0].summary
    assert first.strategy == "summarize" and script.summaries
    assert "max_tokens" in str(first.fallback_reason)
    assert fake_api.refusals == [] and fake_api.violations == []


def test_the_block_and_the_carried_system_message_round_trip_through_the_store(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, _, recorder = session(fake_api, store, tmp_path, strategy="summarize")
    talk(loop)
    transition = recorder.transitions[0]
    stored = [from_record(r) for r in store.get_messages(transition.new_session_id)]
    child = transition.compacted_messages
    assert [(m.role, m.content) for m in stored[: len(child)]] == [
        (m.role, m.content) for m in child
    ]
    assert stored[0].content[0]["type"] == "compaction"
    assert any(m.role == "system" for m in stored)
    # What the carried message renders comes back as its parts, not read from its text.
    carried = [(m.carried, m.text) for m in stored if m.role == "system"]
    assert carried and all(parts is not None and parts.ledger for parts, _ in carried)
    assert [parts for parts, _ in carried] == [m.carried for m in child if m.role == "system"]
    parent = store.get_session(transition.original_session_id)
    assert store.get_session(transition.new_session_id).parent_id == parent.id
    # A loop resumed from the store goes on without a refused request.
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    resumed = AgentLoop(
        model=model,
        model_name=SONNET_55,
        compacter=ConversationCompacter(model_name=SONNET_55, context_window=WINDOW, model=model),
        store=store,
        session_id=loop.session_id,
        messages=[from_record(r) for r in store.get_messages(loop.session_id)],
        system=SYSTEM,
        tools=[READ],
        max_tokens=2_000,
    )
    resumed.run_turn("one more request")
    assert fake_api.refusals == [] and fake_api.violations == []


def test_a_background_swap_keeps_the_turns_appended_meanwhile(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, _, recorder = session(fake_api, store, tmp_path, strategy="auto", prepare_at=0.3)
    talk(loop)
    loop.close()
    prepared = [t for t in recorder.transitions if t.summary.prepared]
    assert prepared, "no compaction used the summary prepared in the background"
    assert {t.summary.strategy for t in prepared} == {API_SUMMARY}
    for transition in prepared:
        index = recorder.transitions.index(transition)
        before = recorder.snapshots[index]
        child = transition.compacted_messages
        kept = [m for m in child[1:] if m.role != "system"]
        # The kept turns are the parent's last messages, unchanged and in place.
        assert [m.content for m in kept] == [m.content for m in before[len(before) - len(kept) :]]
        covered = len(before) - len(kept)
        # It replaced exactly the N messages the background request sent (the history then).
        sent = [len(b["messages"]) for b in fake_api.message_requests if b.get("compaction")]
        assert covered in sent
    assert fake_api.refusals == [] and fake_api.violations == []


@pytest.mark.parametrize("strategy", ["auto", "summarize", "sliding_window", "prune", "server"])
def test_a_14_turn_cli_session_with_tools_at_16k_compacts_on_the_default_model(
    cli: CLI, workspace: Path, strategy: str
) -> None:
    from agentloop._core.values.validation import DEFAULT_MODEL

    assert DEFAULT_MODEL == SONNET_55
    lines = []
    for n in range(TURNS):
        body = "\n".join(f"value_{n}_{line} = {line}  # {filler('note', 12)}" for line in range(90))
        (workspace / f"module_{n}.py").write_text(body + "\n")
        lines.append(filler(f"request {n}", 60))
        cli.script.add(tool_reply(("read_file", {"path": f"module_{n}.py"}), text="Reading."))
        cli.script.add(text_reply(filler(f"answer {n}", 80)))
    run = cli.run(
        "--context-window",
        str(WINDOW),
        "--compaction-strategy",
        strategy,
        stdin="\n".join(lines) + "\n",
    )
    assert run.code == 0, run.err
    bodies = cli.fake_api.message_requests
    assert run.notices, run.err
    if strategy == "server":  # the API's threshold compaction rode on the requests
        assert any(body.get("context_management") for body in bodies)
    if strategy in ("auto", "summarize"):
        assert "written by the API" in run.err or "prepared in the background by the API" in run.err
        assert any(body.get("compaction") is not None for body in bodies)
    assert thinking_sent(cli.fake_api) > 0  # thinking was sent back (the model thinks)...
    assert cli.fake_api.refusals == []  # ...and none was refused (the fixture: no violation)
