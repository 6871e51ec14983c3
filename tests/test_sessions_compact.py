"""The seed strategies as values, and the one pair-safe cut rule (``sessions.pair_safe_cut``).

What ``compact`` does to a store is pinned by the contract suite (``test_store_contract.py``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sessions
from sessions import CompactionError, CompactionStrategy, NewMessage, StoredMessage
from sessions._compaction import sliding_window_start
from sessions._cut import has_tool_result, pair_safe_cut

SLIDING = CompactionStrategy.sliding_window
REPO = Path(__file__).resolve().parents[1]


def test_strategies_are_obvious_values() -> None:
    assert str(CompactionStrategy.NONE) == "none"
    assert str(CompactionStrategy.SUMMARIZE) == "summarize"
    assert str(SLIDING(50)) == "sliding_window(50)"
    assert SLIDING(50) == SLIDING(50)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(CompactionError):
            SLIDING(bad)  # type: ignore[arg-type]
    with pytest.raises(CompactionError):
        CompactionStrategy("truncate")  # type: ignore[arg-type]
    with pytest.raises(CompactionError):
        CompactionStrategy("summarize", 3)


# ------------------------------------------------------------------ the cut rule


@dataclass(frozen=True)
class Msg:
    role: str
    content: Sequence[Mapping[str, Any]] = field(default_factory=list)


def say(role: str) -> Msg:
    return Msg(role, [{"type": "text", "text": role}])


def test_pair_safe_cut_with_the_user_first() -> None:
    messages = [
        say("user"),
        Msg("assistant", [{"type": "tool_use", "id": "a"}]),
        Msg("user", [{"type": "tool_result", "tool_use_id": "a"}]),
        say("assistant"),
        say("user"),
    ]
    assert pair_safe_cut(messages, 0, first_role="user") == 0
    assert pair_safe_cut(messages, 1, first_role="user") == 4  # skips the tool_result
    assert pair_safe_cut(messages, 5, first_role="user") is None
    assert pair_safe_cut(messages[:4], 1, first_role="user") is None


def test_pair_safe_cut_with_the_assistant_first() -> None:
    messages = [
        say("user"),
        Msg("assistant", [{"type": "tool_use", "id": "a"}]),
        Msg("user", [{"type": "tool_result", "tool_use_id": "a"}]),
        say("assistant"),
    ]
    assert pair_safe_cut(messages, 0, first_role="assistant") == 1
    assert pair_safe_cut(messages, 2, first_role="assistant") == 3
    assert pair_safe_cut(messages, 4, first_role="assistant") is None


def test_pair_safe_cut_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        pair_safe_cut([say("user")], -1, first_role="user")
    with pytest.raises(ValueError):
        pair_safe_cut([say("user")], 0, first_role="system")  # type: ignore[arg-type]


def test_both_message_types_fit_the_rule() -> None:
    """Typed use by both sides (mypy checks the calls): agentloop's Message and StoredMessage."""
    from agentloop import Message

    ours = [Message.user("hi"), Message.assistant("hello")]
    stored = [
        StoredMessage.model_construct(
            session_id="x", seq=0, role="assistant", content=[{"type": "text", "text": "a"}]
        )
    ]
    assert pair_safe_cut(ours, 0, first_role="assistant") == 1
    assert pair_safe_cut(stored, 0, first_role="assistant") == 0
    new: list[NewMessage] = [NewMessage(role="user", content=[])]
    assert pair_safe_cut(new, 0, first_role="user") == 0


@st.composite
def tool_conversations(draw: st.DrawFn) -> list[Msg]:
    """Valid Messages API histories: user requests, tool_use rounds, final answers."""
    messages: list[Msg] = []
    call = 0
    for _ in range(draw(st.integers(1, 8))):
        messages.append(Msg("user", [{"type": "text", "text": "request"}]))
        for _ in range(draw(st.integers(0, 4))):
            ids = [f"t{call + i}" for i in range(draw(st.integers(1, 3)))]
            call += len(ids)
            messages.append(Msg("assistant", [{"type": "tool_use", "id": i} for i in ids]))
            messages.append(Msg("user", [{"type": "tool_result", "tool_use_id": i} for i in ids]))
        messages.append(Msg("assistant", [{"type": "text", "text": "answer"}]))
    return messages


def assert_pairs_kept(kept: Sequence[Msg]) -> None:
    for index, message in enumerate(kept):
        for block in message.content:
            if block["type"] == "tool_result":
                asked = [b.get("id") for b in kept[index - 1].content] if index else []
                assert block["tool_use_id"] in asked


@given(tool_conversations(), st.data(), st.sampled_from(["user", "assistant"]))
def test_a_pair_safe_cut_never_orphans_a_tool_result(
    messages: list[Msg], data: st.DataObject, first_role: Literal["user", "assistant"]
) -> None:
    start = data.draw(st.integers(0, len(messages)))
    cut = pair_safe_cut(messages, start, first_role=first_role)
    candidates = range(start, len(messages) if cut is None else cut)
    # The cut is the first clean one: nothing clean was skipped.
    assert all(messages[i].role != first_role or has_tool_result(messages[i]) for i in candidates)
    if cut is not None:
        assert messages[cut].role == first_role and not has_tool_result(messages[cut])
        assert_pairs_kept(messages[cut:])


@given(tool_conversations(), st.integers(1, 40))
def test_no_kept_tool_result_loses_its_tool_use(messages: list[Msg], window: int) -> None:
    start = sliding_window_start(messages, window)
    kept = messages[start:]
    if start == 0:
        assert kept == messages
        return
    if not kept:
        # Refused by compact(): no clean start inside the window.
        assert all(m.role != "user" or has_tool_result(m) for m in messages[-window:])
        return
    assert len(kept) <= window
    assert kept[0].role == "user" and not has_tool_result(kept[0])
    assert_pairs_kept(kept)
    # The cut is as late as it needs to be, no later: nothing clean was skipped.
    skipped = messages[len(messages) - min(window, len(messages)) : start]
    assert all(m.role != "user" or has_tool_result(m) for m in skipped)


# ------------------------------------------------------------------ a light import


def test_the_cut_rule_loads_neither_the_store_nor_its_dependencies() -> None:
    """agentloop's pure core imports ``pair_safe_cut``: that must not drag in the store."""
    probe = (
        "import sys, sessions; sessions.pair_safe_cut; "
        "from sessions import pair_safe_cut; import sessions._cut; "
        "print(' '.join(sorted(m for m in sys.modules "
        "if m in ('sqlite3', 'pydantic') or m.startswith('sessions.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.split() == ["sessions._cut"]
    # And the other names still resolve, lazily, to the objects their modules define.
    from sessions import _sqlite

    assert sessions.SqliteSessionStore is _sqlite.SqliteSessionStore
    assert "pair_safe_cut" in dir(sessions)
    with pytest.raises(AttributeError, match="NoSuchThing"):
        sessions.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
