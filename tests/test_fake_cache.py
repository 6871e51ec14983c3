"""The fake API's prompt cache (fake_api/cache.py): over real HTTP with the real SDK, and its parts.

Every server test ends by checking the sum identity on every answered request: input + cache
write + cache read == what ``count_tokens`` answers for the same body.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import Bill, FakeAnthropicServer, billed_ratio, text_reply
from fake_api.cache import (
    CacheUse,
    PromptCache,
    bill_from_usage,
    cache_problems,
    min_cache_tokens,
    request_prefix,
)

MODEL = "claude-sonnet-4-6"
EPHEMERAL: Any = {"type": "ephemeral"}
HOUR: Any = {"type": "ephemeral", "ttl": "1h"}
LONG = "The agent reads every file before it edits one and runs the tests after. " * 120
TOOL: Any = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running
        for bill in running.bills:  # the sum identity, on every answered request
            assert bill.uncached_input == running.count_input_tokens(bill.body)


def _system(text: str = LONG, cache_control: Any = EPHEMERAL) -> Any:
    return [{"type": "text", "text": text, "cache_control": cache_control}]


def _text(text: str, cache_control: Any = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache_control is not None:
        block["cache_control"] = cache_control
    return block


def _text_message(text: str) -> Any:
    return {"role": "user", "content": text}


def _ask(server: FakeAnthropicServer, model: str = MODEL, **request: Any) -> anthropic.types.Usage:
    """One request through the SDK; its usage, checked against ``count_tokens``."""
    server.enqueue(text_reply("ok"))
    client = server.client()
    message: anthropic.types.Message = client.messages.create(model=model, max_tokens=50, **request)
    usage = message.usage
    counted = client.messages.count_tokens(model=model, **request).input_tokens
    read, written = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    assert usage.input_tokens + read + written == counted
    return usage


def _cached(usage: anthropic.types.Usage) -> tuple[int, int]:
    """(read, written)."""
    return usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0


def _conversation(turns: int, mark_last: bool = True) -> list[Any]:
    """``turns`` user/assistant exchanges then a user message (the last block marked): each
    conversation extends the shorter ones (about 600 tokens a question)."""
    messages: list[Any] = []
    for n in range(turns + 1):
        if n:
            messages.append({"role": "assistant", "content": [_text(f"answer {n - 1}")]})
        messages.append({"role": "user", "content": [_text(f"question {n}: " + LONG[:3000])]})
    if mark_last:
        messages[-1]["content"][-1]["cache_control"] = EPHEMERAL
    return messages


# ---------------------------------------------------------------------------------------------
# Reads and writes, through the SDK


def test_a_marked_system_is_written_then_read(server: FakeAnthropicServer) -> None:
    request: Any = {"system": _system(), "tools": [TOOL], "messages": [_text_message("Hi")]}
    prefix = server.count_input_tokens({"system": request["system"], "tools": [TOOL]})
    first = _ask(server, **request)
    assert _cached(first) == (0, prefix)
    second = _ask(server, **request)
    assert _cached(second) == (prefix, 0)
    assert second.input_tokens == first.input_tokens > 0
    # Streamed, the same figures arrive (message_start and message_delta).
    server.enqueue(text_reply("streamed"))
    with server.client().messages.stream(model=MODEL, max_tokens=50, **request) as stream:
        final = stream.get_final_message()
    assert _cached(final.usage) == (prefix, 0)
    assert [bill.cache_read for bill in server.bills] == [0, prefix, prefix]
    assert server.violations == []


def test_the_newest_message_breakpoint_reads_the_previous_turn(server: FakeAnthropicServer) -> None:
    first_messages = _conversation(2)
    first = _ask(server, system="Be brief.", messages=first_messages)
    total = server.count_input_tokens({"system": "Be brief.", "messages": first_messages})
    assert _cached(first) == (0, total) and first.input_tokens == 0
    # Next turn: the breakpoint moved to the newest message (the old block lost its marker).
    second_messages = _conversation(3)
    second = _ask(server, system="Be brief.", messages=second_messages)
    grown = server.count_input_tokens({"system": "Be brief.", "messages": second_messages})
    assert _cached(second) == (total, grown - total)


@pytest.mark.parametrize(
    ("added", "keep_old", "hit"), [(20, False, True), (21, False, False), (21, True, True)]
)
def test_a_turn_of_more_than_20_blocks_misses_unless_an_older_breakpoint_is_kept(
    server: FakeAnthropicServer, added: int, keep_old: bool, hit: bool
) -> None:
    before = _conversation(1)
    _ask(server, messages=before)
    kept = server.count_input_tokens({"messages": before})
    uses = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"path": f"{n}.py"}}
        for n in range(10)
    ]
    results: list[Any] = [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"file {n}"}
        for n in range(10)
    ]
    results += [_text("and one more thing")] * (added - 20)
    results[-1] = {**results[-1], "cache_control": EPHEMERAL}
    after = [*_conversation(1, mark_last=keep_old)]
    after += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    positions = len(server.prefix({"messages": after}).positions)
    assert positions - len(server.prefix({"messages": before}).positions) == added
    usage = _ask(server, messages=after)
    total = server.count_input_tokens({"messages": after})
    assert _cached(usage) == ((kept, total - kept) if hit else (0, total))


def test_below_the_minimum_nothing_is_cached(server: FakeAnthropicServer) -> None:
    short: Any = _system("A short system prompt.")
    for _ in range(2):
        assert _cached(_ask(server, system=short, messages=[_text_message("Hi")])) == (0, 0)
    assert server.cache.live() == 0
    # Per model, with a default for the others.
    server.cache_min_tokens = {"claude-opus-4-6": 4096, "*": 1000}
    request: Any = {"system": _system(), "messages": [_text_message("Hi")]}
    assert 1000 < server.count_input_tokens({"system": _system()}) < 4096
    assert _cached(_ask(server, "claude-opus-4-6", **request)) == (0, 0)
    assert _cached(_ask(server, **request))[1] > 0


def test_entries_expire_five_minutes_after_their_last_use(server: FakeAnthropicServer) -> None:
    request: Any = {"system": _system(), "messages": [_text_message("Hi")]}
    prefix = _cached(_ask(server, **request))[1]
    server.advance_clock(299)
    assert _cached(_ask(server, **request)) == (prefix, 0)  # the read refreshed it
    server.advance_clock(299)
    assert _cached(_ask(server, **request)) == (prefix, 0)  # 598 s after the write
    server.advance_clock(300)
    assert _cached(_ask(server, **request)) == (0, prefix)  # gone: written again


def test_one_hour_entries_and_their_price(server: FakeAnthropicServer) -> None:
    messages: Any = [{"role": "user", "content": [_text("Hi", EPHEMERAL)]}]
    request: Any = {"system": _system(cache_control=HOUR), "messages": messages}
    hour = server.count_input_tokens({"system": request["system"]})
    total = server.count_input_tokens(request)
    first = _ask(server, **request)
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_1h_input_tokens == hour
    assert first.cache_creation.ephemeral_5m_input_tokens == total - hour
    assert _cached(first) == (0, total)
    bill = server.bills[0]
    assert (bill.cache_write_1h, bill.cache_write_5m, bill.cache_read) == (hour, total - hour, 0)
    assert bill.billed_input == pytest.approx(2 * hour + 1.25 * (total - hour))
    server.advance_clock(3000)  # the 5m entry is gone, the 1h one lives
    second = _ask(server, **request)
    assert _cached(second) == (hour, total - hour)
    assert server.bills[1].billed_input == pytest.approx(0.1 * hour + 1.25 * (total - hour))
    assert billed_ratio(server.bills) == pytest.approx(
        (server.bills[0].billed_input + server.bills[1].billed_input) / (2 * total)
    )


def test_a_changed_byte_before_the_breakpoint_misses(server: FakeAnthropicServer) -> None:
    messages: Any = [_text_message("Hi")]
    prefix = _cached(_ask(server, system=_system(), messages=messages))[1]
    # After the breakpoint: still read.
    assert _cached(_ask(server, system=_system(), messages=[_text_message("Hello")]))[0] == prefix
    changed = _system(LONG.replace("tests", "test", 1))
    written = server.count_input_tokens({"system": changed})
    assert _cached(_ask(server, system=changed, messages=messages)) == (0, written)
    # A different tool list before the system breakpoint misses as well.
    with_tool = _ask(server, system=_system(), tools=[TOOL], messages=messages)
    assert _cached(with_tool)[0] == 0


def test_automatic_caching_marks_the_last_cacheable_block(server: FakeAnthropicServer) -> None:
    first_messages = _conversation(2, mark_last=False)
    first = _ask(server, messages=first_messages, cache_control=EPHEMERAL)
    total = server.count_input_tokens({"messages": first_messages})
    assert _cached(first) == (0, total)
    second_messages = _conversation(3, mark_last=False)
    second = _ask(server, messages=second_messages, cache_control=EPHEMERAL)
    assert _cached(second)[0] == total
    # Without it (and without markers) nothing is cached.
    assert _cached(_ask(server, messages=second_messages)) == (0, 0)


def test_entries_are_per_model(server: FakeAnthropicServer) -> None:
    request: Any = {"system": _system(), "messages": [_text_message("Hi")]}
    prefix = _cached(_ask(server, **request))[1]
    assert _cached(_ask(server, "claude-haiku-4-5", **request)) == (0, prefix)
    assert _cached(_ask(server, **request)) == (prefix, 0)
    assert server.cache.live(MODEL) == 1 and server.cache.live() == 2


def test_count_tokens_never_reads_nor_writes(server: FakeAnthropicServer) -> None:
    request: Any = {"system": _system(), "messages": [_text_message("Hi")]}
    client = server.client()
    client.messages.count_tokens(model=MODEL, **request)
    assert server.cache.live() == 0
    prefix = _cached(_ask(server, **request))[1]
    assert prefix > 0  # count_tokens had written nothing
    assert server.cache.live() == 1


def test_scripted_cache_numbers_still_win(server: FakeAnthropicServer) -> None:
    server.enqueue(text_reply("ok", cache_read_input_tokens=7, cache_creation_input_tokens=5))
    usage = (
        server.client()
        .messages.create(
            model=MODEL, max_tokens=10, system=_system(), messages=[_text_message("Hi")]
        )
        .usage
    )
    assert _cached(usage) == (7, 5)
    assert server.cache.live() == 0
    server.enqueue(text_reply("ok", usage={"input_tokens": 3, "output_tokens": 1}))
    server.client().messages.create(
        model=MODEL, max_tokens=10, system=_system(), messages=[_text_message("Hi")]
    )
    assert server.bills[-1] == Bill(server.bills[-1].body, 3, 0, 0, 0, 1)
    server.bills.clear()  # a scripted whole usage need not add up to the counted input


def test_prompt_caching_off(server: FakeAnthropicServer) -> None:
    server.prompt_caching = False
    request: Any = {"system": _system(), "messages": [_text_message("Hi")]}
    assert _cached(_ask(server, **request)) == (0, 0)
    assert billed_ratio(server.bills) == 1.0


# ---------------------------------------------------------------------------------------------
# What the API refuses


def _refused(server: FakeAnthropicServer, **request: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        server.client().messages.create(model=MODEL, max_tokens=10, **request)
    assert caught.value.status_code == 400
    assert server.bills == []
    return str(caught.value)


def test_five_breakpoints_are_refused(server: FakeAnthropicServer) -> None:
    system: Any = [_text(f"part {n}", EPHEMERAL) for n in range(4)]
    message: Any = {"role": "user", "content": [_text("Hi", EPHEMERAL)]}
    error = _refused(server, system=system, messages=[message])
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in error
    assert server.violations and "Found 5" in server.violations[-1]
    # Automatic caching takes a slot too (unless the last block is marked already).
    _refused(server, system=system, messages=[_text_message("Hi")], cache_control=EPHEMERAL)


def test_four_breakpoints_and_automatic_on_a_marked_block_are_accepted(
    server: FakeAnthropicServer,
) -> None:
    system: Any = [_text(f"part {n}", EPHEMERAL) for n in range(3)]
    message: Any = {"role": "user", "content": [_text("Hi", EPHEMERAL)]}
    _ask(server, system=system, messages=[message], cache_control=EPHEMERAL)
    assert server.violations == []


def test_breakpoints_on_thinking_or_empty_text_and_a_late_hour_are_refused(
    server: FakeAnthropicServer,
) -> None:
    thinking: Any = {
        "type": "thinking",
        "thinking": "hm",
        "signature": "s",
        "cache_control": EPHEMERAL,
    }
    messages: Any = [
        _text_message("Hi"),
        {"role": "assistant", "content": [thinking, _text("Hello")]},
        _text_message("Go on"),
    ]
    _refused(server, messages=messages)
    assert any("cannot be set for thinking blocks" in v for v in server.violations)
    empty: Any = {"role": "user", "content": [_text("Hi"), _text("", EPHEMERAL)]}
    _refused(server, messages=[empty])
    assert any("cannot be set for empty text blocks" in v for v in server.violations)
    late: Any = {"role": "user", "content": [_text("Hi", HOUR)]}
    error = _refused(server, system=_system(), messages=[late])
    assert "a ttl='1h' cache_control block must not come after a ttl='5m'" in error


# ---------------------------------------------------------------------------------------------
# The parts


def test_positions_count_what_count_tokens_counts() -> None:
    body: Any = {
        "tools": [TOOL],
        "system": "Be brief.",
        "messages": [*_conversation(2), {"role": "assistant", "content": "Sure."}],
    }
    fake = FakeAnthropicServer(token_factor=1.3, message_overhead=7)  # not started: no need
    prefix = fake.prefix(body)
    assert prefix.total == fake.count_input_tokens(body)
    tokens = [position.tokens for position in prefix.positions]
    assert tokens == sorted(tokens) and len(tokens) == 1 + 1 + 6
    assert [p.where for p in prefix.positions[:3]] == ["tools.0", "system", "messages.0.content.0"]
    assert prefix.positions[-1].where == "messages.5"
    # The role is part of a message's hash: the same block said by the other side differs.
    other = [{**body["messages"][0], "role": "assistant"}]
    assert request_prefix({"messages": other}).positions[0].digest != (
        request_prefix({"messages": body["messages"][:1]}).positions[0].digest
    )


def test_only_what_follows_the_compaction_block_is_the_prefix() -> None:
    compaction = {"type": "compaction", "content": "summary", "encrypted_content": "x"}
    body: Any = {
        "messages": [
            _text_message("old question " * 50),
            {"role": "assistant", "content": [_text("old answer"), compaction, _text("on")]},
            {"role": "user", "content": [_text("new", EPHEMERAL)]},
        ]
    }
    prefix = request_prefix(body)
    assert [p.where for p in prefix.positions] == [
        "messages.1.content.1",
        "messages.1.content.2",
        "messages.2.content.0",
    ]
    assert prefix.breakpoints == [(2, "5m")]
    visible = {
        "messages": [
            {"role": "assistant", "content": [compaction, _text("on")]},
            body["messages"][2],
        ]
    }
    assert prefix.positions[-1].digest == request_prefix(visible).positions[-1].digest


def test_the_lookback_and_the_minimum_unit() -> None:
    now = [0.0]
    cache = PromptCache(lambda: now[0], lookback=2)
    blocks = [_text(f"block {n} " * 30) for n in range(6)]
    marked = [*blocks[:2], {**blocks[2], "cache_control": EPHEMERAL}]
    first = request_prefix({"messages": [{"role": "user", "content": marked}]})
    assert cache.use(MODEL, first, 10) == CacheUse(write_5m=first.total)
    for extra, expected in ((2, first.total), (3, 0)):
        grown = [*blocks[: 3 + extra - 1], {**blocks[3 + extra - 1], "cache_control": EPHEMERAL}]
        prefix = request_prefix({"messages": [{"role": "user", "content": grown}]})
        cache = PromptCache(lambda: now[0], lookback=2)
        cache.use(MODEL, first, 10)
        assert cache.use(MODEL, prefix, 10).read == expected
    assert cache.use("other-model", first, first.total + 1) == CacheUse()
    assert min_cache_tokens(2048, MODEL) == 2048
    assert min_cache_tokens({MODEL: 4096}, "x") == 1024
    assert min_cache_tokens({MODEL: 4096, "*": 7}, "x") == 7


def test_concurrent_identical_requests_write_once() -> None:
    cache = PromptCache()
    prefix = request_prefix({"system": _system()})
    barrier = threading.Barrier(8)
    uses: list[CacheUse] = []
    lock = threading.Lock()

    def run() -> None:
        barrier.wait()
        use = cache.use(MODEL, prefix, 1)
        with lock:
            uses.append(use)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(u.write for u in uses) == [0] * 7 + [prefix.total]
    assert sorted(u.read for u in uses) == [0] + [prefix.total] * 7


def test_problems_without_a_server() -> None:
    assert cache_problems({"messages": [_text_message("Hi")]}) == []
    assert cache_problems({"system": [_text("x", {"type": "persistent"})]}) == [
        "system.0.cache_control.type: Input should be 'ephemeral'"
    ]
    assert cache_problems({"system": [_text("x", {"type": "ephemeral", "ttl": "2h"})]}) == [
        "system.0.cache_control.ttl: Input should be '5m' or '1h'"
    ]
    nested: Any = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [_text(f"r{n}", EPHEMERAL) for n in range(5)],
    }
    assert cache_problems({"messages": [{"role": "user", "content": [nested]}]}) == [
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    ]


def test_bills() -> None:
    bill = Bill(
        {}, input_tokens=10, cache_write_5m=100, cache_write_1h=50, cache_read=1000, output_tokens=3
    )
    assert bill.uncached_input == 1160
    assert bill.billed_input == pytest.approx(10 + 125 + 100 + 100)
    assert billed_ratio([]) == 0.0
    assert billed_ratio([bill, bill]) == pytest.approx(335 / 1160)
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "iterations": [
            {"type": "compaction", "input_tokens": 500, "output_tokens": 40},
            {
                "type": "message",
                "input_tokens": 60,
                "output_tokens": 9,
                "cache_read_input_tokens": 7,
                "cache_creation_input_tokens": 30,
                "cache_creation": {
                    "ephemeral_1h_input_tokens": 20,
                    "ephemeral_5m_input_tokens": 10,
                },
            },
        ],
    }
    assert bill_from_usage({}, usage) == Bill({}, 560, 10, 20, 7, 49)
