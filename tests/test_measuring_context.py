"""How full the context is and whether to compact (``_core/measuring/context``): the reply
reserve scales with the window and still moves a raised threshold, no pause of the circuit
breaker reaches into the reply reserve, and a decision's reasons count in words and nest no
parentheses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop._core.measuring.context import (
    MIN_REPLY_TOKENS,
    ContextUsage,
    breaker_hold,
    decide,
    reply_reserve,
    trigger_tokens,
)
from agentloop._core.values.validation import DEFAULT_THRESHOLD


@pytest.mark.parametrize(
    ("window", "reserve", "trigger"),
    [
        (200_000, 8_192, 170_000),  # a real window: the reply's own limit, under its share
        (12_000, 1_800, 10_200),  # was 8,192 reserved and the trigger at 32 %
        (9_000, 1_350, 7_650),  # was a trigger of 808 tokens
        (5_000, 750, 4_250),  # was no reserve at all
    ],
)
def test_the_reply_reserve_scales_with_the_window(window: int, reserve: int, trigger: int) -> None:
    assert reply_reserve(window, 8_192) == reserve
    assert trigger_tokens(window, DEFAULT_THRESHOLD, 8_192)[0] == trigger


def test_the_reserve_still_moves_a_raised_threshold() -> None:
    trigger, why = trigger_tokens(10_000, 0.95, 4_000)
    assert trigger == 8_500  # 15 % of the window reserved, not 40 %
    assert "so a reply of up to 1,500 tokens still fits" in why


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
