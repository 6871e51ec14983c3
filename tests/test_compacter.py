"""ConversationCompacter behaviour: the summarizer sees everything, instructions and hooks reach
it, failures degrade gracefully, thresholds are validated, and measurement is honest."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from support.histories import CharCounter, compact

from agentloop._adapters.tokens import Calibration
from agentloop._core.compaction.results import CompactionOutcome, CompactionTransition
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.cutting.prefix import as_messages
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.measuring.context import reply_reserve
from agentloop._core.values.messages import Message, Usage, to_params, validate_messages
from agentloop._core.values.model import ModelRequest
from agentloop._errors import ConfigurationError, MessageValidationError, ModelError
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.drive import drive
from agentloop.testing import FunctionModel, Reply, summary_input, tool_call

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
FACT = re.compile(r"FACT-\d{4}")
COUNTER = CharCounter()


def compacter(
    *,
    window: int = 100_000,
    model: Any = None,
    settings: CompactionSettings | None = None,
    hooks: list[PreservedStateHook] | None = None,
    max_output_tokens: int = 1_000,
    model_name: str = "claude-test",
    counter: Any = COUNTER,
    calibration: Calibration | None = None,
) -> ConversationCompacter:
    return ConversationCompacter(
        model_name=model_name,
        context_window=window,
        model=model,
        max_output_tokens=max_output_tokens,
        settings=settings,
        counter=counter,
        calibration=calibration,
        hooks=hooks or [],
        clock=lambda: NOW,
        new_session_id=lambda: "child-session",
    )


def compacted_text(messages: list[Message]) -> str:
    """Everything the model would read in a compacted conversation."""
    return "\n".join(
        str(b["text"]) if b.get("type") == "text" else json.dumps(b)
        for m in messages
        for b in m.content
    )


# -- a long coding history with planted facts ---------------------------------------------------


class Facts:
    def __init__(self) -> None:
        self.planted: list[str] = []

    def new(self) -> str:
        fact = f"FACT-{len(self.planted) + 1:04d}"
        self.planted.append(fact)
        return fact


def long_output(facts: Facts) -> str:
    """A 6 KB multi-line tool output: facts at its start and end (what shortening keeps)."""
    body = "\n".join(
        f"    line {i}: value = compute(x_{i}, y_{i})  # unchanged" for i in range(120)
    )
    return f"{facts.new()} header\n{body}\nfooter {facts.new()}"


def fact_round(facts: Facts, r: int) -> list[Message]:
    """One user turn: a request, parallel tool calls (facts in the inputs), their results (a
    short one with a fact, a long one), and a closing assistant reply."""
    read = tool_call("read_file", {"path": f"src/mod{r}.py", "reason": facts.new()})
    grep = tool_call("bash", {"command": f"grep -rn {facts.new()} src/"})
    return [
        Message.user(f"Request {r}: please handle {facts.new()} in the parser"),
        Message.assistant([{"type": "text", "text": f"Looking into {facts.new()}."}, read, grep]),
        Message.user(
            [
                {"type": "tool_result", "tool_use_id": read["id"], "content": f"ok {facts.new()}"},
                {"type": "tool_result", "tool_use_id": grep["id"], "content": long_output(facts)},
            ]
        ),
        Message.assistant(f"Round {r} done: {facts.new()} is resolved."),
    ]


def fact_history(facts: Facts, rounds: int, *, start: int = 0) -> list[Message]:
    return [m for r in range(start, start + rounds) for m in fact_round(facts, r)]


def echo_facts(request: ModelRequest) -> str:
    """A summarizer that keeps every FACT-xxxx it was given (the summary so far included)."""
    found = sorted(set(FACT.findall(summary_input(request))))
    return "## Progress\n" + (" ".join(found) or "none")


def head_and_tail(history: list[Message], result: CompactionTransition) -> tuple[str, str]:
    tail = result.compacted_messages[1:]
    head = history[: len(history) - len(tail)]
    return compacted_text(head), compacted_text(tail)


@pytest.mark.parametrize("summarizer_window", [None, 4_000])
def test_every_fact_reaches_the_summary(summarizer_window: int | None) -> None:
    facts = Facts()
    history = fact_history(facts, 30)
    model = FunctionModel(echo_facts)
    settings = CompactionSettings(strategy="summarize", summarizer_window=summarizer_window)
    c = compacter(model=model, settings=settings)

    result = c.compact_and_transition("parent", history, force=True)

    assert result is not None and result.summary.strategy == "summarize"
    head, tail = head_and_tail(history, result)
    in_head = set(FACT.findall(head))
    assert len(in_head) > 0.8 * len(facts.planted), "most of the history must be compacted"
    summary_facts = set(FACT.findall(result.summary.summary))
    assert in_head <= summary_facts, f"lost: {sorted(in_head - summary_facts)[:5]}"
    everything = summary_facts | set(FACT.findall(tail))
    assert everything == set(facts.planted)
    assert FACT.findall(compacted_text(result.compacted_messages[:1])), "summary is in the prefix"
    if summarizer_window is None:
        assert len(model.requests) == 1
    else:
        # The history is ~12x the summarizer's window: it must be chunked, and every request
        # (system prompt, running summary, chunk and room for the answer) must fit that window.
        assert len(model.requests) > 1
        for request in model.requests:
            size = c.counter_text(request.system) + c.counter_text(request.messages[-1].text)
            assert size + request.max_tokens <= summarizer_window
        parts = {r.metadata["parts"] for r in model.requests}
        assert parts == {len(model.requests)}


def test_facts_on_one_very_long_line_survive_chunking() -> None:
    """A pasted log line far longer than a chunk is split; no fact may be cut in two."""
    facts = Facts()
    words = []
    for i in range(1_500):
        words.append(facts.new() if i % 10 == 0 else f"token{i}")
    history = [
        Message.user("Here is the log: " + " ".join(words)),
        Message.assistant("I read the log."),
        Message.user("Now fix the parser."),
        Message.assistant("Fixed."),
    ]
    c = compacter(
        model=FunctionModel(echo_facts),
        settings=CompactionSettings(strategy="summarize", summarizer_window=2_000),
    )
    result = compact(c, history, force=True).transition
    assert result is not None
    assert set(FACT.findall(result.summary.summary)) == set(facts.planted)


def test_second_compaction_updates_the_first_summary() -> None:
    facts = Facts()
    model = FunctionModel(echo_facts)
    c = compacter(
        model=model, settings=CompactionSettings(strategy="summarize", summarizer_window=6_000)
    )
    history = fact_history(facts, 20)
    first = c.compact_and_transition("s1", history, force=True)
    assert first is not None
    calls_before = len(model.requests)

    more = fact_history(facts, 20, start=20)
    extended = [*first.compacted_messages, *more]
    validate_messages(extended, allow_pending_tool_use=False)
    second = c.compact_and_transition(first.new_session_id, extended, force=True)

    assert second is not None
    first_prompt = summary_input(model.requests[calls_before])
    assert "<summary-so-far>" in first_prompt
    assert first.summary.summary.strip() in first_prompt
    # Everything from both histories is either in the second summary or kept verbatim.
    tail_text = compacted_text(second.compacted_messages[1:])
    kept = set(FACT.findall(second.summary.summary)) | set(FACT.findall(tail_text))
    assert kept == set(facts.planted)
    # Accounting across compactions: the prefix stands for every original message not kept.
    prefix = second.compacted_messages[0].summary
    assert prefix is not None
    assert prefix.replaced_count + len(second.compacted_messages) - 1 == 160


def test_long_tool_outputs_are_shortened_for_the_summarizer() -> None:
    facts = Facts()
    history = fact_history(facts, 6)
    model = FunctionModel(echo_facts)
    # The rendered transcript: what another model summarizes (it cannot read the cache).
    settings = CompactionSettings(
        strategy="summarize", tool_output_chars=500, summary_model="claude-other"
    )
    c = compacter(model=model, settings=settings)
    assert compact(c, history, force=True).transition is not None
    assert model.requests[0].model == "claude-other"
    prompt = summary_input(model.requests[0])
    assert "characters omitted" in prompt
    assert "line 60:" not in prompt  # the middle of a 6 KB output is not sent
    assert len(prompt) < sum(len(str(b)) for m in history for b in m.content) / 2


# -- instructions and hooks --------------------------------------------------------------------


def small_history(rounds: int = 8) -> list[Message]:
    return fact_history(Facts(), rounds)


def test_compact_and_standing_instructions_reach_every_summarizer_request() -> None:
    model = FunctionModel(echo_facts)
    settings = CompactionSettings(
        strategy="summarize",
        summarizer_window=4_000,
        standing_instructions="Always keep the API design decisions.",
    )
    c = compacter(model=model, settings=settings)
    result = compact(
        c, small_history(), force=True, instructions="Focus on the parser bug."
    ).transition
    assert result is not None
    assert len(model.requests) > 1
    for request in model.requests:
        prompt = summary_input(request)
        assert "Always keep the API design decisions." in prompt
        assert "Focus on the parser bug." in prompt
    assert result.summary.instructions == "Focus on the parser bug."


@pytest.mark.parametrize("strategy", ["summarize", "prune", "sliding_window"])
def test_hook_output_is_injected(strategy: str) -> None:
    hooks = [
        PreservedStateHook("todos", lambda: "## Todos\n- [ ] write the docs"),
        PreservedStateHook("phase", lambda: "Workflow phase: **testing**"),
    ]
    c = compacter(
        model=FunctionModel(echo_facts),
        settings=CompactionSettings(strategy=strategy),  # type: ignore[arg-type]
        hooks=hooks,
    )
    result = compact(c, small_history(), force=True).transition
    assert result is not None
    first = compacted_text(result.compacted_messages[:1])
    assert "<preserved-state>" in first
    assert "- [ ] write the docs" in first and "Workflow phase: **testing**" in first
    assert result.summary.warnings == []


@pytest.fixture
def stuck() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()  # let the abandoned hook thread finish


def test_failing_and_hanging_hooks_leave_a_marker_and_a_warning(stuck: threading.Event) -> None:
    def boom() -> str:
        raise RuntimeError("todo store is locked")

    def hang() -> str:
        stuck.wait(30)
        return "never used"

    hooks = [
        PreservedStateHook("todos", boom),
        PreservedStateHook("phase", hang, timeout=0.1),
        PreservedStateHook("errors", lambda: "error strikes: 2"),
    ]
    c = compacter(model=FunctionModel(echo_facts), hooks=hooks)
    result = c.compact_and_transition("parent", small_history(), force=True)

    assert result is not None, "a broken hook must not stop compaction"
    validate_messages(result.compacted_messages, allow_pending_tool_use=False)
    first = compacted_text(result.compacted_messages[:1])
    assert (
        "preserved state 'todos' unavailable: failed: RuntimeError: todo store is locked" in first
    )
    assert "preserved state 'phase' unavailable: timed out after 0.1s" in first
    assert "error strikes: 2" in first
    warnings = result.summary.warnings
    assert any("'todos'" in w and "todo store is locked" in w for w in warnings)
    assert any("'phase'" in w and "timed out" in w for w in warnings)
    assert all("\n" not in w for w in warnings)


# -- the model failing: deterministic digest ---------------------------------------------------


def digest_history() -> list[Message]:
    read = tool_call("read_file", {"path": "src/db.py"})
    write = tool_call("write_file", {"path": "src/app.py", "content": "print('hi')"})
    run = tool_call("bash", {"command": "pytest -q"})
    return [
        Message.user("Add retries to the HTTP client in src/app.py"),
        Message.assistant([read, write]),
        Message.user(
            [
                {"type": "tool_result", "tool_use_id": read["id"], "content": "x" * 3000},
                {"type": "tool_result", "tool_use_id": write["id"], "content": "written"},
            ]
        ),
        Message.assistant([{"type": "text", "text": "Now running the tests."}, run]),
        Message.user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": run["id"],
                    "content": "ImportError: no module named retrying\nTraceback (...)",
                    "is_error": True,
                }
            ]
        ),
        Message.assistant("The retrying module is missing; I will vendor a small retry loop."),
        Message.user("Also keep the timeout at 30 seconds."),
        # A long final reply: the tail (kept verbatim) is only this message.
        Message.assistant("Understood, the timeout stays at 30 seconds. " + "w " * 4_000),
    ]


def failing(request: ModelRequest) -> str:
    raise ModelError("the API is overloaded (529)", status_code=529)


def test_model_failure_falls_back_to_a_digest() -> None:
    c = compacter(model=FunctionModel(failing), settings=CompactionSettings(strategy="summarize"))
    result = c.compact_and_transition("parent", digest_history(), force=True)

    assert result is not None, "a failing summarizer must not stop the session"
    summary = result.summary
    assert summary.strategy == "digest"
    assert summary.fallback_reason is not None
    assert "ModelError" in summary.fallback_reason and "overloaded" in summary.fallback_reason
    text = summary.summary
    assert "Add retries to the HTTP client in src/app.py" in text  # user request
    assert "modified: src/app.py" in text and "read: src/db.py" in text  # files touched
    assert "bash x1" in text and "read_file x1" in text  # tools used
    assert "ImportError: no module named retrying" in text  # errors
    assert "I will vendor a small retry loop" in text  # the last assistant text
    validate_messages(result.compacted_messages, allow_pending_tool_use=False)
    assert text in compacted_text(result.compacted_messages[:1])


def test_failure_in_a_later_chunk_still_digests_the_whole_head() -> None:
    calls = 0

    def second_call_fails(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise TimeoutError("read timed out")
        return echo_facts(request)

    facts = Facts()
    history = fact_history(facts, 10)
    c = compacter(
        model=FunctionModel(second_call_fails),
        settings=CompactionSettings(strategy="summarize", summarizer_window=4_000),
    )
    result = compact(c, history, force=True).transition
    assert result is not None and result.summary.strategy == "digest"
    assert calls == 2
    # The digest covers the whole head, not just the chunk before the failure.
    assert "Request 0:" in result.summary.summary
    head_len = len(history) - (len(result.compacted_messages) - 1)
    assert f"Request {(head_len - 1) // 4}:" in result.summary.summary


def test_without_a_model_the_digest_is_used() -> None:
    result = compact(
        compacter(settings=CompactionSettings(strategy="summarize")), digest_history(), force=True
    ).transition
    assert result is not None
    assert result.summary.strategy == "digest"
    assert result.summary.fallback_reason == "no summarizer model is configured"


# -- too-small savings: circuit breaker --------------------------------------------------------


def big_tail_history(tail_chars: int) -> list[Message]:
    """A history whose bulk is one reply at the start of the smallest possible tail."""
    call = tool_call("read_file", {"path": "src/app.py"})
    run = tool_call("bash", {"command": "make"})
    return [
        Message.user("Explain src/app.py"),
        Message.assistant([call]),
        Message.user([{"type": "tool_result", "tool_use_id": call["id"], "content": "y" * 6_000}]),
        Message.assistant([{"type": "text", "text": "z" * tail_chars}, run]),
        Message.user([{"type": "tool_result", "tool_use_id": run["id"], "content": "built"}]),
    ]


def short_summary(request: ModelRequest) -> str:
    return "## Progress\nread src/app.py"


def test_a_compaction_left_above_the_trigger_is_not_committed_and_does_not_loop() -> None:
    model = FunctionModel(short_summary)
    c = compacter(window=24_000, model=model, settings=CompactionSettings(strategy="summarize"))
    history = big_tail_history(84_000)  # a 21k-token reply no cut can shorten
    assert c.should_compact(history).compact

    outcome = compact(c, history)
    assert outcome.transition is None
    assert outcome.skipped is not None and "under the trigger" in outcome.skipped
    summarized = len(model.requests)
    assert summarized >= 1  # it tried, tightened, and measured

    decision = c.should_compact(history)
    assert not decision.compact
    assert "circuit breaker" in decision.reason
    assert compact(c, history).transition is None  # no loop: no second summarizer call
    assert len(model.requests) == summarized

    # Once the context has grown well past the breaker, automatic compaction resumes.
    grown = [*history, Message.user("w" * 12_000), Message.assistant("ok")]
    decision = c.should_compact(grown)
    assert decision.compact, decision.reason
    assert "circuit breaker" not in decision.reason


def test_compaction_that_saves_nothing_returns_none_and_opens_the_breaker() -> None:
    c = compacter(window=24_000, settings=CompactionSettings(strategy="summarize"))
    history = [
        Message.user("hi"),
        Message.assistant("a"),
        Message.user("b"),
        Message.assistant("z" * 84_000),
    ]
    assert c.should_compact(history).compact
    outcome = compact(c, history)
    assert outcome.transition is None  # the digest is larger than the two tiny messages
    assert outcome.skipped is not None and "would not reduce" in outcome.skipped
    # The sizes follow the one figure rule (here both estimates): no "(estimated)" inside the
    # parentheses of the reason.
    assert re.search(r"\(~[\d,]+ → ~[\d,]+ tokens\)", outcome.skipped), outcome.skipped
    assert "((" not in outcome.skipped and "))" not in outcome.skipped
    decision = c.should_compact(history)
    assert not decision.compact and "circuit breaker" in decision.reason


def test_prune_with_nothing_to_prune_returns_none() -> None:
    c = compacter(window=24_000, settings=CompactionSettings(strategy="prune"))
    history = [
        Message.user("hi " * 300, pinned=True),
        Message.assistant("a " * 300),
        Message.user("b " * 300),
        Message.assistant("z" * 84_000, usage=Usage(input_tokens=30_000, output_tokens=21_000)),
    ]
    outcome = compact(c, history, force=True)
    assert outcome.transition is None
    assert outcome.skipped is not None and "nothing to prune" in outcome.skipped


# -- thresholds and triggers -------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 1.5, math.nan, math.inf, "abc", None])
def test_invalid_thresholds_are_refused_with_one_line(bad: Any) -> None:
    with pytest.raises(ConfigurationError) as error:
        CompactionSettings(threshold=bad)
    assert "threshold" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ConfigurationError) as error:
        CompactionSettings(thresholds={"claude-test": bad})
    assert "claude-test" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("good", [0.01, 0.5, 1, 1.0, "0.7"])
def test_valid_thresholds_are_accepted(good: Any) -> None:
    assert 0 < CompactionSettings(threshold=good).threshold_for("x") <= 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"strategy": "magic"},
        {"tail_fraction": 0},
        {"target_ratio": 1.2},
        {"min_savings": -0.1},
        {"window_messages": 1},
        {"summary_max_tokens": 10},
        {"summarizer_window": 0},
    ],
)
def test_other_invalid_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as error:
        CompactionSettings(**kwargs)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("window", [0, -5, True, 1.5])
def test_invalid_context_window_is_refused(window: Any) -> None:
    with pytest.raises(ConfigurationError):
        compacter(window=window)


def history_of_tokens(tokens: int) -> list[Message]:
    """A three-message history of about ``tokens`` tokens for the characters/4 counter."""
    return [
        Message.user("start"),
        Message.assistant("x" * (tokens * 4)),
        Message.user("next"),
    ]


def test_per_model_thresholds_move_the_trigger_up_or_down() -> None:
    settings = CompactionSettings(thresholds={"claude-small": 0.5, "claude-late": 0.95})
    history = history_of_tokens(6_000)  # 60 % of a 10k window

    def make(name: str) -> ConversationCompacter:
        return compacter(window=10_000, settings=settings, model_name=name, max_output_tokens=200)

    small, default, late = make("claude-small"), make("claude-other"), make("claude-late")
    assert (small.threshold, default.threshold, late.threshold) == (0.5, 0.85, 0.95)
    assert small.should_compact(history).compact
    assert not default.should_compact(history).compact
    over_default = history_of_tokens(9_000)
    assert default.should_compact(over_default).compact
    assert not late.should_compact(over_default).compact
    assert late.trigger_tokens == 9_500


def test_trigger_moves_earlier_when_the_reply_would_not_fit() -> None:
    # The reply reserve is the reply's limit, at most 15 % of the window: it moves
    # a raised threshold, never the default one, and a large limit does not eat a small window.
    late = CompactionSettings(threshold=0.95)
    c = compacter(window=10_000, max_output_tokens=1_000, settings=late)
    decision = c.should_compact(history_of_tokens(9_200))
    assert decision.compact
    assert decision.trigger_tokens == 9_000
    assert "instead of 9,500" in decision.reason and "1,000" in decision.reason
    large = compacter(window=10_000, max_output_tokens=4_000, settings=late)
    assert large.trigger_tokens == 8_500  # 1,500 reserved, not 4,000
    roomy = compacter(window=10_000, max_output_tokens=4_000)
    decision = roomy.should_compact(history_of_tokens(7_000))
    assert not decision.compact and decision.trigger_tokens == 8_500


# -- when compaction is not possible -----------------------------------------------------------


def test_pending_tool_use_is_not_a_safe_boundary() -> None:
    c = compacter(window=10_000)
    call = tool_call("bash", {"command": "ls"})
    history = [*history_of_tokens(9_500), Message.assistant([call])]
    decision = c.should_compact(history, force=True)
    assert not decision.compact and "safe boundary" in decision.reason
    assert c.compact_and_transition("p", history, force=True) is None
    # Once the tool_result is in, the same point between tool rounds is a safe boundary.
    answered = [
        *history,
        Message.user([{"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}]),
    ]
    result = c.compact_and_transition("p", answered)
    assert result is not None
    assert result.compacted_messages[-1] == answered[-1]


def test_fewer_than_three_messages_are_never_compacted() -> None:
    c = compacter(window=1_000)
    history = [Message.user("x" * 8_000), Message.assistant("y" * 8_000)]
    assert c.compact_and_transition("p", history, force=True) is None
    assert "only 2 messages" in c.should_compact(history, force=True).reason


def test_strategy_none_never_compacts() -> None:
    c = compacter(window=1_000, settings=CompactionSettings(strategy="none"))
    history = history_of_tokens(5_000)
    assert c.compact_and_transition("p", history) is None
    assert c.compact_and_transition("p", history, force=True) is None
    assert "'none'" in c.should_compact(history, force=True).reason


def test_disabled_compaction_only_runs_on_request() -> None:
    history = small_history()
    window = int(sum(COUNTER.count_message(m) for m in history) / 0.9)
    c = compacter(window=window, settings=CompactionSettings(enabled=False))
    assert compacter(window=window).should_compact(history).compact  # above the trigger
    decision = c.should_compact(history)
    assert not decision.compact and "disabled" in decision.reason
    assert c.compact_and_transition("p", history) is None
    assert c.compact_and_transition("p", history, force=True) is not None  # /compact


# -- inputs, transition, async ------------------------------------------------------------------


def hand_written_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Fix the flaky test in tests/test_api.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "read_file",
                    "input": {"path": "tests/test_api.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "z" * 9_000}],
        },
        {"role": "assistant", "content": "The test sleeps; I will use a fake clock."},
        {"role": "user", "content": "Go ahead."},
        {"role": "assistant", "content": "Done: " + "w" * 2_000},
    ]


def test_plain_dict_messages_work() -> None:
    params = hand_written_history()
    c = compacter(window=3_200, model=FunctionModel(short_summary))
    decision = c.should_compact(params)
    assert decision.compact and decision.usage.source == "estimate"
    result = c.compact_and_transition("parent", params)
    assert result is not None
    out = result.compacted_params
    assert all(set(p) == {"role", "content"} for p in out)
    validate_messages(as_messages(out), allow_pending_tool_use=False)
    assert out[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Done: " + "w" * 2_000}],
    }
    # The same history as Message values compacts to the same conversation.
    same = compacter(window=3_200, model=FunctionModel(short_summary)).compact_and_transition(
        "parent", as_messages(params)
    )
    assert same is not None and to_params(same.compacted_messages) == out


def test_transition_fields() -> None:
    c = compacter(
        window=3_200,
        model=FunctionModel(short_summary),
        settings=CompactionSettings(strategy="summarize"),
    )
    history = as_messages(hand_written_history())
    result = c.compact_and_transition("parent-1", history)
    assert result is not None
    assert (result.original_session_id, result.new_session_id) == ("parent-1", "child-session")
    summary = result.summary
    assert summary.original_message_count == 6
    assert summary.compacted_message_count == len(result.compacted_messages)
    assert summary.created_at == NOW and summary.model == "claude-test"
    assert summary.strategy == "summarize" and summary.summary == short_summary(
        ModelRequest("m", ())
    )
    assert summary.tokens_after < summary.tokens_before
    assert "reached the trigger" in summary.reason


def test_async_path_matches_sync() -> None:
    facts = Facts()
    history = fact_history(facts, 12)
    settings = CompactionSettings(strategy="summarize", summarizer_window=5_000)
    sync_model, async_model = FunctionModel(echo_facts), FunctionModel(echo_facts)
    sync = compacter(model=sync_model, settings=settings).compact_and_transition(
        "p", history, force=True, instructions="keep facts"
    )
    asynchronous = asyncio.run(
        compacter(model=async_model, settings=settings).acompact_and_transition(
            "p", history, force=True, instructions="keep facts"
        )
    )
    assert sync is not None and asynchronous is not None
    assert to_params(sync.compacted_messages) == to_params(asynchronous.compacted_messages)
    assert sync.summary == asynchronous.summary
    assert [summary_input(r) for r in sync_model.requests] == [
        summary_input(r) for r in async_model.requests
    ]
    assert len(sync_model.requests) > 1


def test_async_path_falls_back_to_the_digest_too() -> None:
    c = compacter(model=FunctionModel(failing), settings=CompactionSettings(strategy="summarize"))
    result = asyncio.run(c.acompact_and_transition("p", digest_history(), force=True))
    assert result is not None and result.summary.strategy == "digest"


# -- measuring ---------------------------------------------------------------------------------


def test_usage_source_is_estimate_without_reported_usage() -> None:
    history = as_messages(hand_written_history())
    c = compacter()
    usage = c.measure(history)
    expected = sum(COUNTER.count_message(m) for m in history)
    assert usage.source == "estimate" and usage.tokens == expected
    with_system = c.measure(history, system="s" * 400, tools=[{"name": "t", "input_schema": {}}])
    assert with_system.tokens > expected + 100  # system prompt and tool definitions count


def test_usage_source_is_api_then_api_plus_estimate() -> None:
    reported = Usage(
        input_tokens=1_000,
        output_tokens=200,
        cache_creation_input_tokens=300,
        cache_read_input_tokens=4_000,
    )
    call = tool_call("bash", {"command": "make"})
    history = [
        Message.user("build it"),
        Message("assistant", ({"type": "text", "text": "building"}, call), usage=reported),
    ]
    c = compacter()
    usage = c.measure(history, system="a long system prompt " * 50)
    assert usage.source == "api" and usage.tokens == 5_500  # input + caches + output
    result = Message.user(
        [{"type": "tool_result", "tool_use_id": call["id"], "content": "e" * 4_000}]
    )
    usage = c.measure([*history, result], system="a long system prompt " * 50)
    assert usage.source == "api+estimate"
    assert usage.reported_tokens == 5_500
    assert usage.estimated_tokens == COUNTER.count_message(result)
    assert usage.tokens == 5_500 + COUNTER.count_message(result)
    assert usage.fraction == usage.tokens / 100_000


def test_calibration_scales_the_local_estimate() -> None:
    history = as_messages(hand_written_history())
    local = sum(COUNTER.count_message(m) for m in history)
    plain = compacter().measure(history)
    scaled = compacter(calibration=Calibration(ratio=1.5, samples=4)).measure(history)
    assert plain.tokens == local
    assert scaled.tokens == math.ceil(local * 1.5)

    reported = [*history[:-1], Message.assistant("done", usage=Usage(input_tokens=2_000))]
    tail = Message.user("x" * 400)
    api_est = compacter(calibration=Calibration(ratio=2.0, samples=1)).measure([*reported, tail])
    assert api_est.tokens == 2_000 + 2 * COUNTER.count_message(tail)  # only the estimate scales


def test_record_usage_teaches_the_calibration() -> None:
    c = compacter(calibration=Calibration())
    c.record_usage(api_tokens=13_000, local_tokens=10_000)
    assert isinstance(c.calibration, Calibration)
    assert c.calibration.ratio == pytest.approx(1.3, rel=1e-3)
    history = as_messages(hand_written_history())
    local = sum(COUNTER.count_message(m) for m in history)
    assert c.measure(history).tokens == c.calibration.apply(local, len(history))
    assert c.measure(history).tokens == pytest.approx(local * 1.3, rel=2e-3)


def test_cached_estimates_are_used_and_missing_ones_computed_once() -> None:
    class Counting(CharCounter):
        calls = 0

        def count_message(self, message: Message) -> int:
            Counting.calls += 1
            return super().count_message(message)

    counter = Counting()
    history = [m.with_tokens(1_000) for m in as_messages(hand_written_history())]
    c = compacter(counter=counter)
    assert c.measure(history).tokens == 6_000 and Counting.calls == 0
    new = Message.user("fresh")
    for _ in range(3):
        c.measure([*history, new])
    assert Counting.calls == 1


def test_default_tiktoken_counter_works_offline() -> None:
    c = ConversationCompacter(model_name="claude-test", context_window=10_000)
    usage = c.should_compact(as_messages(hand_written_history())).usage
    assert usage.source == "estimate" and 500 < usage.tokens < 10_000


def test_summarizer_requests_are_marked_and_use_the_model_name() -> None:
    model = FunctionModel(short_summary)
    c = compacter(model=model, settings=CompactionSettings(strategy="summarize"))
    assert compact(c, small_history(), force=True).transition is not None
    request = model.requests[0]
    assert request.metadata["purpose"] == "summary"
    assert request.model == "claude-test"
    assert "'## Goal'" in summary_input(request)


def test_scripted_error_reply_also_falls_back() -> None:
    model = FunctionModel(lambda r: Reply(error=ModelError("boom")))
    c = compacter(model=model, settings=CompactionSettings(strategy="summarize"))
    result = compact(c, small_history(), force=True).transition
    assert result is not None and result.summary.strategy == "digest"


# -- the library path: dicts in, dicts out -------------------------------------------------------


def _dict_turns(start: int, count: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for n in range(start, start + count):
        turns.append({"role": "user", "content": f"Request {n}: handle FACT-{n:04d} " * 30})
        turns.append({"role": "assistant", "content": f"Done with FACT-{n:04d}. " * 30})
    return turns


def test_three_compactions_through_dicts_keep_one_summary_prefix() -> None:
    c = compacter(window=6_000, model=FunctionModel(echo_facts))
    params: list[dict[str, Any]] = _dict_turns(0, 10)
    session = "s0"
    for round_ in range(3):
        transition = c.compact_and_transition(session, params, force=True)
        assert transition is not None, round_
        params = [dict(p) for p in transition.compacted_params]
        session = transition.new_session_id
        first = params[0]["content"]
        texts = [b["text"] for b in first if b.get("type") == "text"]
        joined = "\n".join(texts)
        assert joined.count("<summary>") == 1, "one summary prefix, never nested"
        assert joined.count("This conversation was compacted") == 1
        params = params + _dict_turns(100 * (round_ + 1), 8)
    # The facts of the first round survived three summaries (each updated the previous one).
    assert "FACT-0000" in joined


def test_usage_can_be_passed_in_plain_dicts() -> None:
    c = compacter(window=100_000)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": "hi",
            "usage": {"input_tokens": 40_000, "output_tokens": 10, "cache_read_input_tokens": 5},
        },
    ]
    usage = c.measure(history)
    assert usage.source == "api"
    assert usage.tokens == 40_015


def test_an_invalid_history_is_refused_before_any_model_call() -> None:
    model = FunctionModel(echo_facts)
    c = compacter(model=model)
    history = fact_history(Facts(), 6)
    duplicate = next(i for i, m in enumerate(history) if m.role == "assistant" and m.tool_use_ids)
    blocks = [dict(b) for b in history[duplicate].content]
    later = next(
        i
        for i, m in enumerate(history)
        if i > duplicate + 1 and m.role == "assistant" and m.tool_use_ids
    )
    reused = history[duplicate].tool_use_ids[0]
    bad_blocks = [
        {**b, "id": reused} if b.get("type") == "tool_use" else b for b in history[later].content
    ]
    answers = [
        {**b, "tool_use_id": reused} if b.get("type") == "tool_result" else b
        for b in history[later + 1].content
    ]
    bad = list(history)
    bad[later] = Message("assistant", tuple(bad_blocks))
    bad[later + 1] = Message("user", tuple(answers))
    assert blocks  # the first use stays as it was

    with pytest.raises(MessageValidationError) as caught:
        c.compact_and_transition("s", bad, force=True)
    assert f"message {later} (assistant): duplicate tool_use id {reused}" in str(caught.value)
    assert model.requests == []


def test_a_compacter_without_a_model_warns_that_it_writes_digests() -> None:
    with pytest.warns(UserWarning, match="deterministic digests"):
        ConversationCompacter(model_name="m", context_window=10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ConversationCompacter(
            model_name="m", context_window=10_000, model=FunctionModel(echo_facts)
        )


# -- the preview ----------------------------------------------------------------------------


def test_plan_previews_without_a_model_call_or_a_write() -> None:
    model = FunctionModel(echo_facts)
    state_reads: list[int] = []

    def state() -> str:
        state_reads.append(1)
        return "## Phase\nfixing the parser"

    c = compacter(
        window=6_000,
        model=model,
        settings=CompactionSettings(strategy="summarize"),
        hooks=[PreservedStateHook("phase", state)],
    )
    history = small_history(10)
    plan = c.plan(history)

    assert model.requests == []  # no model call
    assert plan.decision.compact
    assert plan.strategy == "summarize"
    assert plan.summarized_messages + plan.verbatim_messages == len(history)
    assert plan.summarized_messages > 0 and plan.verbatim_messages > 0
    assert plan.summarized_tokens > plan.verbatim_tokens > 0
    # The ledger first, then what the hooks rendered.
    assert plan.preserved_state.startswith("<ledger>\n")
    assert plan.preserved_state.endswith("</ledger>\n\n## Phase\nfixing the parser")
    assert 0 < plan.expected_tokens_after < plan.decision.usage.tokens

    # The real compaction then does what the plan said, and lands within its estimate.
    transition = c.compact_and_transition("s", history, force=True)
    assert transition is not None
    assert len(transition.compacted_messages) - 1 == plan.verbatim_messages
    assert transition.summary.tokens_after <= plan.expected_tokens_after


def test_plan_says_why_nothing_would_be_compacted() -> None:
    plan = compacter(model=FunctionModel(echo_facts)).plan([Message.user("hi")])
    assert plan.strategy == "none"
    assert "nothing worth compacting" in plan.note


# -- the circuit breaker: what arms it, where a pause fits ---------------------------------------


def _saves_nothing(max_output_tokens: int, threshold: float = 0.85) -> ConversationCompacter:
    return ConversationCompacter(
        model_name="claude-test",
        context_window=24_000,
        max_output_tokens=max_output_tokens,
        settings=CompactionSettings(strategy="summarize", threshold=threshold),
        counter=CharCounter(),
        new_session_id=lambda: "child",
    )


def _nothing_to_save(chars: int = 84_000) -> list[Message]:
    """The digest of a summary is larger than the three small messages it would replace."""
    return [
        Message.user("hi"),
        Message.assistant("a"),
        Message.user("b"),
        Message.assistant("z" * chars),
    ]


NOTHING_TO_SAVE = _nothing_to_save()


def _attempt(
    compacter: ConversationCompacter,
    *,
    force: bool = False,
    history: list[Message] = NOTHING_TO_SAVE,
) -> CompactionOutcome:
    steps = compacter.steps("session", history, force=force)
    return drive(steps, compacter.runtime.perform)


def test_a_compaction_asked_for_that_saves_nothing_arms_no_breaker() -> None:
    automatic, asked = _saves_nothing(1_000), _saves_nothing(1_000)
    assert _attempt(automatic).transition is None
    assert _attempt(asked, force=True).transition is None

    assert automatic.should_compact(NOTHING_TO_SAVE).held_until is not None  # as before
    decision = asked.should_compact(NOTHING_TO_SAVE)
    assert decision.compact and decision.held_until is None, decision.reason


def test_no_pause_where_the_trigger_is_already_the_reply_reserve() -> None:
    # Replies of up to 8,192 tokens: the reserve is 15 % of 24,000, where the trigger is.
    compacter = _saves_nothing(8_192)
    assert compacter.trigger_tokens == 24_000 - reply_reserve(24_000, 8_192)
    assert _attempt(compacter).transition is None
    decision = compacter.should_compact(NOTHING_TO_SAVE)
    assert decision.compact and decision.held_until is None  # tried again, not at 95 %
    # With a lower threshold the pause fits, and stops where the reserve begins.
    lower, history = _saves_nothing(8_192, threshold=0.6), _nothing_to_save(64_000)
    assert _attempt(lower, history=history).transition is None
    decision = lower.should_compact(history)
    assert not decision.compact and decision.held_until is not None
    assert decision.held_until == min(
        decision.usage.tokens + 2_400, 24_000 - reply_reserve(24_000, 8_192)
    )
    grown = [*history, Message.user("w" * 20_000), Message.assistant("ok")]
    assert lower.should_compact(grown).compact  # at the reserve's edge it compacts again
