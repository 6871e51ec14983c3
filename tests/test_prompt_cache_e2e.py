"""What a session costs with the prompt cache, on the fake API that bills like the
Messages API's cache: real coding sessions replayed through ``AgentLoop`` on the real SDK,
with compactions, and the summary request that continues the cached conversation."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, Reply, billed_ratio
from fake_api.cache import DEFAULT_CACHE_MIN_TOKENS
from support.loop_scripts import is_summary_request
from support.replay import first_message, replay, user_turns
from transcripts import coding_session, steering_session

from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.measuring.cache import MAX_BREAKPOINTS, breakpoint_count

WINDOW = 60_000


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running
        assert running.violations == []


def first_request_summary(first: str) -> Any:
    """A summarizer that keeps the first request word for word (what the tests look for)."""

    def summary(body: dict[str, Any]) -> str:
        return (
            f"## Goal\n{first}\n\n## Constraints and decisions\nsmall, tested edits\n\n"
            "## Progress\nthe handler and its tests are in progress\n\n"
            "## Files read and modified\n- src/app/webhooks.py\n\n## Open todos\nnone\n\n"
            "## Errors and their state\nnone open\n\n## Next steps\ncontinue the task"
        )

    return summary


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or []
    return "".join(b.get("text", "") for b in system) if isinstance(system, list) else system


@pytest.mark.heavy
def test_a_replayed_coding_session_is_billed_like_a_cached_agent(
    server: FakeAnthropicServer,
) -> None:
    transcript = coding_session(0, 240)
    first = user_turns(transcript.messages)[0][0]["text"]
    run = replay(server, transcript, window=WINDOW, summary=first_request_summary(first))

    assert len(run.transitions) >= 2, "the replay must compact at least twice"
    assert len(run.conversation_bills) >= 100
    # Every request marks at most four breakpoints and keeps the previous one's prefix.
    bodies = [b.body for b in run.bills]
    assert all(breakpoint_count(body) <= MAX_BREAKPOINTS for body in bodies)
    assert run.prefix_breaks() == []
    # One summarizer call per compaction; each continues the conversation and reads it.
    # (auto may settle for pruning old tool outputs: no call at all.)
    summarized = [t.summary for t in run.transitions if t.summary.strategy == "summarize"]
    assert summarized, "at least one compaction summarizes"
    # Written at the trigger: one call. Prepared in the background (the default): no call at
    # the trigger, and at most a few background requests (the first one and its refreshes).
    assert all(s.summary_continued for s in summarized)
    assert all(s.summary_calls == 1 for s in summarized if not s.prepared)
    assert all(1 <= s.summary_calls <= 3 for s in summarized if s.prepared)
    assert any(s.prepared for s in summarized)
    assert all(
        t.summary.summary_calls == 0
        for t in run.transitions
        if t.summary.strategy == "prune" and not t.summary.discarded_calls
    )
    for bill in run.summary_bills:
        assert bill.cache_read > 0.7 * bill.uncached_input
        assert bill.cache_write_5m == 0 and bill.cache_write_1h == 0
    # The bill: about what Claude Code pays on such work (0.12x), far from uncached (1x).
    assert run.ratio <= 0.16, f"billed {run.ratio:.3f}x of uncached input"
    assert billed_ratio(run.summary_bills) <= 0.35
    # The first request's words survive every compaction (they are in every child's prefix).
    for transition in run.transitions:
        assert first in transition.compacted_messages[0].content[0]["text"]


@pytest.mark.heavy
def test_consecutive_turns_read_the_previous_prefix_and_a_child_reads_tools_and_system(
    server: FakeAnthropicServer,
) -> None:
    transcript = steering_session(1, 160)
    first = user_turns(transcript.messages)[0][0]["text"]
    # Project instructions make tools and system long enough to be cached on their own.
    system = (
        transcript.system
        + "\n\n"
        + "\n".join(
            f"- Convention {n}: keep module {n} typed, tested and documented." for n in range(150)
        )
    )
    fixed = server.count_input_tokens({"system": system, "tools": transcript.tools})
    assert fixed >= DEFAULT_CACHE_MIN_TOKENS
    run = replay(
        server, transcript, window=40_000, summary=first_request_summary(first), system=system
    )
    assert run.transitions
    checked = {"turns": 0, "children": 0}
    # Conversation requests in order (summaries prepared in the background come in between).
    conversation = [b for b in run.bills if not is_summary_request(b.body)]
    for before, after in itertools.pairwise(conversation):
        if first_message(after.body) != first_message(before.body):
            # The first request of a child: tools and system come from the cache, nothing
            # more (count_tokens adds some framing to their count).
            assert 0.95 * fixed <= after.cache_read <= fixed
            checked["children"] += 1
        else:
            # Everything the previous request sent is read back (it ends at its breakpoint).
            assert after.cache_read >= before.uncached_input
            checked["turns"] += 1
    assert checked["children"] >= 1 and checked["turns"] >= 20


@pytest.mark.heavy
def test_caching_only_the_system_prompt_pays_full_price_for_the_history(
    server: FakeAnthropicServer,
) -> None:
    """Only the system prompt marked (before the breakpoints followed the conversation),
    measured the same way: it bills close to uncached."""
    transcript = coding_session(0, 120)
    first = user_turns(transcript.messages)[0][0]["text"]
    run = replay(
        server, transcript, window=WINDOW, summary=first_request_summary(first), cache="system"
    )
    assert run.ratio > 0.5


@pytest.mark.heavy
def test_another_summary_model_summarizes_a_transcript_and_says_what_it_read(
    server: FakeAnthropicServer,
) -> None:
    transcript = coding_session(2, 140)
    first = user_turns(transcript.messages)[0][0]["text"]
    run = replay(
        server,
        transcript,
        window=WINDOW,
        summary=first_request_summary(first),
        summary_model="claude-haiku-4-5",
    )
    summarized = [t.summary for t in run.transitions if t.summary.strategy == "summarize"]
    assert summarized
    for summary in summarized:
        assert summary.summary_model == "claude-haiku-4-5"
        assert not summary.summary_continued
    summaries = run.summary_bills
    assert summaries and all(b.body["model"] == "claude-haiku-4-5" for b in summaries)
    assert all(system_text(b.body) == SUMMARIZER_SYSTEM for b in summaries)


def test_a_summary_reply_that_calls_a_tool_is_never_stored(
    server: FakeAnthropicServer,
) -> None:
    transcript = coding_session(0, 120)
    first = user_turns(transcript.messages)[0][0]["text"]

    def summarizer(body: dict[str, Any]) -> str | Reply:
        if system_text(body) != SUMMARIZER_SYSTEM:  # the continuing request: a tool call
            call = {"type": "tool_use", "id": "", "name": "read_file", "input": {"path": "x"}}
            return Reply(content=(call,))
        return "## Goal\n" + str(first)

    run = replay(server, transcript, window=WINDOW, summary=summarizer, strategy="summarize")
    assert run.transitions
    for transition in run.transitions:
        assert first in transition.compacted_messages[0].content[0]["text"]
        assert transition.summary.summary == "## Goal\n" + first
        assert transition.summary.summary_calls == 2  # the tool call, then the transcript
        assert not transition.summary.summary_continued
