"""agentloop inside the ``anthropic`` SDK's own tool runner, the installed SDK's real
runner against the test server with preserved thinking enforced (``claude-sonnet-5-5`` signs
its thinking and refuses a changed prefix).

A 30-turn tool session at a 20k window compacts at the threshold at least twice through
``compact_before_next_turn()``, no request is refused, the store holds the lineage
(``agentloop sessions tree`` shows it), the paths and commands of the first span are in the
context after the second compaction (the ledger, carried in a system message after the next
user turn), and a second runner resumes the session; the async (streaming) runner the same.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import beta_async_tool, beta_tool
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    Reply,
    ReplySpec,
    pause_reply,
    text_reply,
    tool_reply,
)

from agentloop import (
    ON_DEMAND_COMPACTION_BETA,
    CommandRan,
    CompactionDecision,
    CompactionTransition,
    ConfigurationError,
    FileTouched,
    LoopEvents,
    Message,
    ToolFacts,
    default_tool_facts,
)
from agentloop._cli.main import main
from agentloop._core.compaction.on_demand import Carried, carried_message, carried_over
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.values.carried import Pin
from agentloop.integrations.tool_runner import RunnerCompaction
from sessions import SessionStore, open_store

MODEL = "claude-sonnet-5-5"
WINDOW = 20_000
TURNS = 30
SYSTEM = "You are a coding agent. Use the tools."
FIRST_SPAN = ("src/module_0.py", "pytest tests/test_1.py", "src/module_2.py")
RULE = "Project rule: never edit vendor/."
FIRST: list[dict[str, Any]] = [
    {"role": "user", "content": "fix the failing tests"},
    {"role": "system", "content": [{"type": "text", "text": RULE}]},  # the caller's own
]
README = Path(__file__).resolve().parent.parent / "README.md"
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda")


def _filler(label: str, words: int = 1100) -> str:
    cycle = itertools.cycle(WORDS)
    return label + ": " + " ".join(next(cycle) for _ in range(words))


@beta_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return _filler(f"contents of {path}")


@beta_tool
def run_command(command: str) -> str:
    """Run a shell command."""
    return _filler(f"output of {command}")


@beta_tool
def open_file(file: str) -> str:
    """Open a file of the project (a tool of the user's own, with its own input keys)."""
    return _filler(f"contents of {file}")


@beta_tool
def shell(cmd: str) -> str:
    """Run a shell line (the user's own tool)."""
    return _filler(f"output of {cmd}")


def own_facts() -> ToolFacts:
    """The user's tools, recognized for the ledger in a line each (the tool-facts seam)."""
    facts = default_tool_facts()
    facts.register("open_file", lambda call: [FileTouched(str(call.input["file"]), "read")])
    facts.register("shell", lambda call: [CommandRan(str(call.input["cmd"]))])
    return facts


@beta_async_tool(name="read_file")
async def aread_file(path: str) -> str:
    """Read a file of the project."""
    return _filler(f"contents of {path}")


@beta_async_tool(name="run_command")
async def arun_command(command: str) -> str:
    """Run a shell command."""
    return _filler(f"output of {command}")


class Model:
    """The scripted model: ``turns`` tool calls (a file read, a command, in turn), then an
    answer; a later user message starts another ``turns``."""

    def __init__(
        self,
        turns: int,
        read: tuple[str, str] = ("read_file", "path"),
        run: tuple[str, str] = ("run_command", "command"),
    ) -> None:
        self.turns = turns
        self.read, self.run = read, run
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        last = body["messages"][-1]
        content = last["content"]
        if last["role"] == "user" and isinstance(content, str):
            self.calls = 0  # a new request of the user's
        n = self.calls
        self.calls += 1
        if n >= self.turns:
            return text_reply("All done.")
        if n % 2 == 0:
            name, key = self.read
            return tool_reply((name, {key: f"src/module_{n}.py"}), text="Reading.")
        name, key = self.run
        return tool_reply((name, {key: f"pytest tests/test_{n}.py"}), text="Run.")


class Events(LoopEvents):
    def __init__(self) -> None:
        self.decisions: list[CompactionDecision] = []
        self.started: list[CompactionDecision] = []
        self.transitions: list[CompactionTransition] = []

    def on_usage(self, decision: CompactionDecision) -> None:
        self.decisions.append(decision)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        self.started.append(decision)

    def on_transition(self, transition: CompactionTransition) -> None:
        self.transitions.append(transition)


@pytest.fixture
def store() -> Iterator[SessionStore]:
    with open_store() as opened:  # the CLI's own store (AGENTLOOP_HOME is a temp dir)
        yield opened


def _runner(client: Any, messages: list[Any], tools: list[Any], **extra: Any) -> Any:
    return client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2_000,
        system=SYSTEM,
        tools=tools,
        messages=messages,
        betas=[ON_DEMAND_COMPACTION_BETA],
        thread=False,  # the test server keeps no server-side threads
        **extra,
    )


def _check_session(
    fake: FakeAnthropicServer,
    store: SessionStore,
    compaction: RunnerCompaction,
    events: Events,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """What a finished 30-turn session must show; returns its root session."""
    assert fake.refusals == [] and fake.violations == []
    # The runner's requests, and agentloop's only one of its own: the free count_tokens.
    assert {r.path for r in fake.requests} == {"/v1/messages", "/v1/messages/count_tokens"}
    assert all(b.get("compaction") is None for b in fake.count_requests)
    asked = [b["compaction"] for b in fake.message_requests if b.get("compaction") is not None]
    assert len(asked) == len(compaction.transitions)
    assert all(c["instructions"].startswith(SUMMARIZER_SYSTEM[:60]) for c in asked)
    transitions = compaction.transitions
    assert len(transitions) >= 2, "the session did not compact twice"
    assert events.transitions == transitions
    for started, transition in zip(events.started, transitions, strict=True):
        assert started.compact and started.usage.tokens >= started.trigger_tokens
        summary = transition.summary
        assert summary.tokens_before == started.usage.tokens
        assert summary.tokens_before_source == "api+estimate"  # the reply's usage + results
        assert summary.tokens_after_source == "api"  # count_tokens
        assert summary.tokens_after < summary.tokens_before
    # The ledger of the first span, after the second compaction: in the requests' context.
    second = transitions[1].new_session_id
    after = [b for b in fake.message_requests if b.get("compaction") is None][-1]
    carried = [m for m in after["messages"] if m["role"] == "system"]
    assert len(carried) == 1, "what is carried goes in one system message"
    text = json.dumps(carried[0]["content"])
    for fact in (*FIRST_SPAN, RULE):  # the ledger's facts, the caller's system message
        assert fact in text, fact
    # The lineage in the store, as `agentloop sessions tree` shows it.
    lineage = store.lineage(compaction.session_id)
    root = lineage[0].id
    assert [s.id for s in lineage][-1] == compaction.session_id
    assert second in [s.id for s in lineage] and len(lineage) == len(transitions) + 1
    assert all(s.status == "compacted" for s in lineage[:-1])
    for session, transition in zip(lineage, transitions, strict=False):  # parents kept whole
        assert session.id == transition.original_session_id
        assert session.message_count == transition.summary.original_message_count
    assert "fix the failing tests" in json.dumps(store.get_messages(root)[0].content)
    capsys.readouterr()
    assert main(["sessions", "tree", root, "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    depth, node = 0, tree
    while node["children"]:
        node = node["children"][0]
        depth += 1
        assert node["compaction"] is not None
    assert depth == len(transitions)
    return root


def test_a_30_turn_session_compacts_twice_keeps_its_facts_and_resumes(
    fake_api: FakeAnthropicServer, store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_api.handler = Model(TURNS, read=("open_file", "file"), run=("shell", "cmd"))
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    events = Events()
    compaction = RunnerCompaction(
        store=store, context_window=WINDOW, events=events, tool_facts=own_facts()
    )
    runner = _runner(client, FIRST, [open_file, shell])
    replies = [message.stop_reason for message in compaction.follow(runner)]
    assert replies.count("compaction") == len(compaction.transitions)
    assert replies[-1] == "end_turn" and replies.count("tool_use") == TURNS
    root = _check_session(fake_api, store, compaction, events, capsys)
    stored_last = store.get_messages(compaction.session_id)[-1]
    assert stored_last.role == "assistant"  # the final reply is stored too

    # A second runner, built from the stored session, continues it.
    sent = len(fake_api.message_requests)
    resumed = RunnerCompaction(
        store=store, session_id=root, context_window=WINDOW, tool_facts=own_facts()
    )
    assert resumed.session_id == compaction.session_id  # the newest descendant
    history = resumed.history()
    runner = _runner(
        client, [*history, {"role": "user", "content": "now the docs"}], [open_file, shell]
    )
    more = [m.stop_reason for m in resumed.follow(runner)]
    assert more[-1] == "end_turn"
    first = fake_api.message_requests[sent]
    assert first["messages"][: len(history)] == history  # byte for byte as it was sent
    assert fake_api.refusals == [] and fake_api.violations == []
    assert store.lineage(resumed.session_id)[0].id == root


def test_the_async_streaming_runner_does_the_same(
    fake_api: FakeAnthropicServer, store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_api.handler = Model(TURNS)
    client = anthropic.AsyncAnthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    events = Events()
    compaction = RunnerCompaction(store=store, context_window=WINDOW, events=events)

    async def run(messages: list[Any], owner: RunnerCompaction) -> list[str]:
        runner = _runner(client, messages, [aread_file, arun_command], stream=True)
        reasons: list[str] = []
        async for stream in owner.afollow(runner):
            async for _event in stream:
                pass
            message = await stream.get_final_message()
            reasons.append(str(message.stop_reason))
        return reasons

    replies = asyncio.run(run(FIRST, compaction))
    assert replies[-1] == "end_turn" and replies.count("tool_use") == TURNS
    root = _check_session(fake_api, store, compaction, events, capsys)

    resumed = RunnerCompaction(store=store, session_id=root, context_window=WINDOW)
    messages = [*resumed.history(), {"role": "user", "content": "now the docs"}]
    assert asyncio.run(run(messages, resumed))[-1] == "end_turn"
    assert fake_api.refusals == [] and fake_api.violations == []


def test_a_runner_with_another_system_prompt_is_refused_in_one_line(
    fake_api: FakeAnthropicServer, store: SessionStore
) -> None:
    fake_api.handler = Model(2)
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compaction = RunnerCompaction(store=store, context_window=WINDOW)
    runner = _runner(client, [{"role": "user", "content": "hi"}], [read_file, run_command])
    list(compaction.follow(runner))
    resumed = RunnerCompaction(store=store, session_id=compaction.session_id)
    changed = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2_000,
        system="Another prompt.",
        tools=[read_file, run_command],
        messages=[*resumed.history(), {"role": "user", "content": "again"}],
        betas=[ON_DEMAND_COMPACTION_BETA],
        thread=False,
    )
    with pytest.raises(ConfigurationError) as refused:
        next(iter(resumed.follow(changed)))
    message = str(refused.value)
    assert "\n" not in message and "system" in message and "thinking" in message
    assert len(fake_api.message_requests) == 3  # the changed runner sent nothing


def test_a_runner_without_the_compaction_beta_is_refused_in_one_line(
    fake_api: FakeAnthropicServer, store: SessionStore, tmp_path: Path
) -> None:
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2_000,
        tools=[read_file],
        messages=[{"role": "user", "content": "hi"}],
        thread=False,
    )
    with pytest.raises(ConfigurationError, match=ON_DEMAND_COMPACTION_BETA):
        next(iter(RunnerCompaction(store=store).follow(runner)))
    assert fake_api.message_requests == []


def test_what_an_earlier_carried_message_restated_is_restated_again() -> None:
    # The second compaction summarizes the first one's carried message: its pins go on, read
    # from its parts, or from its text alone (a message stored before the parts were kept).
    pin = Pin("system", "never edit vendor/\n\nnor dist/")
    first = carried_message(Carried("- ledger", pinned=(pin,)))
    assert "[pinned system message]\nnever edit vendor/" in first.text
    text_alone = Message.system(first.content)
    for carried in (first, text_alone):
        history = [Message.user("fix"), Message.assistant("ok"), Message.user("go"), carried]
        again = carried_over([*history, Message.assistant("done")], 5, "- ledger 2")
        assert again.pinned == (pin,) and again.state == "- ledger 2"


def test_a_compaction_the_caller_asks_for_at_the_end_carries_into_the_resumed_session(
    fake_api: FakeAnthropicServer, store: SessionStore
) -> None:
    # The runner compacts after its final turn; what is carried waits for a user turn, which
    # only the next process brings: it is kept with the session and placed on resume.
    fake_api.handler = Model(2)
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    events = Events()
    compaction = RunnerCompaction(store=store, context_window=WINDOW, events=events)
    runner = _runner(client, FIRST, [read_file, run_command])
    for message in compaction.follow(runner):
        if message.stop_reason == "end_turn":
            runner.compact_before_next_turn()  # the caller's own, not agentloop's trigger
    assert len(compaction.transitions) == 1 and events.started == []
    assert compaction.transitions[0].summary.tokens_after_source == "api"
    child = compaction.session_id
    assert [m.role for m in store.get_messages(child)] == ["assistant"]  # the block alone

    resumed = RunnerCompaction(
        store=store, session_id=compaction.transitions[0].original_session_id
    )
    sent = len(fake_api.message_requests)
    runner = _runner(
        client, [*resumed.history(), {"role": "user", "content": "go on"}], [read_file, run_command]
    )
    list(resumed.follow(runner))
    first = fake_api.message_requests[sent]
    assert [m["role"] for m in first["messages"]] == ["assistant", "user", "system"]
    carried = json.dumps(first["messages"][2]["content"])
    assert "src/module_0.py" in carried and RULE in carried
    assert fake_api.refusals == [] and fake_api.violations == []
    # Placed once: the session no longer keeps it waiting, and a third runner adds nothing.
    assert "runner_carried" not in store.get_session(resumed.session_id).metadata


@pytest.mark.heavy
def test_the_readme_snippet_runs_as_written(tmp_path: Path) -> None:
    blocks: list[str] = re.findall(r"```py\n(.*?)```", README.read_text(), flags=re.S)
    (snippet,) = [b for b in blocks if "agentloop.integrations.tool_runner import" in b]
    # The test server keeps no server-side threads (the real API does): whole histories.
    snippet = snippet.replace(
        "betas=[ON_DEMAND_COMPACTION_BETA],", "betas=[ON_DEMAND_COMPACTION_BETA], thread=False,"
    )
    assert "thread=False" in snippet
    paths = iter(f"src/{name}.py" for name in "abcdefgh")

    def answer(body: dict[str, Any]) -> ReplySpec:
        path = next(paths, None)
        if path is None:
            return text_reply("They add up to a small project.")
        return tool_reply(("read_file", {"path": path}), text="Reading.")

    with FakeAnthropicServer(handler=answer) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=TEST_API_KEY)
        done = subprocess.run(
            [sys.executable, "-c", snippet],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert server.violations == [] and server.refusals == []
    match = re.fullmatch(r"(\d+) compactions, now in session (\w+)\n", done.stdout)
    assert match is not None and int(match.group(1)) >= 1, done.stdout
    with open_store(tmp_path / "sessions.db") as stored:
        child = stored.get_session(match.group(2))
        assert child.parent_id is not None
        assert stored.get_session(child.parent_id).status == "compacted"


def test_a_runner_stopped_between_tool_rounds_continues_in_the_next_one(
    fake_api: FakeAnthropicServer, store: SessionStore
) -> None:
    # max_iterations stops the first runner after its tools ran: the tool results are stored,
    # and a runner built from the stored history alone picks the loop up from there.
    model = Model(6)
    fake_api.handler = model
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compaction = RunnerCompaction(store=store, context_window=WINDOW)
    runner = _runner(client, FIRST, [read_file, run_command], max_iterations=3)
    assert [m.stop_reason for m in compaction.follow(runner)] == ["tool_use"] * 3
    stored = store.get_messages(compaction.session_id)
    assert stored[-1].role == "user" and "tool_result" in json.dumps(stored[-1].content)

    resumed = RunnerCompaction(store=store, session_id=compaction.session_id)
    history = resumed.history()
    sent = len(fake_api.message_requests)
    reasons = [
        m.stop_reason for m in resumed.follow(_runner(client, history, [read_file, run_command]))
    ]
    assert reasons == ["tool_use"] * 3 + ["end_turn"] and model.calls == 7
    assert fake_api.message_requests[sent]["messages"] == history
    assert fake_api.refusals == [] and fake_api.violations == []
    assert len(store.get_messages(resumed.session_id)) == len(history) + 7


class Paused(Model):
    """The scripted model, whose turn ``pause_at`` the API pauses (``pause_turn``) once."""

    def __init__(self, turns: int, pause_at: int) -> None:
        super().__init__(turns)
        self.pause_at = pause_at
        self.paused = False

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        if self.calls == self.pause_at and not self.paused:
            self.paused = True
            return pause_reply()
        if self.paused and body["messages"][-1]["role"] == "assistant":  # resumed: it ends
            result = {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_paused",
                "content": [{"type": "web_search_result", "url": "u", "title": "t"}],
            }
            return Reply(content=(result, {"type": "text", "text": "Found it."}))
        return super().__call__(body)


def test_a_paused_turn_and_a_streamed_reply_stay_the_runners(
    fake_api: FakeAnthropicServer, store: SessionStore
) -> None:
    # The sync streaming runner compacts like the others; a paused turn goes back as the
    # runner sends it (agentloop asks for no compaction on a reply that leaves no user turn).
    model = Paused(30, pause_at=16)
    fake_api.handler = model
    client = anthropic.Anthropic(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    events = Events()
    compaction = RunnerCompaction(store=store, context_window=WINDOW, events=events)
    runner = _runner(client, FIRST, [read_file, run_command], stream=True)
    reasons = []
    for stream in compaction.follow(runner):
        for _event in stream:
            pass
        reasons.append(stream.get_final_message().stop_reason)
    assert reasons[-2:] == ["pause_turn", "end_turn"] and "compaction" in reasons
    assert len(events.started) == len(compaction.transitions) >= 1
    paused, resumed = fake_api.message_requests[-2:]  # the paused turn went back unchanged
    assert resumed["messages"][:-1] == paused["messages"]
    assert resumed["messages"][-1]["content"][-1]["type"] == "server_tool_use"
    assert fake_api.refusals == [] and fake_api.violations == []
    stored = [m for s in store.lineage(compaction.session_id) for m in store.get_messages(s.id)]
    assert any("server_tool_use" in json.dumps(m.content) for m in stored)
