"""Issue 30, the terminal's third round, through the real CLI against the fake Messages API (a
16k window, as a new user tried it): a compaction the user asked for never arms the circuit
breaker and no pause lets a request pass the window (1), the status line shows the threshold
in force while paused (2), and the figures agree with each other (9)."""

from __future__ import annotations

import re
from typing import Any

from fake_api import ReplySpec, text_reply
from hypothesis import given
from hypothesis import strategies as st
from support.cli import CLI, conversation_lines
from support.histories import CharCounter
from support.loop_scripts import SUMMARY, filler

from agentloop._cli.ui import indicator
from agentloop._core.compaction.results import CompactionOutcome
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.measuring.context import (
    BREAKER_WHY,
    MIN_REPLY_TOKENS,
    ContextUsage,
    breaker_hold,
    decide,
    reply_reserve,
    trigger_tokens,
)
from agentloop._core.values.messages import Message
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.drive import drive

WINDOW = 16_000
OLDER = ("-m", "claude-haiku-4-5")
"""A model the test server does not compact on demand, so the scripted summaries are the ones
written (the breaker is about what our own compaction saves)."""


def _decision_line(err: str) -> str:
    return [line for line in err.splitlines() if line.startswith("Decision: ")][-1]


# -- 1. the breaker ----------------------------------------------------------------------------


def test_a_manual_compact_that_saves_little_never_pauses_automatic_compaction(cli: CLI) -> None:
    script = cli.script
    script.summary = filler("summary", 1_400)  # the summary is nearly what it replaces

    def summaries_then_short(body: dict[str, Any]) -> ReplySpec:
        if len(script.conversation) > 4:  # after /compact's: summaries that help
            script.summary = SUMMARY
        return script(body)

    cli.fake_api.handler = summaries_then_short
    first, more = conversation_lines(4, 250), conversation_lines(26, 250)
    for n in range(len(first) + len(more)):
        script.add(text_reply(filler(f"answer {n}", 250)))

    stdin = "\n".join([*first, "/compact", *more, "/context"])
    run = cli.run(*OLDER, "--context-window", str(WINDOW), stdin=stdin)

    assert run.code == 0, run.err
    # /compact ran at 27 % and kept (or saved next to) nothing: no pause, no warning of one.
    first_line = re.search(r"(?:skipped: .*?\(|compacted: .*?\()~?([\d,]+) → ~?([\d,]+)", run.err)
    assert first_line is not None
    before, after = (int(first_line[n].replace(",", "")) for n in (1, 2))
    assert before < 0.3 * WINDOW and after > 0.8 * before, run.err
    assert "pauses" not in run.err and "circuit breaker" not in run.err
    # The next automatic compaction came at the trigger (85 %), not at 95 % as a pause would
    # have it: one exchange past 13,600 at most, while a reply may still take 2,400.
    automatic = [int(n["before"].strip("~").replace(",", "")) for n in run.notices]
    trigger = trigger_tokens(WINDOW, 0.85, 8_192)[0]
    assert trigger == WINDOW - reply_reserve(WINDOW, 8_192)
    assert next(before for before in automatic if before > 0.5 * WINDOW) < trigger + 1_000


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


@given(
    window=st.integers(4_000, 2_000_000),
    threshold=st.floats(0.3, 1.0),
    reply=st.integers(MIN_REPLY_TOKENS, 64_000),
    share=st.floats(0.0, 1.2),
)
def test_no_pause_reaches_into_the_reply_reserve(
    window: int, threshold: float, reply: int, share: float
) -> None:
    trigger = trigger_tokens(window, threshold, reply)[0]
    held = breaker_hold(window, reply, trigger, int(window * share))
    if held is not None:
        assert trigger < held <= window - reply_reserve(window, reply)


# -- 2. the status line while paused -----------------------------------------------------------


def test_while_paused_the_status_line_shows_the_threshold_in_force_and_why() -> None:
    window = 16_000
    trigger = int(window * 0.6)
    held = breaker_hold(window, 8_192, trigger, trigger)
    assert held == trigger + window // 10

    def line(tokens: int) -> str:
        usage = ContextUsage(tokens=tokens, window=window, source="api", reported_tokens=tokens)
        decision = decide(
            usage,
            threshold=0.6,
            max_output_tokens=8_192,
            message_count=10,
            safe_boundary=True,
            breaker_until=held,
        )
        return indicator(decision, enabled=True)

    # From the moment the pause begins (the compaction left the context below the trigger)...
    assert line(8_000) == f"context 50% · compacts at 70% (raised from 60%: {BREAKER_WHY})"
    # ...and past the trigger: one threshold, never "compacts at 60%" beside "paused until 70%".
    assert line(10_400) == f"context 65% · compacts at 70% (raised from 60%: {BREAKER_WHY})"
    assert line(11_300) == "context 71% · compacts at 60%"  # past the pause: it compacts


# -- 9. figures --------------------------------------------------------------------------------


def _usage(tokens: int, window: int = 9_000) -> ContextUsage:
    return ContextUsage(tokens=tokens, window=window, source="api", reported_tokens=tokens)


def test_too_few_messages_are_counted_in_words_and_reasons_nest_no_parentheses() -> None:
    reasons = [
        decide(
            _usage(100),
            threshold=0.85,
            max_output_tokens=8_192,
            message_count=count,
            safe_boundary=True,
            force=True,
        ).reason
        for count in (0, 1, 2)
    ]
    assert reasons == [
        "no messages yet: nothing to compact",
        "only 1 message: nothing worth compacting",
        "only 2 messages: nothing worth compacting",
    ]
    # A trigger moved below the threshold for the reply: one parenthesis, not two nested.
    early = decide(
        _usage(8_000, window=4_000),
        threshold=0.95,
        max_output_tokens=8_192,
        message_count=10,
        safe_boundary=True,
    ).reason
    assert "instead of 3,800" in early and early.count("(") == early.count(")") == 1, early


def test_the_cost_report_puts_one_parenthesis_after_the_conversation(cli: CLI) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact", "one more", "/cost"])

    run = cli.run("--context-window", "6000", stdin=stdin)

    assert run.code == 0, run.err
    whole = next(line for line in run.err.splitlines() if line.startswith("The whole"))
    assert re.fullmatch(
        r"The whole conversation \(2 sessions across compactions; \d+ requests, "
        r"1 summary request\):",
        whole,
    ), whole


def test_one_more_exchange_never_shows_fewer_tokens_than_the_notice(cli: CLI) -> None:
    for n in range(8):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    stdin = [*conversation_lines(6, 250), "/compact", "one more question", "/context"]

    run = cli.run("--context-window", str(WINDOW), stdin="\n".join(stdin))

    assert run.code == 0, run.err
    (notice,) = run.notices
    after = int(notice["after"].strip("~").replace(",", ""))
    shown = re.search(r"^Context: ~?([\d,]+) / ", run.err, re.MULTILINE)
    assert shown is not None
    assert int(shown[1].replace(",", "")) > after
