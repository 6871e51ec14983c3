"""Where requests carry prompt-cache breakpoints (``agentloop.with_cache_breakpoints`` and the
anthropic adapter), and that the prefix they mark never changes between consecutive requests."""

from __future__ import annotations

import json
from typing import Any

from agentloop import with_cache_breakpoints
from agentloop._adapters.anthropic import build_request_kwargs
from agentloop._core.cutting.prefix import build_prefix
from agentloop._core.measuring.cache import MAX_BREAKPOINTS, breakpoint_count
from agentloop._core.values.messages import Message
from agentloop._core.values.model import ModelRequest

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]


def marked(params: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where the breakpoints are: ("system", block, -1), ("tools", index, -1) or
    ("messages", message, block)."""
    where: list[tuple[str, int, int]] = []
    for index, block in enumerate(params.get("system") or []):
        if isinstance(block, dict) and block.get("cache_control"):
            where.append(("system", index, -1))
    for index, tool in enumerate(params.get("tools") or []):
        if tool.get("cache_control"):
            where.append(("tools", index, -1))
    for m, message in enumerate(params.get("messages") or []):
        for b, block in enumerate(message["content"]):
            if block.get("cache_control"):
                where.append(("messages", m, b))
    return where


def tool_round(n: int, calls: int) -> list[dict[str, Any]]:
    uses = [
        {"type": "tool_use", "id": f"t{n}_{i}", "name": "read_file", "input": {"path": f"f{i}"}}
        for i in range(calls)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"t{n}_{i}", "content": f"body {i}"}
        for i in range(calls)
    ]
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


def conversation(rounds: int, calls: int = 1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the parser"}]
    for n in range(rounds):
        messages += tool_round(n, calls)
    return messages


def params(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 100,
        "system": "You code.",
        "tools": TOOLS,
        "messages": messages,
    }


def canonical_prefix(params: dict[str, Any], upto: tuple[int, int]) -> str:
    """Tools, system and messages up to block ``upto`` = (message, block), without markers."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    m, b = upto
    messages = [dict(msg) for msg in params["messages"][: m + 1]]
    messages[-1] = {**messages[-1], "content": messages[-1]["content"][: b + 1]}
    return json.dumps(clean([params.get("tools"), params.get("system"), messages]))


def test_a_plain_turn_marks_the_stable_prefix_and_the_newest_message() -> None:
    out = with_cache_breakpoints(params(conversation(3)))
    assert marked(out) == [("system", 0, -1), ("messages", 6, 0)]
    # String content is sent as blocks, so marking a message never changes its bytes otherwise.
    assert out["messages"][0]["content"] == [{"type": "text", "text": "fix the parser"}]


def test_the_given_params_are_not_changed() -> None:
    given = params(conversation(2))
    before = json.dumps(given)
    with_cache_breakpoints(given)
    assert json.dumps(given) == before


def test_a_long_tool_round_keeps_the_previous_requests_end_as_a_breakpoint() -> None:
    # 15 parallel calls: 30 blocks since the previous request ended, past the 20-block lookback.
    messages = conversation(1, calls=2) + tool_round(9, calls=15)
    out = with_cache_breakpoints(params(messages))
    assert ("messages", 2, 1) in marked(out), "the previous request's end (its last block)"
    assert ("messages", 4, 14) in marked(out)
    # A short round needs no second breakpoint: the lookback reaches the previous one.
    assert len(marked(with_cache_breakpoints(params(conversation(4))))) == 2


def test_a_one_off_request_reads_the_previous_end_and_writes_nothing_after_it() -> None:
    messages = [*conversation(2), {"role": "assistant", "content": "done"}]
    out = with_cache_breakpoints(params(messages), mark_newest=False)
    assert marked(out) == [("system", 0, -1), ("messages", 4, 0)]


def test_never_more_than_four_and_the_callers_own_breakpoints_are_kept() -> None:
    messages = conversation(1, calls=2) + tool_round(9, calls=15)
    messages[0] = {
        "role": "user",
        "content": [{"type": "text", "text": "mine", "cache_control": EPHEMERAL}],
    }
    given = params(messages)
    given["tools"] = [{**TOOLS[0], "cache_control": EPHEMERAL}]
    out = with_cache_breakpoints(given, prefix_message=True)
    assert breakpoint_count(out) == MAX_BREAKPOINTS
    assert out["tools"][0]["cache_control"] == EPHEMERAL
    assert out["messages"][0]["content"][0]["cache_control"] == EPHEMERAL
    assert ("messages", 4, 14) in marked(out), "the newest message comes before older ones"


def test_thinking_blocks_and_empty_text_are_never_marked() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "answer"},
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": ""},
            ],
        },
    ]
    out = with_cache_breakpoints(params(messages))
    assert marked(out) == [("system", 0, -1), ("messages", 1, 0)]


def test_off_and_system_modes() -> None:
    assert marked(with_cache_breakpoints(params(conversation(2)), mode="off")) == []
    assert marked(with_cache_breakpoints(params(conversation(2)), mode="system")) == [
        ("system", 0, -1)
    ]
    no_system = {k: v for k, v in params(conversation(1)).items() if k != "system"}
    assert ("tools", 0, -1) in marked(with_cache_breakpoints(no_system))


def test_the_adapter_marks_a_compaction_prefix_too() -> None:
    prefix = build_prefix("## Goal\nfix", pinned=(), request=None, state="", replaced_count=9)
    request = ModelRequest(
        model="m",
        system="You code.",
        tools=TOOLS,
        messages=(prefix, Message.assistant("ok"), Message.user("go on")),
    )
    kwargs = build_request_kwargs(request)
    assert marked(kwargs) == [("system", 0, -1), ("messages", 0, 0), ("messages", 2, 0)]


def test_consecutive_requests_keep_every_byte_before_the_previous_breakpoint() -> None:
    """A growing conversation with short and long tool rounds: request n+1 holds request n's
    marked prefix byte for byte (markers aside), so every earlier breakpoint can be read."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    previous: dict[str, Any] | None = None
    for n in range(12):
        current = with_cache_breakpoints(params(messages))
        assert breakpoint_count(current) <= MAX_BREAKPOINTS
        if previous is not None:
            for where, m, b in marked(previous):
                if where == "messages":
                    assert canonical_prefix(previous, (m, b)) == canonical_prefix(current, (m, b))
        previous = current
        messages = messages + tool_round(n, calls=1 + (n % 4) * 6)
