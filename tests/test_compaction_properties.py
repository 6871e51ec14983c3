"""Property tests: every strategy, on generated valid histories, yields a valid conversation
that keeps pinned messages and the latest request and accounts for every original message.

The example count comes from the hypothesis profile in conftest.py (2,000 with ``CI`` set).
Each example is kept cheap: a characters/4 token counter instead of tiktoken, a zero-latency
summarizer stub, and a small context window so that compaction has something to do.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from support.histories import (
    FIXED_CLOCK,
    CharCounter,
    StubSummarizer,
    compact,
    histories,
    original_count,
)

from agentloop._core.compaction.round_fit import result_text, shortened_result
from agentloop._core.compaction_core import STRATEGIES, CompactionSettings
from agentloop._core.cutting.cut_and_prune import (
    PRUNED_MARKER,
    PRUNED_VALUE,
    assemble,
    choose_tail_start,
    prune_tool_outputs,
    window_note,
)
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.measuring.context import breaker_hold
from agentloop._core.values.blocks import tool_result_text
from agentloop._core.values.messages import (
    ContentBlock,
    Message,
    latest_request_index,
    latest_user_request,
    validate_messages,
)
from agentloop._loop.conversation_compacter import ConversationCompacter

WINDOW = 3_000
COUNTER = CharCounter()
STATE_TAG = "<preserved-state>"


def compacter_for(
    strategy: str,
    *,
    summarizer: bool,
    window_messages: int | None,
    with_hook: bool,
    target_ratio: float,
) -> ConversationCompacter:
    hooks = [PreservedStateHook("todos", lambda: "- [ ] finish the parser")] if with_hook else []
    return ConversationCompacter(
        model_name="test-model",
        context_window=WINDOW,
        model=StubSummarizer() if summarizer else None,
        max_output_tokens=256,
        settings=CompactionSettings(
            strategy=strategy,  # type: ignore[arg-type]
            window_messages=window_messages if strategy == "sliding_window" else None,
            target_ratio=target_ratio,
        ),
        counter=COUNTER,
        hooks=hooks,
        clock=lambda: FIXED_CLOCK,
        new_session_id=lambda: "child",
    )


# -- helpers that state what "kept" means ------------------------------------------------------


def pinned_of(messages: Sequence[Message]) -> list[Message]:
    """Every pinned message a history stands for, including those a previous prefix carries."""
    pinned: list[Message] = []
    if messages and messages[0].summary is not None:
        pinned.extend(messages[0].summary.pinned)
    pinned.extend(m for m in messages if m.pinned and m.summary is None)
    return pinned


def without_state(blocks: Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    return tuple(b for b in blocks if not str(b.get("text", "")).startswith(STATE_TAG))


def same(a: Message, b: Message) -> bool:
    return a.role == b.role and a.content == b.content


def _pruned_value(value: object, min_chars: int) -> object:
    if isinstance(value, str):
        marker = PRUNED_VALUE.format(chars=len(value))
        return marker if len(value) >= min_chars and len(value) > len(marker) else value
    if isinstance(value, dict):
        return {k: _pruned_value(v, min_chars) for k, v in value.items()}
    if isinstance(value, list):
        return [_pruned_value(v, min_chars) for v in value]
    return value


def check_block_pruned(old: ContentBlock, new: ContentBlock, min_chars: int) -> None:
    """``new`` is ``old`` as pruning leaves it: bulk replaced by a marker, pairs kept."""
    kind = old.get("type")
    if kind == "tool_use":
        assert (new["id"], new["name"]) == (old["id"], old["name"])
        assert new["input"] == _pruned_value(old["input"], min_chars)
    elif kind == "tool_result":
        assert new["tool_use_id"] == old["tool_use_id"]
        assert new.get("is_error") == old.get("is_error")
        text = tool_result_text(old)
        items = old.get("content")
        media = isinstance(items, list) and any(
            i.get("type") in ("image", "document") for i in items
        )
        if media:
            assert str(new["content"]).startswith("[tool output pruned during compaction")
        elif len(text) >= min_chars and len(text) > len(PRUNED_MARKER.format(chars=len(text))):
            assert new["content"] == PRUNED_MARKER.format(chars=len(text))
        else:
            assert new == old
    elif kind in ("image", "document"):
        assert new["type"] == "text" and new["text"].startswith(f"[{kind} pruned")
    else:
        assert new == old


def same_or_pruned(before: Message, after: Message, min_chars: int = 200) -> bool:
    if same(before, after):
        return True
    assert after.role == before.role and len(after.content) == len(before.content)
    for old, new in zip(before.content, after.content, strict=True):
        check_block_pruned(old, new, min_chars)
    return True


def check_round_fitted(old: Message, new: Message, notes: Sequence[str]) -> None:
    """``new`` is the newest tool round ``old`` with its largest results shortened to fit
    (round fit): each says how much it left out, keeps head and tail, and a note says so."""
    assert new.role == old.role == "user" and len(new.content) == len(old.content)
    shortened = 0
    for before, after in zip(old.content, new.content, strict=True):
        if after == before:
            continue
        assert before.get("type") == after.get("type") == "tool_result"
        assert after["tool_use_id"] == before["tool_use_id"]
        assert after.get("is_error") == before.get("is_error")
        whole, sent = result_text(before), str(after["content"])
        assert whole is not None and len(sent) < len(whole)
        short = sent.split("]\n", 1)[1]
        assert sent == shortened_result(whole, short)
        assert short.startswith(whole[:100]) and short.endswith(whole[-100:])
        assert any(
            note.startswith(
                f"a tool result of {len(whole):,} characters in the newest tool round "
                f"was shortened to {len(sent):,} "
            )
            for note in notes
        ), notes
        shortened += 1
    assert shortened, "a fitted round shortens at least one result"


def visible_in_prefix(message: Message, prefix: Message) -> bool:
    """The model can read ``message`` in the prefix: each of its blocks appears as text."""
    texts = [str(b.get("text", "")) for b in prefix.content if b.get("type") == "text"]
    for block in message.content:
        kind = block.get("type")
        if kind == "text":
            wanted = str(block["text"])
        elif kind == "tool_result":
            wanted = f"[tool result: {tool_result_text(block)}]"
        elif kind == "tool_use":
            wanted = f"[tool call {block['name']}:"
        else:
            continue
        if not any(wanted in text for text in texts):
            return False
    return True


def tool_ids(messages: Sequence[Message]) -> tuple[list[str], list[str]]:
    uses = [i for m in messages for i in m.tool_use_ids]
    results = [i for m in messages for i in m.tool_result_ids]
    return uses, results


def check_assembled(history: list[Message], out: list[Message], notes: Sequence[str] = ()) -> None:
    """Prefix + verbatim tail: accounting, pins and the latest request."""
    prefix, tail = out[0], out[1:]
    assert prefix.summary is not None
    assert prefix.role == "user"
    assert tail, "the tail is never empty"
    assert tail[0].role == "assistant", "the tail starts at a safe cut (an assistant message)"
    # Accounting: the prefix stands for exactly the originals that are not in the tail.
    assert prefix.summary.replaced_count + len(tail) == original_count(history)
    kept = history[len(history) - len(tail) :]
    # The tail is verbatim, or (tightened) pruned but for its newest exchange.
    assert all(a.pinned == b.pinned for a, b in zip(kept, tail, strict=True))
    assert all(same_or_pruned(a, b) for a, b in zip(kept[:-1], tail[:-1], strict=True))
    # ... but for its newest exchange, which is verbatim unless the summary and it were still
    # above the target: then the newest tool round's largest results are shortened (round fit).
    newest = max(i for i, m in enumerate(tail) if m.role == "assistant")
    assert all(same(a, b) for a, b in zip(kept[newest:-1], tail[newest:-1], strict=True))
    if not same(kept[-1], tail[-1]):
        check_round_fitted(kept[-1], tail[-1], notes)
    assert len(history) - len(tail) >= 1

    for pin in pinned_of(history):
        in_tail = any(same(pin, m) and m.pinned for m in tail)
        in_prefix = any(same(pin, m) for m in prefix.summary.pinned)
        assert in_tail or in_prefix, f"pinned message lost: {pin.content!r}"
        if not in_tail:
            assert visible_in_prefix(pin, prefix), "a carried pinned message must be readable"

    index = latest_request_index(history)
    request = latest_user_request(history)
    if request is not None:
        carried = prefix.summary.request
        tail_start = len(history) - len(tail)
        in_tail = index is not None and index >= tail_start
        as_request = carried is not None and same(request, carried)
        as_pin = any(same(request, m) for m in prefix.summary.pinned) or (
            index is not None and history[index].pinned
        )
        assert in_tail or as_request or as_pin, "the latest user request was lost"
        if as_request:
            assert visible_in_prefix(request, prefix)
        found = latest_user_request(out)
        assert as_pin or (found is not None and same(found, request))


def check_pruned(
    history: list[Message], out: list[Message], *, with_hook: bool, notes: Sequence[str] = ()
) -> None:
    """Same shape; only old tool_result contents change; pins and requests are untouched."""
    assert len(out) == len(history)
    replaced_any = False
    for index, (before, after) in enumerate(zip(history, out, strict=True)):
        assert before.role == after.role
        after_blocks = after.content
        if index == 0 and with_hook:
            if before.summary is not None:
                assert after.summary is not None
                assert after.summary.pinned == before.summary.pinned
                assert after.summary.request == before.summary.request
                assert after.summary.text == before.summary.text
                continue
            assert after_blocks[: len(before.content)] == before.content
            after_blocks = without_state(after_blocks)
        if before.pinned or before.summary is not None:
            assert after_blocks == before.content, "a pinned message was changed"
        if before.is_request:  # what a person wrote stays, even beside pruned tool results
            said = [b for b in after_blocks if b.get("type") == "text"]
            assert said[: len(before.request_blocks)] == [
                b for b in before.request_blocks if b.get("type") == "text"
            ] or any(b.get("type") != "text" for b in before.request_blocks)
        assert len(after_blocks) == len(before.content)
        if index == len(history) - 1 and after_blocks != before.content:
            check_round_fitted(before, after, notes)  # the newest round is only ever fitted
            replaced_any = True
            continue
        if index == latest_request_index(history):
            assert after_blocks == before.content, "the newest request is never pruned"
        if after_blocks == before.content:
            continue  # in the kept part, or nothing large enough in it
        for old, new in zip(before.content, after_blocks, strict=True):
            check_block_pruned(old, new, 200)
            replaced_any = replaced_any or new != old
    assert replaced_any or with_hook, "a prune that changes nothing must not be returned"


# -- the compacter, every strategy ---------------------------------------------------------------


@pytest.mark.heavy  # hypothesis runs it on many histories: seconds, more under CI
@given(
    history=histories(),
    summarizer=st.booleans(),
    window_messages=st.one_of(st.none(), st.integers(2, 8)),
    with_hook=st.booleans(),
    target_ratio=st.sampled_from((0.25, 0.5, 0.9)),
)
def test_every_strategy_keeps_a_valid_complete_conversation(
    history: list[Message],
    summarizer: bool,
    window_messages: int | None,
    with_hook: bool,
    target_ratio: float,
) -> None:
    validate_messages(history, allow_pending_tool_use=False)  # the generator's own promise
    for strategy in STRATEGIES:
        compacter = compacter_for(
            strategy,
            summarizer=summarizer,
            window_messages=window_messages,
            with_hook=with_hook,
            target_ratio=target_ratio,
        )
        outcome = compact(compacter, history, force=True)
        result = outcome.transition
        if strategy == "none":
            assert result is None
            continue
        if result is None:
            event(f"{strategy}: nothing gained")
            why = outcome.explanation
            assert len(history) < 3 or any(
                reason in why
                for reason in (
                    "would not reduce",
                    "no safe cut point",
                    "nothing to prune",
                    "under the trigger",
                )
            ), why
            continue
        out = result.compacted_messages
        event(f"{strategy}: {result.summary.strategy}")

        validate_messages(out, allow_pending_tool_use=False)
        uses, results = tool_ids(out)
        assert sorted(uses) == sorted(results), "every tool_use keeps its tool_result"
        assert all(m.usage is None for m in out), "stale API usage must not survive compaction"

        summary = result.summary
        assert summary.original_message_count == len(history)
        assert summary.compacted_message_count == len(out)
        assert summary.tokens_after < summary.tokens_before
        if strategy in ("summarize", "sliding_window"):
            assert summary.strategy in (strategy, "digest")
        if summary.strategy == "prune":
            assert strategy in ("auto", "prune", "server")  # server, asked for, runs as auto
            # The ledger is preserved state too: derived from the history, there
            # whenever the history holds a request or a tool call, with or without a hook.
            stated = any(STATE_TAG in str(b.get("text", "")) for b in out[0].content)
            check_pruned(history, out, with_hook=with_hook or stated, notes=summary.notes)
            if strategy != "prune":  # auto settles for pruning only when it reaches the target
                assert summary.tokens_after <= summary.tokens_before * target_ratio
        else:
            check_assembled(history, out, summary.notes)
            if with_hook:
                assert any("finish the parser" in str(b.get("text")) for b in out[0].content)
        if strategy == "sliding_window" and window_messages is not None:
            smallest = max(i for i in range(1, len(history)) if history[i].role == "assistant")
            assert len(out) - 1 <= window_messages or len(out) - 1 == len(history) - smallest

        # No loop: right after a compaction, the automatic check does not ask for another one,
        # unless one asked for left the context where the reply reserve only just fits: no room
        # to wait there (the breaker's rule), and the compaction said it goes on above the
        # trigger without a pause.
        if compacter.should_compact(out).compact:
            hold = breaker_hold(WINDOW, 256, compacter.trigger_tokens, summary.tokens_after)
            assert hold is None, summary.warnings
            assert any(
                "could not bring the context under the trigger" in warning
                and "it goes on above it" in warning
                and "pauses" not in warning
                for warning in summary.warnings
            ), summary.warnings


# -- the pure strategy functions -----------------------------------------------------------------
# One generated history feeds the three pure functions (generation is the costly part).


@given(
    history=histories(),
    tail_fraction=st.floats(0, 1.2),
    max_messages=st.one_of(st.none(), st.integers(1, 10)),
    keep_fraction=st.floats(0, 1),
    min_chars=st.sampled_from((1, 50, 200, 1000)),
    by_tokens=st.booleans(),
)
def test_pure_strategies(
    history: list[Message],
    tail_fraction: float,
    max_messages: int | None,
    keep_fraction: float,
    min_chars: int,
    by_tokens: bool,
) -> None:
    total = sum(COUNTER.count_message(m) for m in history)
    tail_tokens = int(total * tail_fraction)
    check_choose_tail_start(history, tail_tokens, max_messages)
    check_prune_tool_outputs(history, int(len(history) * keep_fraction), min_chars)
    check_sliding_window(history, max_messages, tail_tokens if by_tokens else None)


def check_choose_tail_start(
    history: list[Message], tail_tokens: int, max_messages: int | None
) -> None:
    """The earliest safe cut whose tail fits, else the smallest valid tail; None without a cut."""
    count = COUNTER.count_message
    split = choose_tail_start(
        history, tail_tokens=tail_tokens, count=count, max_messages=max_messages
    )
    cuts = [i for i in range(1, len(history)) if history[i].role == "assistant"]
    if not cuts:
        assert split is None
        return
    assert split is not None
    assert split.tail_start in cuts
    assert split.head(history) + split.tail(history) == history

    def fits(start: int) -> bool:
        size = sum(count(m) for m in history[start:])
        return size <= tail_tokens and (
            max_messages is None or len(history) - start <= max_messages
        )

    if split.tail_start != cuts[-1]:
        assert fits(split.tail_start)
    else:
        event("choose_tail_start: smallest tail")
    earlier = [c for c in cuts if c < split.tail_start]
    if earlier:  # earliest: the cut just before it would not fit
        assert not fits(earlier[-1])


def check_prune_tool_outputs(history: list[Message], keep_from: int, min_chars: int) -> None:
    """Same shape and pairs; only large tool outputs before ``keep_from`` become a marker."""
    out = prune_tool_outputs(history, keep_from=keep_from, min_chars=min_chars)
    validate_messages(out, allow_pending_tool_use=False)
    assert len(out) == len(history)
    for index, (before, after) in enumerate(zip(history, out, strict=True)):
        assert after.role == before.role and after.pinned == before.pinned
        assert after.usage is None
        if index >= keep_from or before.pinned:
            assert after.content == before.content
            continue
        if index == latest_request_index(history):
            assert after.content == before.content, "the newest request is never pruned"
            continue
        for old, new in zip(before.content, after.content, strict=True):
            check_block_pruned(old, new, min_chars)
        if after.content != before.content and before.tokens is not None:
            # A pruned message gets a scaled estimate (never its old one) or none at all.
            assert after.tokens is None or after.tokens <= before.tokens


def check_sliding_window(
    history: list[Message], max_messages: int | None, max_tokens: int | None
) -> None:
    """A valid prefix + suffix of the history that fits the limits (unless none could)."""
    split = choose_tail_start(
        history,
        tail_tokens=max_tokens if max_tokens is not None else 2**62,
        count=COUNTER.count_message,
        max_messages=max_messages,
    )
    if split is None:
        assert not any(m.role == "assistant" for m in history[1:])
        return
    out = assemble(history, split, text=window_note(history, split))
    validate_messages(out, allow_pending_tool_use=False)
    check_assembled(history, out)
    tail = out[1:]
    smallest = max(i for i in range(1, len(history)) if history[i].role == "assistant")
    if len(tail) != len(history) - smallest:  # anything but the smallest tail must fit
        assert max_messages is None or len(tail) <= max_messages
        assert max_tokens is None or sum(COUNTER.count_message(m) for m in tail) <= max_tokens
    assert out[0].summary is not None
    assert "sliding window" in out[0].summary.text
