"""Strategy ``auto`` on the API path, against the test server (a 5.x model that writes its own
summaries): it prunes first, and only when pruning does not reach the target does it take the
API's summary (the job offers it; the strategy decides)."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAnthropicServer

from agentloop import AnthropicModel, CompactionSettings, ConversationCompacter, Message
from agentloop._core.compaction.api_compaction import API_SUMMARY
from agentloop._core.values.settings import StrategyName
from agentloop.testing import tool_call

SONNET_55 = "claude-sonnet-5-5"


def rounds(n: int, *, output_chars: int, request_words: int = 20) -> list[Message]:
    """``n`` turns of [request, tool call, its result, answer], then a new request."""
    out: list[Message] = []
    for i in range(n):
        call = tool_call("read", {"n": i}, call_id=f"toolu_{i:04d}")
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "x" * output_chars}
        out += [
            Message.user(f"request {i}: " + "word " * request_words),
            Message.assistant([call]),
            Message.user([result]),
            Message.assistant(f"answer {i}"),
        ]
    return [*out, Message.user("the newest request")]


def compact(fake: FakeAnthropicServer, strategy: StrategyName, history: list[Message]) -> Any:
    model = AnthropicModel(api_key="test-key", base_url=fake.base_url, max_retries=0)
    compacter = ConversationCompacter(
        model_name=SONNET_55,
        context_window=60_000,
        model=model,
        max_output_tokens=2_000,
        settings=CompactionSettings(strategy=strategy, prepare_at=None),
    )
    assert compacter.api_summary_available()  # the API would write the summary here
    return compacter.compact_and_transition("parent", history, force=True)


def compaction_requests(fake: FakeAnthropicServer) -> list[dict[str, Any]]:
    return [body for body in fake.message_requests if body.get("compaction") is not None]


def test_auto_prunes_first_and_asks_the_api_for_nothing_when_pruning_reaches_the_target(
    fake_api: FakeAnthropicServer,
) -> None:
    history = rounds(8, output_chars=12_000)  # the old tool outputs are the context
    transition = compact(fake_api, "auto", history)
    assert transition is not None
    assert transition.summary.strategy == "prune"
    assert compaction_requests(fake_api) == []  # no summary was asked for: pruning did it
    assert len(transition.compacted_messages) == len(history)  # every message kept, pruned
    assert transition.summary.tokens_after < transition.summary.tokens_before // 2
    assert fake_api.refusals == [] and fake_api.violations == []


def test_auto_takes_the_apis_summary_when_pruning_does_not_reach_the_target(
    fake_api: FakeAnthropicServer,
) -> None:
    history = rounds(8, output_chars=40, request_words=900)  # nothing worth pruning
    transition = compact(fake_api, "auto", history)
    assert transition is not None
    assert transition.summary.strategy == API_SUMMARY
    assert len(compaction_requests(fake_api)) == 1
    assert transition.compacted_messages[0].is_compaction_only
    assert fake_api.refusals == [] and fake_api.violations == []


def test_summarize_takes_the_apis_summary_even_where_pruning_would_do(
    fake_api: FakeAnthropicServer,
) -> None:
    transition = compact(fake_api, "summarize", rounds(8, output_chars=12_000))
    assert transition is not None
    assert transition.summary.strategy == API_SUMMARY
    assert len(compaction_requests(fake_api)) == 1
    assert transition.compacted_messages[0].is_compaction_only


def test_window_and_prune_never_ask_the_api_for_a_summary(fake_api: FakeAnthropicServer) -> None:
    for strategy in ("sliding_window", "prune"):
        transition = compact(fake_api, strategy, rounds(8, output_chars=12_000))
        assert transition is not None and transition.summary.strategy == strategy
    assert compaction_requests(fake_api) == []
