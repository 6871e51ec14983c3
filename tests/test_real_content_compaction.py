"""Compaction on real content: the corpus of realistic transcripts through the public
API, measured by the test server as the API would measure it.

* every strategy's output is valid (agentloop's validator and the server's own rules);
* the summarizer sees what matters: errors buried in long outputs, paths, every request and the
  newest steering, search queries/URLs/titles, document titles;
* the newest request is carried verbatim (head and tail if very long), never an older one;
* the next request, as the server counts it, is under the trigger (also with a fixed cost per
  message, a tokenizer that charges more, images and PDFs);
* three compactions through plain dicts give one summary prefix;
* an invalid history is refused before any model call, naming the caller's index.

The offline tests use :class:`ServerCountedModel`: ``agentloop.testing.FunctionModel`` (to
capture what the summarizer sees) plus a ``count_tokens`` that is the test server's count, so
they run without HTTP; the end-to-end tests use ``AnthropicModel`` against the server.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from fake_api import TEST_API_KEY, FakeAnthropicServer, check_request, text_reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transcripts import (
    CORPUS,
    Transcript,
    coding_session,
    duplicate_tool_use_id,
    media_session,
    pasted_log_session,
)

from agentloop import (
    AnthropicModel,
    CompactionSettings,
    CompactionTransition,
    ConversationCompacter,
    Message,
    MessageValidationError,
    ModelRequest,
    Usage,
    as_messages,
    to_params,
    validate_messages,
)
from agentloop.testing import FunctionModel

MODEL = "claude-sonnet-4-6"
THRESHOLD = 0.8
FILL = 0.92
"""How full the window is when compaction is asked for (the trigger is at 0.8)."""
MAX_OUTPUT = 4_096
STRATEGIES = ("auto", "summarize", "sliding_window", "prune")
LONG_REQUEST = 4_000
"""A request longer than this many characters may be carried as its head and tail only."""
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def summary_for(round_number: int) -> str:
    return (
        f"## Goal\nKeep the shop backend healthy (summary of round {round_number}).\n\n"
        "## Constraints and decisions\nnone\n\n## Progress\nsee the tail\n\n"
        "## Files read and modified\nnone\n\n## Open todos\nnone\n\n"
        "## Errors and their state\nnone\n\n## Next steps\ncontinue"
    )


@dataclass
class ServerCountedModel(FunctionModel):
    """The summarizer double; its ``count_tokens`` is the test server's count (no HTTP)."""

    counter: FakeAnthropicServer | None = None

    def count_tokens(self, request: ModelRequest) -> int:
        assert self.counter is not None
        return self.counter.count_input_tokens(request_body(request))

    @property
    def summary_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.metadata.get("purpose") == "summary"]

    @property
    def summarizer_input(self) -> str:
        return "\n".join(
            strings(to_params(list(r.messages))) + "\n" + r.system for r in self.summary_requests
        )


def request_body(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model, "messages": to_params(list(request.messages))}
    if request.system.strip():
        body["system"] = request.system
    if request.tools:
        body["tools"] = [dict(tool) for tool in request.tools]
    return body


def strings(value: Any) -> str:
    """Every string in a JSON-like value, one per line: what a reader of it could see."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings(item) for item in value.values())
    if isinstance(value, list | tuple):
        return "\n".join(strings(item) for item in value)
    return ""


def summarizer(counter: FakeAnthropicServer | None = None) -> ServerCountedModel:
    rounds = iter(range(1, 1_000))
    return ServerCountedModel(function=lambda _request: summary_for(next(rounds)), counter=counter)


def anchored(transcript: Transcript, server: FakeAnthropicServer) -> list[Message]:
    """The transcript as our messages, its last reply carrying the usage the API reported for
    the request that produced it (as the loop records it)."""
    messages = as_messages(transcript.messages)
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    prompt = server.count_input_tokens(transcript.body(messages=transcript.messages[:last]))
    output = server.count_output_tokens(transcript.messages[last]["content"])
    messages[last] = Message.assistant(
        messages[last].content, usage=Usage(input_tokens=prompt, output_tokens=output)
    )
    return messages


def window_for(transcript: Transcript, server: FakeAnthropicServer, fill: float = FILL) -> int:
    return int(server.count_input_tokens(transcript.body()) / fill)


def corpus_compacter(window: int, strategy: Any, model: Any) -> ConversationCompacter:
    return ConversationCompacter(
        model_name=MODEL,
        context_window=window,
        model=model,
        max_output_tokens=MAX_OUTPUT,
        settings=CompactionSettings(strategy=strategy, threshold=THRESHOLD, api_summary=False),
        clock=lambda: NOW,
        new_session_id=lambda: "child",
    )


@dataclass
class Compacted:
    transcript: Transcript
    server: FakeAnthropicServer
    compacter: ConversationCompacter
    model: ServerCountedModel
    transition: CompactionTransition | None

    @property
    def params(self) -> list[dict[str, Any]] | None:
        if self.transition is None:
            return None
        return [dict(p) for p in self.transition.compacted_params]

    @property
    def tail_start(self) -> int:
        """Where the kept messages start in the original (after a summary prefix, if any)."""
        assert self.transition is not None
        kept = self.transition.compacted_messages
        has_prefix = kept[0].summary is not None
        return len(self.transcript.messages) - (len(kept) - 1 if has_prefix else len(kept))

    @property
    def next_request_tokens(self) -> int:
        assert self.params is not None
        return self.server.count_input_tokens(self.transcript.body(messages=self.params))

    @property
    def text(self) -> str:
        assert self.params is not None
        return strings(self.params)


def compact(
    transcript: Transcript, strategy: str, *, server: FakeAnthropicServer | None = None
) -> Compacted:
    """Compact ``transcript`` at 92 % of a window sized for it, counted by ``server``."""
    server = server or FakeAnthropicServer()
    model = summarizer(server)
    compacter = corpus_compacter(window_for(transcript, server), strategy, model)
    transition = compacter.compact_and_transition(
        "parent", anchored(transcript, server), system=transcript.system, tools=transcript.tools
    )
    return Compacted(transcript, server, compacter, model, transition)


def assert_valid(result: Compacted) -> None:
    assert result.params is not None
    validate_messages(as_messages(result.params), allow_pending_tool_use=False)
    assert check_request(result.transcript.body(messages=result.params)) == []


# ---------------------------------------------------------------------------------------------
# Validity of every strategy's output


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_strategy_gives_a_valid_context(name: str, strategy: str) -> None:
    result = compact(CORPUS[name](1, 100), strategy)
    if strategy == "prune" and result.params is None:
        return  # a pruning that cannot reach the target is not committed
    assert_valid(result)


# ---------------------------------------------------------------------------------------------
# Under the trigger as the server counts it


@pytest.mark.heavy
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    name=st.sampled_from(sorted(CORPUS)),
    strategy=st.sampled_from(STRATEGIES),
    seed=st.integers(0, 10_000),
    size=st.integers(40, 260),
    overhead=st.sampled_from([3, 60]),
    factor=st.sampled_from([1.0, 1.4]),
)
def test_the_next_request_is_under_the_trigger(
    name: str, strategy: str, seed: int, size: int, overhead: int, factor: float
) -> None:
    server = FakeAnthropicServer(message_overhead=overhead, token_factor=factor)
    result = compact(CORPUS[name](seed, size), strategy, server=server)
    if strategy == "prune" and result.params is None:
        return
    assert result.params is not None, f"{strategy} did not compact {name}"
    assert_valid(result)
    assert result.next_request_tokens < result.compacter.trigger_tokens


@pytest.mark.parametrize("build", [media_session, coding_session])
@pytest.mark.parametrize("strategy", ["auto", "summarize", "sliding_window"])
def test_media_heavy_context_is_under_the_trigger(build: Any, strategy: str) -> None:
    """Images and PDFs cost the API far more (or less) than their base64 suggests; the count
    after compaction is still under the trigger, with a fixed cost per message on top."""
    transcript = build(3, 60)
    server = FakeAnthropicServer(message_overhead=40, token_factor=1.2)
    result = compact(transcript, strategy, server=server)
    assert result.params is not None
    assert_valid(result)
    assert result.next_request_tokens < result.compacter.trigger_tokens


# ---------------------------------------------------------------------------------------------
# End to end: AnthropicModel against the test server


@pytest.fixture
def api() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(message_overhead=60, token_factor=1.3) as server:
        server.handler = lambda _body: text_reply(summary_for(0))
        yield server


@pytest.mark.parametrize("strategy", ["auto", "summarize", "sliding_window", "prune"])
def test_end_to_end_the_api_counts_the_compacted_context_under_the_trigger(
    api: FakeAnthropicServer, strategy: str
) -> None:
    transcript = coding_session(4, 160)
    window = window_for(transcript, api)
    api.context_window = window
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=api.base_url, max_retries=0)
    compacter = corpus_compacter(window, strategy, model)
    transition = compacter.compact_and_transition(
        "parent", anchored(transcript, api), system=transcript.system, tools=transcript.tools
    )
    if strategy == "prune" and transition is None:
        assert api.message_requests == []
        return
    assert transition is not None
    # The compacted context was measured by the API's own count before it was committed.
    assert api.count_requests, "the compaction was never measured by count_tokens"
    reply = api.client().messages.create(
        model=MODEL,
        max_tokens=MAX_OUTPUT,
        system=transcript.system,
        tools=transcript.tools,  # type: ignore[arg-type]
        messages=transition.compacted_params,
    )
    usage = reply.usage
    counted = (
        usage.input_tokens
        + (usage.cache_read_input_tokens or 0)
        + (usage.cache_creation_input_tokens or 0)
    )
    assert counted < compacter.trigger_tokens
    # The figure shown to the user is within 10 % of what the API counts next.
    after = transition.summary.tokens_after
    assert abs(after - counted) <= 0.10 * counted, (after, counted)
    # With the API's count of the compacted context reported, the next turn does not compact.
    answered = [
        *transition.compacted_messages,
        Message.assistant("Continuing.", usage=Usage(input_tokens=counted, output_tokens=5)),
        Message.user("go on"),
    ]
    decision = compacter.should_compact(answered, system=transcript.system, tools=transcript.tools)
    assert not decision.compact, decision.reason
    assert api.violations == []


# ---------------------------------------------------------------------------------------------
# What the summarizer sees


def _long_safe(text: str) -> list[str]:
    """The parts of a request to look for: all of it, or its head and tail if very long."""
    if len(text) <= LONG_REQUEST:
        return [text]
    return [text[:300], text[-300:]]


@pytest.mark.parametrize(
    "name", ["coding", "buried_errors", "research", "media", "steering", "interrupted"]
)
def test_the_summarizer_sees_what_matters(name: str) -> None:
    transcript = CORPUS[name](2, 200)
    result = compact(transcript, "summarize")
    assert result.params is not None and result.model.summary_requests
    seen = result.model.summarizer_input + "\n" + result.text
    facts = transcript.facts
    expected: list[tuple[str, str]] = [("error", needle) for needle in facts.error_needles]
    expected += [("path", path) for path in facts.paths]
    expected += [("request", part) for r in facts.requests for part in _long_safe(r.text)]
    expected += [("search query", query) for query in facts.search_queries]
    expected += [("search URL", url) for url in facts.search_urls]
    expected += [("search title", title) for title in facts.search_titles]
    expected += [("document title", title) for title in facts.document_titles]
    missing = [f"{kind}: {value[:90]!r}" for kind, value in expected if value not in seen]
    assert not missing, f"{len(missing)} of {len(expected)} facts lost:\n" + "\n".join(missing)


def test_errors_buried_mid_output_reach_the_summarizer() -> None:
    """The sharpest case: the error lines sit past the head and before the tail of outputs of
    5-7 KB, and nothing else in the transcript repeats them."""
    transcript = CORPUS["buried_errors"](5, 160)
    result = compact(transcript, "summarize")
    head_errors = [e for e in transcript.facts.errors if e.message_index < 100]
    assert len(head_errors) >= 3
    for error in head_errors:
        for needle in error.needles:
            assert needle in result.model.summarizer_input, needle


# ---------------------------------------------------------------------------------------------
# The newest request, verbatim


@pytest.mark.parametrize("strategy", ["auto", "summarize", "sliding_window"])
@pytest.mark.parametrize("name", ["steering", "coding", "interrupted", "pasted_log"])
def test_the_newest_request_is_carried_never_an_older_one(name: str, strategy: str) -> None:
    transcript = CORPUS[name](6, 180)
    result = compact(transcript, strategy)
    assert result.params is not None
    latest = transcript.facts.latest_request
    for part in _long_safe(latest.text):
        assert part in result.text, f"the newest request ({latest.kind}) is not carried"
    assert result.transition is not None
    if result.transition.compacted_messages[0].summary is None:
        return  # no summary prefix (a pruning): nothing was carried
    if name in ("steering", "pasted_log"):  # the sharp case: the newest request is in the head
        assert latest.message_index < result.tail_start
    # The ledger lists the user's earlier requests as what they are; the slot of
    # the latest request carries the newest only.
    carried = strings(result.params[0]).partition("The user's latest request, verbatim:")[2]
    for request in transcript.facts.requests[:-1]:
        if request.message_index < result.tail_start:
            assert request.text not in carried, "an older request is carried as if it were new"


def test_a_very_long_newest_request_is_capped_to_its_head_and_tail() -> None:
    transcript = pasted_log_session(0, 160)
    latest = transcript.facts.latest_request
    assert len(latest.text) > 100_000
    result = compact(transcript, "summarize")
    assert result.params is not None
    assert latest.text[:300] in result.text and latest.text[-300:] in result.text
    assert latest.text not in result.text, "a 27k-token paste is carried whole"
    assert result.next_request_tokens < result.compacter.trigger_tokens


# ---------------------------------------------------------------------------------------------
# The dict path round-trips


def _assistant_starts(messages: list[dict[str, Any]], fractions: list[float]) -> list[int]:
    """Indexes of assistant messages at about the given fractions of the history."""
    starts = []
    for fraction in fractions:
        index = int(len(messages) * fraction)
        while messages[index]["role"] != "assistant":
            index += 1
        starts.append(index)
    return starts


def test_three_compactions_through_dicts_give_one_summary_prefix() -> None:
    transcript = coding_session(8, 360)
    messages = transcript.messages
    cuts = [*_assistant_starts(messages, [1 / 3, 2 / 3]), len(messages)]
    server = FakeAnthropicServer()
    model = summarizer(server)
    first = transcript.body(messages=messages[: cuts[0]])
    compacter = corpus_compacter(int(server.count_input_tokens(first) / FILL), "summarize", model)
    history: list[dict[str, Any]] = messages[: cuts[0]]
    start = cuts[0]
    for round_number, end in enumerate([*cuts[1:], None], start=1):
        transition = compacter.compact_and_transition(
            f"session-{round_number}",
            history,
            system=transcript.system,
            tools=transcript.tools,
            force=True,
        )
        assert transition is not None, f"compaction {round_number} did not happen"
        params = [dict(p) for p in transition.compacted_params]
        assert all(isinstance(m, dict) for m in params)
        validate_messages(as_messages(params), allow_pending_tool_use=False)
        text = strings(params)
        assert text.count("## Goal") == 1, f"summaries nest after compaction {round_number}"
        assert f"round {round_number})" in strings(params[0])
        if end is None:
            break
        history = [*params, *messages[start:end]]
        start = end
    assert len(model.summary_requests) >= 3
    # Later rounds fold the previous summary in as the summary so far, not as a user request.
    later = "\n".join(strings(to_params(list(r.messages))) for r in model.summary_requests[1:])
    assert "round 1)" in later


# ---------------------------------------------------------------------------------------------
# Invalid input is refused first


@pytest.mark.parametrize("as_dicts", [True, False], ids=["dicts", "messages"])
@pytest.mark.parametrize("force", [True, False], ids=["forced", "by-threshold"])
def test_an_invalid_history_is_refused_before_any_model_call(as_dicts: bool, force: bool) -> None:
    transcript = coding_session(0, 120)
    broken, index = duplicate_tool_use_id(transcript)
    server = FakeAnthropicServer()
    model = summarizer(server)
    compacter = corpus_compacter(window_for(transcript, server), "summarize", model)
    history: list[Any] = broken if as_dicts else as_messages(broken)
    with pytest.raises(MessageValidationError) as caught:
        compacter.compact_and_transition(
            "parent", history, system=transcript.system, tools=transcript.tools, force=force
        )
    assert re.search(rf"\b{index}\b", str(caught.value)), str(caught.value)
    assert model.requests == []


def test_an_invalid_history_never_reaches_the_api(api: FakeAnthropicServer) -> None:
    transcript = coding_session(0, 120)
    broken, index = duplicate_tool_use_id(transcript)
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=api.base_url, max_retries=0)
    compacter = corpus_compacter(window_for(transcript, api), "auto", model)
    with pytest.raises(MessageValidationError, match=rf"\b{index}\b"):
        compacter.compact_and_transition("parent", broken, force=True)
    assert api.requests == []


def test_the_offline_counter_double_matches_the_server() -> None:
    """The double's count is the server's (what the offline tests rely on)."""
    transcript = media_session(0, 40)
    server = FakeAnthropicServer(message_overhead=25)
    model = summarizer(server)
    request = ModelRequest(
        model=MODEL,
        messages=as_messages(transcript.messages),
        system=transcript.system,
        tools=transcript.tools,
    )
    assert model.count_tokens(request) == server.count_input_tokens(transcript.body())
    assert dataclasses.is_dataclass(model)
