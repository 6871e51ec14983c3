"""``NextTurn``: the one owner of what waits for the next user turn.

A compaction whose child ends with a reply (``/compact`` between turns, the API's summary
adopted from another loop) cannot place what it carries (the ledger, preserved state, pins,
the latest request) yet: the core returns it (``CompactionOutcome.later``) and the compacter
holds it here until the next user message takes it. Every writer goes through this small
interface; it is generic over what it holds, so the carried context may change shape without
changing its owner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class NextTurn(Generic[T]):
    """What waits for the next user turn: one item at most, held, peeked at, taken once."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: T | None = None

    def hold(self, item: T | None) -> None:
        """From now on ``item`` waits, in place of what waited (None: nothing waits)."""
        self._waiting = item

    def peek(self) -> T | None:
        """What waits, left waiting."""
        return self._waiting

    def take(self) -> T | None:
        """What waits, no longer waiting (placed once)."""
        item, self._waiting = self._waiting, None
        return item

    def drop(self) -> None:
        """Nothing waits any more (what the compaction that left it carried is gone)."""
        self._waiting = None

    def checkpoint(self) -> Callable[[], None]:
        """What puts back what waits now (a compaction worked out and not applied)."""
        item = self._waiting

        def restore() -> None:
            self._waiting = item

        return restore

    def __repr__(self) -> str:
        return f"NextTurn({self._waiting!r})"
