"""``_loop/inputs.py``: a history's same-role pairs merged where it grew, and the per-turn check's
work independent of the history's length (one same-role pair once made every later check rebuild
the whole list). Work is counted as Python and builtin function calls, never timed."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from agentloop import Calibration, ConversationCompacter, Message, Usage
from agentloop._core.values.messages import merge_consecutive
from agentloop._loop.inputs import Inputs
from agentloop.testing import FunctionModel

MODEL = "claude-sonnet-4-5"


class _Counter:
    """A token counter that needs no tokenizer (every message costs its cached figure)."""

    def count_message(self, message: Message) -> int:
        return 10

    def count_system(self, system: str) -> int:
        return 10

    def count_tools(self, tools: Any) -> int:
        return 10


def _history(turns: int, *, pair: bool) -> list[Message]:
    history: list[Message] = []
    for n in range(turns):
        history += [Message.user(f"request {n}"), Message.assistant(f"reply {n}")]
    if pair:
        history.insert(1, Message.user("and one more thing"))
    return history


def _calls(action: Callable[[], object]) -> int:
    """How many Python and builtin functions ``action`` calls."""
    count = 0

    def profile(_frame: FrameType, event: str, _arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


def _work_per_turn(turns: int, *, pair: bool, joined: bool = False) -> list[int]:
    """Calls made by each of six checks, a turn appended before each, after ``turns`` turns."""
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=10**9,
        model=FunctionModel(str),
        counter=_Counter(),
        calibration=Calibration(),
    )
    history = _history(turns, pair=pair)
    history.append(Message.user("next"))
    compacter.should_compact(history)
    counts: list[int] = []
    for n in range(6):
        history.append(
            Message.assistant(f"done {n}", usage=Usage(input_tokens=50, output_tokens=5))
        )
        history.append(Message.user(f"now {n}"))
        if joined:
            history.append(Message.user(f"(and {n})"))  # the API joins it to the request
        counts.append(_calls(lambda: compacter.should_compact(history)))
    return counts


def test_the_per_turn_check_does_the_same_work_at_any_length() -> None:
    for pair in (False, True):
        small, large = _work_per_turn(50, pair=pair), _work_per_turn(2_000, pair=pair)
        assert small[2:] == large[2:], pair
    # A history whose every turn adds a message the API joins to the one before.
    small, large = (
        _work_per_turn(50, pair=True, joined=True),
        _work_per_turn(2_000, pair=True, joined=True),
    )
    assert small[2:] == large[2:]


def test_a_pair_costs_the_check_no_more_than_a_constant() -> None:
    """What a pair adds to a check is a constant: the check of an alternating history and of
    one holding a pair differ by no more than a few calls (none per message)."""
    plain, paired = _work_per_turn(2_000, pair=False), _work_per_turn(2_000, pair=True)
    assert paired[-1] - plain[-1] < 20


def _roles_history(rng: random.Random, size: int) -> list[Message]:
    out: list[Message] = []
    for n in range(size):
        role = rng.choice(("user", "user", "assistant", "assistant", "system"))
        if role == "system":
            out.append(Message.system(f"note {n}"))
        elif role == "user":
            out.append(Message.user(f"u{n}"))
        else:
            out.append(Message.assistant(f"a{n}"))
    return out


def _same(a: list[Message], b: list[Message]) -> bool:
    return [(m.role, m.content) for m in a] == [(m.role, m.content) for m in b]


def test_merging_where_the_history_grew_equals_merging_it_whole() -> None:
    rng = random.Random(37)
    for _ in range(60):
        inputs = Inputs()
        history: list[Message] = []
        returned: list[tuple[list[Message], list[Message]]] = []
        for _step in range(rng.randint(1, 12)):
            history += _roles_history(rng, rng.randint(0, 4))
            out = list(inputs.messages(history, lambda items: items))
            assert _same(out, merge_consecutive(list(history)))
            returned.append((out, list(out)))
        # Lists handed out before were never changed under their holders.
        for held, copy in returned:
            assert held == copy
        # A new list with the same messages: looked at whole, the same answer.
        again = inputs.messages(list(history), lambda items: items)
        assert _same(list(again), merge_consecutive(list(history)))
