"""Compaction the user never waits for: the summary is prepared in the background
past an early mark, kept fresh, and applied at the trigger with no summarizer call on the
critical path; a stale one is never applied; cancelling leaves nothing running. On the fake API,
over real HTTP, through the real SDK."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, api_error, text_reply
from support.loop_scripts import (
    MODEL,
    SYSTEM,
    Recorder,
    Script,
    filler,
    request_text,
    scripted_loop,
)

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    ConfigurationError,
    ConversationCompacter,
)
from agentloop._core.compaction.results import CompactionTransition
from agentloop._loop.background import THREAD_NAME
from sessions import SqliteSessionStore

PREPARE_AT = 0.65
assert CompactionSettings().prepare_at == PREPARE_AT  # the default
FIRST = "request 0: the deploy key is called orchid-7 and must never change"


def background_threads() -> set[threading.Thread]:
    """Live background threads (other tests' loops may have left theirs: compare sets)."""
    return {t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()}


class Watch(Recorder):
    """Counts the summary requests the server had seen when each compaction started and ended:
    equal counts mean no summary request was made on the compaction's critical path."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.at_start: list[int] = []
        self.at_end: list[int] = []

    def on_compaction_start(self, decision: Any) -> None:
        super().on_compaction_start(decision)
        self.at_start.append(len(self.script.summaries))

    def on_transition(self, transition: CompactionTransition) -> None:
        super().on_transition(transition)
        self.at_end.append(len(self.script.summaries))


def watched_loop(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path, window: int = 4000
) -> tuple[AgentLoop, Script, Watch]:
    loop, script, _ = scripted_loop(fake_api, store, tmp_path, window=window, prepare_at=PREPARE_AT)
    watch = Watch(script)
    watch.loop = loop
    loop.subscribe(watch)
    script.summary = f"## Goal\n{FIRST}\n\n## Progress\nthe requests so far were answered"
    return loop, script, watch


@pytest.fixture
def store(tmp_path: Path) -> Any:
    from sessions import open_store

    with open_store(tmp_path / "sessions.db") as opened:
        yield opened


def talk(loop: AgentLoop, script: Script, turns: int, start: int = 0) -> None:
    for n in range(start, start + turns):
        script.add(text_reply(filler(f"answer {n}", 60)))
        loop.run_turn(FIRST if n == 0 else filler(f"request {n}", 120))


def test_the_turn_that_crosses_the_trigger_makes_no_summary_request(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, watch = watched_loop(fake_api, store, tmp_path)
    script.summary_delay = 0.2  # slower than a turn: the background has to be waited for
    before = background_threads()

    talk(loop, script, 34)
    loop.close()

    assert len(watch.transitions) >= 2
    # Every compaction applied a summary prepared before it started: none on its critical path.
    assert watch.at_start == watch.at_end
    for transition in watch.transitions:
        summary = transition.summary
        assert summary.prepared and summary.strategy == "summarize"
        assert summary.summary_calls >= 1 and summary.summary_usage.prompt_tokens > 0
        assert any("prepared in the background" in note for note in summary.notes)
        # The first turn's facts survive (the summary keeps them) and the child is small.
        assert "orchid-7" in request_text({"messages": transition.compacted_params})
        # At most half the room the trigger leaves besides the (short) system prompt and tool.
        assert summary.tokens_after <= 0.6 * loop.compacter.trigger_tokens  # type: ignore[union-attr]
    # The background requests continue the cached conversation (same system, the history).
    assert all(body["system"][0]["text"] == SYSTEM for body in script.summaries)
    assert background_threads() <= before  # this loop's thread was joined
    assert fake_api.violations == []


def test_a_stale_prepared_summary_is_never_applied(fake_api: FakeAnthropicServer) -> None:
    script = Script(summary="## Goal\nthe prepared one")
    fake_api.handler = script
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=4000,
        model=model,
        max_output_tokens=512,
        settings=CompactionSettings(api_summary=False),  # the API's: test_on_demand
    )
    messages: list[Any] = []
    for n in range(10):
        messages.append({"role": "user", "content": filler(f"request {n}", 130)})
        messages.append({"role": "assistant", "content": filler(f"answer {n}", 60)})
    messages.append({"role": "user", "content": "go on"})
    decision = compacter.should_compact(messages)
    assert not decision.compact and decision.usage.tokens >= PREPARE_AT * decision.trigger_tokens
    assert compacter.prepare("s1", messages) is True  # the library's own background call
    assert len(script.summaries) == 1 and compacter.prepared is not None

    # An earlier message is edited: what the summary covers changed.
    edited = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "x"}]
    edited[2] = {"role": "user", "content": "request 1 was withdrawn"}
    script.summary = "## Goal\nwritten now"
    transition = compacter.compact_and_transition("s1", edited, force=True)

    assert transition is not None
    assert not transition.summary.prepared
    assert len(script.summaries) == 2  # summarized now, over the edited history
    assert "written now" in transition.compacted_messages[0].content[0]["text"]
    assert compacter.preparation.discarded == 1
    assert compacter.preparation.last_discard == "a message it covers was changed"
    assert transition.summary.discarded_calls == 1
    assert transition.summary.discarded_usage.prompt_tokens > 0


def test_a_prepared_summary_is_applied_by_compact_and_transition(
    fake_api: FakeAnthropicServer,
) -> None:
    script = Script(summary=f"## Goal\n{FIRST}")
    fake_api.handler = script
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=4000,
        model=model,
        max_output_tokens=512,
        settings=CompactionSettings(api_summary=False),  # the API's: test_on_demand
    )
    messages: list[Any] = [{"role": "user", "content": FIRST}]
    messages.append({"role": "assistant", "content": filler("answer 0", 60)})
    for n in range(1, 11):
        messages.append({"role": "user", "content": filler(f"request {n}", 130)})
        messages.append({"role": "assistant", "content": filler(f"answer {n}", 60)})
    messages.append({"role": "user", "content": "go on"})
    assert compacter.prepare("s1", messages) is True
    # A second call is not due: nothing was added since.
    assert compacter.prepare("s1", messages) is False
    messages.append({"role": "assistant", "content": filler("answer 11", 60)})
    messages.append({"role": "user", "content": filler("request 12", 400)})

    transition = compacter.compact_and_transition("s1", messages, force=True)

    assert transition is not None and transition.summary.prepared
    assert len(script.summaries) == 1  # no call at the compaction
    text = transition.compacted_messages[0].content[0]["text"]
    assert FIRST in text
    # Everything after what the summary covers is kept verbatim: the newest request too.
    assert filler("request 12", 400) in request_text({"messages": transition.compacted_params})
    assert compacter.prepared is None  # applied once, never twice


def test_async_loop_prepares_on_a_task_and_leaves_none_running(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, watch = watched_loop(fake_api, store, tmp_path)
    script.summary_delay = 0.1

    async def run() -> list[asyncio.Task[Any]]:
        for n in range(34):
            script.add(text_reply(filler(f"answer {n}", 60)))
            await loop.arun_turn(FIRST if n == 0 else filler(f"request {n}", 120))
        await loop.aclose()
        return [t for t in asyncio.all_tasks() if t.get_name() == THREAD_NAME]

    before = background_threads()
    left = asyncio.run(run())

    assert left == []
    assert len(watch.transitions) >= 2
    assert watch.at_start == watch.at_end
    assert all(t.summary.prepared for t in watch.transitions)
    assert background_threads() <= before  # a task, no thread


def test_close_cancels_the_request_in_flight_and_joins_its_thread(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, _ = watched_loop(fake_api, store, tmp_path)
    script.summary_delay = 30.0  # never answers within the test
    compacter = loop.compacter
    assert compacter is not None
    before = background_threads()
    n = 0
    while compacter.preparation.started == 0:
        talk(loop, script, 1, start=n)
        n += 1
    mine = background_threads() - before
    assert len(mine) == 1  # the request is in flight, on this loop's thread

    loop.close()

    assert not any(t.is_alive() for t in mine)
    assert compacter.preparation.cancelled == 1
    assert compacter.prepared is None


def test_a_failing_background_request_does_not_disturb_the_turn(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, watch = watched_loop(fake_api, store, tmp_path)
    script.summary_reply = api_error()  # every background summary fails (after no retries)

    talk(loop, script, 20)
    loop.close()

    compacter = loop.compacter
    assert compacter is not None
    assert compacter.preparation.failed >= 1
    # The turns went on; the compaction at the trigger took the ordinary path (a digest: the
    # summarizer fails there too) and the conversation continued under the child.
    assert watch.transitions
    assert not any(t.summary.prepared for t in watch.transitions)
    assert len(watch.replies) == 20


@pytest.mark.parametrize("field", ["prepare_at", "refresh_at"])
@pytest.mark.parametrize("value", [0.0, 1.0, -0.5])
def test_invalid_prepare_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=f"{field} must be between 0 and 1"):
        CompactionSettings(**{field: value})  # type: ignore[arg-type]


def test_prepare_at_none_turns_it_off(
    fake_api: FakeAnthropicServer, store: SqliteSessionStore, tmp_path: Path
) -> None:
    loop, script, recorder = scripted_loop(fake_api, store, tmp_path, prepare_at=None)
    for n in range(20):
        script.add(text_reply(filler(f"answer {n}", 60)))
        loop.run_turn(filler(f"request {n}", 120))
    assert recorder.transitions
    assert not any(t.summary.prepared for t in recorder.transitions)
    compacter = loop.compacter
    assert compacter is not None and compacter.preparation.started == 0


@pytest.mark.heavy
def test_the_cli_prepares_by_default_and_the_setting_turns_it_off(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [filler(f"request {n}", 1200) for n in range(14)]

    def run(setting: str | None) -> Any:
        if setting is None:
            monkeypatch.delenv("AGENTLOOP_PREPARE_SUMMARIES", raising=False)
        else:
            monkeypatch.setenv("AGENTLOOP_PREPARE_SUMMARIES", setting)
        for n in range(len(lines)):
            # No reply needs to take a moment: at the trigger the compaction waits for the
            # summary still in flight, so it is prepared however fast the replies come.
            cli.script.add(text_reply(filler(f"answer {n}", 1200)))
        cli.fake_api.context_window = 30_000
        stdin = "\n".join([*lines, "/context"]) + "\n"
        return cli.run("--context-window", "30000", stdin=stdin)

    before = background_threads()
    prepared = run(None)
    assert prepared.code == 0, prepared.err
    assert prepared.notices
    assert "note: the summary was prepared in the background" in prepared.err
    assert "Summaries: prepared in the background past" in prepared.err  # /context says so
    assert background_threads() <= before  # the CLI ended what ran in the background
    # The agent can search what a summary leaves out: the summary request says so.
    assert all("through its search_history tool" in request_text(b) for b in cli.script.summaries)

    off = run("off")
    assert off.code == 0, off.err
    assert off.notices and "prepared in the background" not in off.err
    assert "preparing ahead is off" in off.err

    refused = run("sometimes")
    assert refused.code == 2 or refused.code == 1
    (line,) = refused.error_lines()
    assert "AGENTLOOP_PREPARE_SUMMARIES must be on or off" in line


@pytest.mark.parametrize("run_async", [False, True])
def test_prepare_counts_a_failed_summary_instead_of_raising(
    fake_api: FakeAnthropicServer, run_async: bool
) -> None:
    script = Script()
    script.summary_reply = api_error()
    fake_api.handler = script
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=4000,
        model=model,
        max_output_tokens=512,
        settings=CompactionSettings(api_summary=False),  # the API's: test_on_demand
    )
    messages: list[Any] = []
    for n in range(10):
        messages.append({"role": "user", "content": filler(f"request {n}", 130)})
        messages.append({"role": "assistant", "content": filler(f"answer {n}", 60)})
    messages.append({"role": "user", "content": "go on"})

    if run_async:
        ready = asyncio.run(compacter.aprepare("s1", messages))
    else:
        ready = compacter.prepare("s1", messages)

    assert ready is False
    assert len(script.summaries) == 1  # it was asked, and failed
    assert compacter.preparation.failed == 1 and compacter.prepared is None
