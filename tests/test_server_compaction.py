"""Strategy ``server``: the Messages API compacts on the server.

The library loop and the CLI drive the real ``anthropic`` SDK over HTTP against our fake
Messages API, which implements the ``compact_20260112`` edit (``tests/fake_api/compaction.py``):
it counts the input, compacts at the trigger into a signed compaction block, pauses, and from
then on reads nothing before the block. The loop turns the block into a child session (parent
kept whole, the same transition, notice and lineage), and falls back to ``auto`` with a warning
when the model or the endpoint does not offer server-side compaction.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.beta import BetaCompact20260112EditParam
from fake_api import FakeAnthropicServer, RecordedRequest, text_reply, tool_reply
from fake_api.compaction import COMPACT_BETA, EDIT_TYPE, signature
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import (
    MODEL,
    SYSTEM,
    Recorder,
    Script,
    filler,
    params,
    stored_params,
    unmarked,
)

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
    Message,
    validate_messages,
)
from agentloop._adapters.records import from_record
from agentloop._core.values.settings import StrategyName
from agentloop.testing import ScriptedModel
from agentloop.testing import text_reply as scripted_reply
from sessions import SqliteSessionStore, open_store


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(tmp_path / "sessions.db") as opened:
        yield opened


def _big_output(tool_input: Mapping[str, Any]) -> str:
    return filler(f"output {tool_input.get('n')}", int(tool_input.get("words", 100)))


BIG_TOOL = FunctionTool(
    name="read",
    description="Read a numbered chunk.",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}, "words": {"type": "integer"}},
        "required": ["n"],
    },
    function=_big_output,
)


def server_compacting_loop(
    fake_api: FakeAnthropicServer,
    store: SqliteSessionStore,
    workspace: Path,
    *,
    strategy: StrategyName = "server",
    standing: str = "",
) -> tuple[AgentLoop, Script, Recorder]:
    script = Script()
    fake_api.handler = script
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=4000,
        model=model,
        max_output_tokens=512,
        # agentloop's own summary where it compacts (the API's: test_on_demand_e2e.py)
        settings=CompactionSettings(
            strategy=strategy, standing_instructions=standing, api_summary=False
        ),
    )
    recorder = Recorder(script)
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=compacter,
        store=store,
        workspace=str(workspace),
        system=SYSTEM,
        tools=[BIG_TOOL],
        max_tokens=512,
        events=recorder,
    )
    recorder.loop = loop
    return loop, script, recorder


def talk_until_compacted(loop: AgentLoop, script: Script, recorder: Recorder) -> None:
    for n in range(15):
        script.add(text_reply(filler(f"answer {n}", 150)))
        loop.run_turn(filler(f"request {n}", 300))
        if recorder.transitions:
            return
    raise AssertionError("the server never compacted")


def message_requests(fake_api: FakeAnthropicServer) -> list[RecordedRequest]:
    return [r for r in fake_api.requests if r.method == "POST" and r.path == "/v1/messages"]


def compaction_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    (block,) = [
        b
        for m in messages
        for b in m["content"]
        if isinstance(b, dict) and b["type"] == "compaction"
    ]
    return dict(block)


# -- the library loop ---------------------------------------------------------------------------


def test_the_api_compacts_and_the_turn_goes_on_in_a_child_session(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    root = loop.session_id
    talk_until_compacted(loop, script, recorder)

    (transition,) = recorder.transitions
    assert transition.summary.strategy == "server"
    assert script.summaries == []  # nothing compacted locally
    # Every request asked for the edit, at the loop's own trigger, with the beta.
    assert loop.compacter is not None
    for sent in message_requests(fake_api):
        edits = sent.body["context_management"]["edits"]
        assert edits == [
            {
                "type": EDIT_TYPE,
                "trigger": {"type": "input_tokens", "value": loop.compacter.trigger_tokens},
                "pause_after_compaction": True,
            }
        ]
        assert COMPACT_BETA in sent.headers["anthropic-beta"]
    # The parent is kept whole; the child holds the request, the block, the request again.
    parent = recorder.snapshots[0]
    assert stored_params(store, root) == params(parent)
    child_id = transition.new_session_id
    child = stored_params(store, child_id)
    block = compaction_of(child)
    assert block["signature"] == signature(block["content"], block["encrypted_content"])
    assert "request 0" in block["content"]
    request = parent[-1].to_param()
    assert child[:3] == [request, {"role": "assistant", "content": [block]}, request]
    validate_messages([from_record(m) for m in store.get_messages(child_id)])
    # The turn went on in the child, and the API read the child from its block on.
    assert loop.session_id == child_id
    after = script.conversation[-1]
    assert unmarked(after["messages"]) == child[:3]
    assert recorder.replies[-1].usage.prompt_tokens == transition.summary.tokens_after
    compacted = message_requests(fake_api)[-2].body
    assert transition.summary.tokens_before == fake_api.count_input_tokens(compacted)
    assert transition.summary.tokens_before_source == "api"
    assert transition.summary.tokens_after_source == "api"
    assert transition.summary.tokens_after < transition.summary.tokens_before // 2
    assert [s.id for s in store.lineage(child_id)] == [root, child_id]
    (entry,) = store.compaction_history(root)
    assert (entry.strategy, entry.child_id, entry.summary) == ("server", child_id, block["content"])
    assert fake_api.violations == []


def test_resuming_the_child_sends_the_block_back_and_the_server_reads_little(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    talk_until_compacted(loop, script, recorder)
    child_id = loop.session_id
    stored = [from_record(m) for m in store.get_messages(child_id)]
    tokens_before = recorder.transitions[0].summary.tokens_before

    # A fresh process, and not even on strategy "server": the block still goes back as it was.
    resumed, script, _ = server_compacting_loop(fake_api, store, tmp_path, strategy="auto")
    resumed.switch(child_id, stored)
    script.add(text_reply("carrying on"))
    result = resumed.run_turn("where were we?")

    request = message_requests(fake_api)[-1]
    assert COMPACT_BETA in request.headers["anthropic-beta"]
    assert "context_management" not in request.body
    assert compaction_of(request.body["messages"]) == compaction_of(params(stored))
    counted = fake_api.count_input_tokens(request.body)
    everything = fake_api.count_input_tokens(
        {**request.body, "messages": [m for m in request.body["messages"] if m["role"] == "user"]}
    )
    assert counted < tokens_before // 2 and counted < everything
    assert result.text == "carrying on" and fake_api.violations == []


def test_between_tool_rounds_the_child_carries_the_tool_round_after_the_block(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    script.add(text_reply("noted"))
    loop.run_turn(filler("request 0", 300))
    script.add(
        tool_reply(("read", {"n": 1, "words": 1400})),
        tool_reply(("read", {"n": 2, "words": 2000})),
        text_reply("read both"),
    )
    result = loop.run_turn("read chunks 1 and 2")

    (transition,) = recorder.transitions
    assert result.text == "read both" and result.tool_calls == 2
    parent = recorder.snapshots[0]
    assert parent[-1].is_tool_result  # compacted between the two tool rounds... after round 2
    child = stored_params(store, transition.new_session_id)
    block = compaction_of(child)
    call = parent[-2].to_param()["content"][0]
    assert child[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "read chunks 1 and 2"}],
    }
    assert child[1] == {"role": "assistant", "content": [block, call]}
    # Over half the trigger: carried with its output pruned (the parent keeps it whole).
    (carried,) = child[2]["content"]
    assert carried["tool_use_id"] == call["id"]
    assert carried["content"].startswith("[tool output pruned during compaction")
    assert "output 2" in json.dumps(stored_params(store, transition.original_session_id))
    assert child[3]["content"] == [{"type": "text", "text": "read both"}]
    validate_messages([Message.from_param(m) for m in child])
    assert fake_api.violations == []


def test_standing_instructions_go_with_the_edit(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, _ = server_compacting_loop(
        fake_api, store, tmp_path, standing="keep the API design"
    )
    script.add(text_reply("ok"))
    loop.run_turn("hello")
    (edit,) = message_requests(fake_api)[-1].body["context_management"]["edits"]
    assert edit["instructions"].endswith(
        "Follow these standing instructions too:\nkeep the API design"
    )


def test_compact_under_server_runs_locally_and_updates_the_servers_summary(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    talk_until_compacted(loop, script, recorder)
    server_summary = recorder.transitions[0].summary.summary
    for n in range(2):
        script.add(text_reply(f"later answer {n}"))
        loop.run_turn(filler(f"later {n}", 100))

    outcome = loop.compact()

    assert outcome is not None and outcome.transition is not None
    assert outcome.transition.summary.strategy == "summarize"
    # The summary request continues the conversation: the server's summary is in it, as the
    # compaction block the API reads.
    assert json.dumps(server_summary)[1:-1] in json.dumps(script.summaries[0])
    validate_messages(outcome.transition.compacted_messages)


def test_the_loop_falls_back_to_auto_when_the_api_refuses_the_edit(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    fake_api.models_without_compaction.add(MODEL)
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    script.add(text_reply("answer 0"))
    with pytest.warns(UserWarning, match=r"not available: the API refused the request \(400"):
        assert loop.run_turn(filler("request 0", 300)).text == "answer 0"
    assert loop.compacter is not None and loop.compacter.settings.strategy == "auto"
    refused, retried = message_requests(fake_api)
    assert "context_management" in refused.body and "context_management" not in retried.body
    talk_until_compacted(loop, script, recorder)
    assert recorder.transitions[0].summary.strategy in ("summarize", "prune")
    assert fake_api.violations == []


def test_a_model_adapter_without_server_compaction_falls_back_at_once() -> None:
    model = ScriptedModel(default=scripted_reply("fine"))
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=4000,
        model=model,
        settings=CompactionSettings(strategy="server"),
    )
    loop = AgentLoop(model=model, model_name=MODEL, compacter=compacter)
    with pytest.warns(UserWarning, match="ScriptedModel does not offer it"):
        loop.run_turn("hello")
    assert compacter.settings.strategy == "auto"
    assert model.requests[0].server_compaction is None


def test_the_fake_api_without_pause_answers_after_the_block(fake_api: FakeAnthropicServer) -> None:
    fake_api.enqueue(text_reply("right after the summary"))
    edit: BetaCompact20260112EditParam = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50},
    }
    reply = fake_api.client().beta.messages.create(
        model=MODEL,
        max_tokens=100,
        betas=[COMPACT_BETA],
        context_management={"edits": [edit]},
        messages=[{"role": "user", "content": filler("request 0", 100)}],
    )
    assert [b.type for b in reply.content] == ["compaction", "text"]
    assert [i.type for i in reply.usage.iterations or []] == ["compaction", "message"]
    assert reply.stop_reason == "end_turn" and fake_api.violations == []


# -- the command line ---------------------------------------------------------------------------


def test_the_cli_compacts_on_the_server_and_resumes_from_the_block(cli: CLI) -> None:
    lines = conversation_lines(10)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 150)))
    run = cli.run(
        "--compaction-strategy", "server", "--context-window", WINDOW, stdin="\n".join(lines)
    )

    assert run.code == 0, run.err
    assert run.notices, run.err
    assert cli.script.summaries == []
    child = run.notices[0]["child"]
    tree = cli.run("sessions", "tree", child)
    assert "server" in tree.out, tree.out
    show = cli.run("sessions", "show", child)
    assert "the API's summary of what came before" in show.out, show.out
    assert "Summary by the server" in show.out and "fakeenc_" not in show.out, show.out
    export = cli.run("sessions", "export", child, "--format", "markdown")
    assert "server-side compaction" in export.out and "Summary by the server" in export.out
    assert "signature" not in export.out, export.out

    cli.script.add(text_reply("back again"))
    resumed = cli.run("--context-window", WINDOW, "--resume", child[:8], "-p", "and now?")
    assert resumed.code == 0, resumed.err
    request = cli.script.conversation[-1]
    block = compaction_of(request["messages"])
    with cli.store() as store:
        (full,) = [s.id for s in store.list_sessions(limit=None) if s.id.startswith(child)]
        newest = store.newest_descendant(full)
        assert (
            compaction_of(params([from_record(m) for m in store.get_messages(newest.id)])) == block
        )
        (entry,) = store.compaction_history(full)
    # The server reads the child from its block on: far less than the context it compacted.
    counted = cli.fake_api.count_input_tokens(request)
    assert entry.tokens_before is not None and counted < entry.tokens_before * 0.8


def test_the_cli_warns_in_one_line_and_compacts_locally_when_the_api_refuses(cli: CLI) -> None:
    cli.fake_api.models_without_compaction.add("claude-sonnet-5-5")
    lines = conversation_lines(10)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 150)))
    run = cli.run(
        "--compaction-strategy", "server", "--context-window", WINDOW, stdin="\n".join(lines)
    )

    assert run.code == 0, run.err
    warnings = [line for line in run.err.splitlines() if "server-side compaction" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: server-side compaction is not")
    assert run.notices and cli.script.summaries  # compacted locally instead


def test_the_async_loop_compacts_on_the_server_too(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)

    async def talk() -> None:
        for n in range(15):
            script.add(text_reply(filler(f"answer {n}", 150)))
            await loop.arun_turn(filler(f"request {n}", 300))
            if recorder.transitions:
                return

    asyncio.run(talk())
    (transition,) = recorder.transitions
    assert transition.summary.strategy == "server"
    assert transition.summary.tokens_after_source == "api"  # counted by the async client
    assert recorder.replies[-1].usage.prompt_tokens == transition.summary.tokens_after
    assert fake_api.violations == []


def test_a_failed_compaction_drops_nothing_and_the_loop_compacts_locally(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    fake_api.failed_compactions = True
    loop, script, recorder = server_compacting_loop(fake_api, store, tmp_path)
    with pytest.warns(UserWarning, match="the API's compaction failed"):
        talk_until_compacted(loop, script, recorder)
    (transition,) = recorder.transitions
    assert transition.summary.strategy in ("summarize", "prune")
    assert script.summaries  # the local summarizer wrote it
    # The last request with the edit reached the trigger: the one the API failed to compact.
    paused = [r.body for r in message_requests(fake_api) if "context_management" in r.body][-1]
    (edit,) = paused["context_management"]["edits"]
    assert fake_api.count_input_tokens(paused) >= edit["trigger"]["value"]
    assert "compaction" not in json.dumps([m.to_param() for m in loop.messages])
    assert fake_api.violations == []


def test_the_block_is_estimated_and_summarized_by_its_summary_text() -> None:
    """Its signature and encrypted part are opaque to the model: the estimate counts the text;
    a later local compaction hands the text over as the summary to update, once."""
    from agentloop import TokenEstimator
    from agentloop._core.compaction.summary import render_message

    block = {
        "type": "compaction",
        "content": "The user asked to split the parser; done up to step 3.",
        "encrypted_content": "x" * 20_000,
        "signature": "s" * 200,
    }
    message = Message(role="assistant", content=(block,))
    estimator = TokenEstimator()
    assert estimator.count_message(message) < 60
    rendered = render_message(message, tool_output_chars=2_000)
    assert "summary to update" in rendered and "split the parser" not in rendered
