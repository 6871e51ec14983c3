"""The seed's compaction API (``compact``, ``get_compaction_record``), written once for every
backend as a thin layer over the store's one transition primitive.

A compaction never rewrites a session: the conversation continues in a child session that holds
the kept messages, and the parent keeps all of its own.

Atomicity: a backend runs :func:`compact` by handing it a *lineage transaction* factory (its
write transaction, seen through :class:`LineageTransaction`). Reading the newest descendant and
its messages, planning, and the transition all happen inside that one transaction, so no other
writer can append to the head or compact the same lineage in between (SQLite: ``BEGIN
IMMEDIATE`` holds the database's write lock; a server backend locks the lineage's rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from ._checks import require_int, require_str
from ._cut import HasRoleAndContent, has_tool_result, pair_safe_cut
from ._ids import SHORT_LENGTH, validate_session_ref
from ._store_errors import CompactionError
from ._types import (
    CompactionEntry,
    CompactionRecord,
    Lease,
    NewMessage,
    Session,
    StoredMessage,
)

__all__ = [
    "CompactionStrategy",
    "Kept",
    "LineageTransaction",
    "compact",
    "compaction_record",
    "get_compaction_record",
    "has_pending_tool_use",
    "has_tool_result",
    "keep",
    "sliding_window_start",
    "total_tokens",
]

StrategyKind = Literal["none", "sliding_window", "summarize"]


@dataclass(frozen=True, slots=True)
class CompactionStrategy:
    """How :meth:`SessionStore.compact` shortens a conversation.

    - ``CompactionStrategy.NONE``: keeps everything and creates no child; the call is recorded.
    - ``CompactionStrategy.sliding_window(n)``: the child keeps the last ``n`` messages, with the
      cut moved forward to the first user message that carries no tool_result, so no tool_result
      loses its tool_use and the kept list starts with the user.
    - ``CompactionStrategy.SUMMARIZE``: the child starts with one *user* message holding the
      summary passed to ``compact`` (required).
    """

    kind: StrategyKind
    max_messages: int | None = None

    NONE: ClassVar[CompactionStrategy]
    SUMMARIZE: ClassVar[CompactionStrategy]

    def __post_init__(self) -> None:
        if self.kind not in ("none", "sliding_window", "summarize"):
            raise CompactionError(f"unknown compaction strategy {self.kind!r}")
        if self.kind == "sliding_window":
            require_int("max_messages", self.max_messages, minimum=1, error=CompactionError)
        elif self.max_messages is not None:
            raise CompactionError(f"{self.kind} takes no max_messages")

    @classmethod
    def sliding_window(cls, max_messages: int) -> CompactionStrategy:
        """Keep the last ``max_messages`` messages (fewer if the cut must move forward)."""
        return cls("sliding_window", max_messages)

    def __str__(self) -> str:
        if self.kind == "sliding_window":
            return f"sliding_window({self.max_messages})"
        return self.kind


CompactionStrategy.NONE = CompactionStrategy("none")
CompactionStrategy.SUMMARIZE = CompactionStrategy("summarize")


# ------------------------------------------------------------------ rules


def has_pending_tool_use(messages: Sequence[HasRoleAndContent]) -> bool:
    """True when the last message is an assistant turn whose tool_use still awaits results."""
    if not messages or messages[-1].role != "assistant":
        return False
    return any(block.get("type") == "tool_use" for block in messages[-1].content)


def sliding_window_start(messages: Sequence[HasRoleAndContent], max_messages: int) -> int:
    """Index of the first message a sliding window of ``max_messages`` keeps.

    A window that covers the whole conversation keeps it all. Otherwise the cut is the
    :func:`pair_safe_cut` at or after ``len - max_messages`` with the user first (the Messages
    API wants the user first). Returns ``len(messages)`` when the window holds no such message.
    """
    start = max(0, len(messages) - max_messages)
    if start == 0:
        return 0
    cut = pair_safe_cut(messages, start, first_role="user")
    return len(messages) if cut is None else cut


def total_tokens(messages: Sequence[StoredMessage]) -> int | None:
    """Sum of cached token estimates, or None if any message has none."""
    total = 0
    for message in messages:
        if message.token_estimate is None:
            return None
        total += message.token_estimate
    return total


# ------------------------------------------------------------------ the layer


class LineageTransaction(Protocol):
    """What a backend exposes, inside ONE write transaction, for the seed layer to run in.

    Every call sees the same snapshot and holds the lineage against other writers until the
    transaction ends. Ids passed in are full ids except for :meth:`resolve`.
    """

    def resolve(self, ref: str) -> str:
        """The full id of the one session matching ``ref`` (an id or unique prefix)."""
        ...

    def newest_descendant(self, session_id: str) -> Session: ...

    def messages(self, session_id: str) -> list[StoredMessage]: ...

    def compaction_history(self, session_id: str) -> list[CompactionEntry]:
        """Every compaction of the session's lineage, oldest first."""
        ...

    def transition(
        self,
        parent: Session,
        *,
        messages: Sequence[NewMessage],
        strategy: str,
        messages_before: int | None,
        tokens_before: int | None,
        tokens_after: int | None,
        summary: str | None,
        metadata: Mapping[str, Any] | None,
        child_id: str | None,
        lease: Lease | None = None,
    ) -> Session:
        """The transition primitive: the same code as the backend's public ``transition``
        (``lease``: refused if another writer's live lease holds ``parent``; moved to the
        child)."""
        ...

    def record_without_child(
        self,
        session: Session,
        *,
        strategy: str,
        message_count: int,
        tokens: int | None,
        summary: str | None,
        lease: Lease | None = None,
    ) -> None:
        """Record a compaction that created no child (touches the session's ``updated_at``)."""
        ...


@dataclass(frozen=True, slots=True)
class Kept:
    """What a seed strategy keeps of the head: the child's messages (None: no child)."""

    messages: list[NewMessage] | None
    tokens_after: int | None


def keep(
    strategy: CompactionStrategy,
    head: Session,
    stored: Sequence[StoredMessage],
    summary: str | None,
) -> Kept:
    """Decide, without touching the store, what ``strategy`` keeps of the head's messages."""
    if strategy.kind == "none":
        return Kept(None, total_tokens(stored))
    if strategy.kind == "sliding_window":
        assert strategy.max_messages is not None
        start = sliding_window_start(stored, strategy.max_messages)
        if stored and start == len(stored):
            raise CompactionError(
                f"cannot keep the last {strategy.max_messages} messages of session "
                f"{head.id[:SHORT_LENGTH]}: no user message without tool_result starts "
                "a clean window; use a larger window or summarize"
            )
        return Kept([message.to_new() for message in stored[start:]], total_tokens(stored[start:]))
    if has_pending_tool_use(stored):
        raise CompactionError(
            f"cannot summarize session {head.id[:SHORT_LENGTH]} now: its last "
            "tool_use still awaits its tool_result"
        )
    assert summary is not None
    summary_message = NewMessage(
        role="user", content=[{"type": "text", "text": summary}], metadata={"kind": "summary"}
    )
    return Kept([summary_message], None)


def _check(strategy: object, summary: object) -> None:
    if not isinstance(strategy, CompactionStrategy):
        raise CompactionError(
            f"strategy must be a CompactionStrategy, not {type(strategy).__name__}"
        )
    if summary is not None:
        require_str("summary", summary)
    if strategy.kind == "summarize" and not (isinstance(summary, str) and summary.strip()):
        raise CompactionError(
            "the summarize strategy needs a summary: compact(session_id, "
            "CompactionStrategy.SUMMARIZE, summary='...')"
        )


def compact(
    write: Callable[[], AbstractContextManager[LineageTransaction]],
    session_id: str,
    strategy: CompactionStrategy,
    summary: str | None = None,
    *,
    lease: Lease | None = None,
) -> CompactionRecord:
    """``SessionStore.compact`` for any backend; ``write`` opens the backend's write transaction.

    Arguments are checked before the transaction starts, so a bad call never waits for a lock.
    """
    _check(strategy, summary)
    validate_session_ref(session_id)
    with write() as tx:
        sid = tx.resolve(session_id)
        head = tx.newest_descendant(sid)
        stored = tx.messages(head.id)
        kept = keep(strategy, head, stored, summary)
        tokens_before = total_tokens(stored)
        if kept.messages is None:
            tx.record_without_child(
                head,
                strategy=str(strategy),
                message_count=len(stored),
                tokens=tokens_before,
                summary=summary,
                lease=lease,
            )
        else:
            tx.transition(
                head,
                messages=kept.messages,
                strategy=str(strategy),
                messages_before=len(stored),
                tokens_before=tokens_before,
                tokens_after=kept.tokens_after,
                summary=summary,
                metadata=None,
                child_id=None,
                lease=lease,
            )
        return compaction_record(tx, sid)


def compaction_record(tx: LineageTransaction, session_id: str) -> CompactionRecord:
    """``SessionStore.get_compaction_record`` for any backend, inside one transaction."""
    history = tx.compaction_history(session_id)
    head = tx.newest_descendant(session_id)
    summaries = [entry.summary for entry in history if entry.summary is not None]
    return CompactionRecord.model_construct(
        compaction_count=len(history),
        last_compacted_at=max((entry.created_at for entry in history), default=None),
        summary=summaries[-1] if summaries else None,
        session_id=head.id,
        message_count=head.message_count,
    )


def get_compaction_record(
    read: Callable[[], AbstractContextManager[LineageTransaction]], session_id: str
) -> CompactionRecord:
    """``SessionStore.get_compaction_record`` for any backend; ``read`` opens a transaction."""
    validate_session_ref(session_id)
    with read() as tx:
        return compaction_record(tx, tx.resolve(session_id))
