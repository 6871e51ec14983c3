"""The terminal face of a running agent (``_cli/ui``): the start line names the model and the
window, plurals are right for one, and the status line says the threshold in force, raised and
why, while automatic compaction is paused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fake_api import text_reply
from support.cli import CLI, WINDOW

from agentloop._cli.ui import indicator, notice, start_line
from agentloop._core.measuring.context import BREAKER_WHY, ContextUsage, breaker_hold, decide
from agentloop._core.measuring.context import ContextUsage as Usage
from agentloop._core.values.validation import DEFAULT_THRESHOLD

# -- the start line ----------------------------------------------------------------------------


def test_the_start_line_names_the_model_and_the_window() -> None:
    line = start_line("claude-haiku-4-5", 200_000, "builtin", "/work/app")
    assert line == (
        "agentloop · claude-haiku-4-5 · 200,000-token window · /work/app · "
        "/help for commands and keys"
    )
    assert "12,000-token window (--context-window)" in start_line("m", 12_000, "override", "/w")


# -- plurals -----------------------------------------------------------------------------------


def test_plurals_are_right_for_one() -> None:
    summary = SimpleNamespace(
        tokens_before=1000,
        tokens_before_source="api",
        tokens_after=200,
        tokens_after_source="api",
        original_message_count=1,
    )
    transition: Any = SimpleNamespace(summary=summary, new_session_id="abcdefghij")
    assert "compacted: 1 message → new session abcdefgh" in notice(transition)


def test_one_calibration_sample_is_one_sample(cli: CLI) -> None:
    cli.script.add(text_reply("hello back"))
    result = cli.run("--context-window", WINDOW, stdin="hello\n/context\n")
    assert result.code == 0, result.err
    assert "(1 sample)" in result.err and "1 samples" not in result.err


# -- the status line ---------------------------------------------------------------------------


def test_the_status_line_says_why_it_does_not_compact_past_the_trigger() -> None:
    from agentloop._cli.ui import indicator

    usage = Usage(tokens=8_000, window=9_000, source="api", reported_tokens=8_000)
    decision = decide(
        usage,
        threshold=DEFAULT_THRESHOLD,
        max_output_tokens=8_192,
        message_count=10,
        safe_boundary=True,
        breaker_until=8_900,
    )
    assert not decision.compact and decision.held_until == 8_900
    line = indicator(decision, enabled=True)
    assert line == (
        "context 89% · compacts at 99% (raised from 85%: the last compaction saved too little)"
    )


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
