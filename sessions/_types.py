"""The values the store takes and returns (pydantic v2; they cross the store boundary).

Every datetime is timezone-aware UTC: naive datetimes given to the store are taken as UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field


def _to_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _text_to_blocks(value: Any) -> Any:
    # The Messages API also takes a bare string; store the equivalent block list so readers
    # always get one shape.
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return value


UtcDatetime: TypeAlias = Annotated[datetime, AfterValidator(_to_utc)]
Role: TypeAlias = Literal["user", "assistant"]
SessionStatus: TypeAlias = Literal["active", "compacted"]
ContentBlocks: TypeAlias = Annotated[list[dict[str, Any]], BeforeValidator(_text_to_blocks)]


class Session(BaseModel):
    """One conversation. A compacted conversation continues in a child session (``parent_id``).

    ``status`` is ``"compacted"`` once a child continues it; its messages stay as they were.
    ``workspace`` is the resolved absolute path of the directory the session ran in.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    parent_id: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    model: str
    title: str | None = None
    workspace: str
    status: SessionStatus = "active"
    message_count: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def short_id(self) -> str:
        """The 8-character id prefix the UI shows."""
        return self.id[:8]


class NewMessage(BaseModel):
    """A message to append: the Messages API payload plus what the store keeps beside it.

    ``content`` is the list of content blocks exactly as the Messages API takes them (a bare
    string becomes one text block). ``metadata`` is opaque JSON for the caller (agentloop keeps
    flags such as ``pinned`` there). ``created_at`` defaults to the time of the append.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    role: Role
    content: ContentBlocks
    token_estimate: int | None = None
    usage: dict[str, int] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime | None = None

    def to_param(self) -> dict[str, Any]:
        """The message as the Messages API takes it."""
        return {"role": self.role, "content": self.content}


class StoredMessage(BaseModel):
    """A message as stored: ``seq`` is its 0-based position within its session."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    seq: int
    role: Role
    content: ContentBlocks
    token_estimate: int | None = None
    usage: dict[str, int] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime

    def to_param(self) -> dict[str, Any]:
        """The message as the Messages API takes it."""
        return {"role": self.role, "content": self.content}

    def to_new(self) -> NewMessage:
        """The same message, ready to be appended elsewhere (e.g. to a continuing child)."""
        return NewMessage(
            role=self.role,
            content=self.content,
            token_estimate=self.token_estimate,
            usage=self.usage,
            metadata=self.metadata,
            created_at=self.created_at,
        )


class CompactionEntry(BaseModel):
    """One compaction in a lineage's history.

    ``child_id`` is the session that continues the conversation; it is None for a compaction
    that changed nothing (``CompactionStrategy.NONE``), which is still recorded.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    parent_id: str
    child_id: str | None
    created_at: UtcDatetime
    strategy: str
    messages_before: int
    messages_after: int
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None


class CompactionRecord(BaseModel):
    """Compaction state of a whole lineage (the root session and all its descendants).

    ``summary`` is the newest summary recorded in the lineage. ``session_id`` and
    ``message_count`` describe the session where the conversation continues (the newest
    descendant).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    compaction_count: int = 0
    last_compacted_at: UtcDatetime | None = None
    summary: str | None = None
    session_id: str | None = None
    message_count: int | None = None


class Lease(BaseModel):
    """One writer's claim on a session (see :meth:`SessionStore.acquire_lease`).

    The lease is identified by its ``token``: after a transition made with it, the same token
    holds the child, and :meth:`SessionStore.renew_lease` returns the lease with the child's
    ``session_id``.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    owner: str
    token: str
    expires_at: UtcDatetime
    ttl: float = 30.0


class Conversation(BaseModel):
    """One lineage as ``sessions list`` shows it: where it continues and how deep it is.

    ``head`` is the newest descendant of the root (where resuming continues); ``generations``
    is the head's depth in the lineage (0: the root itself); ``sessions`` counts every session
    of the lineage, forks included; ``updated_at`` is the lineage's last activity.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    head: Session
    root_id: str
    generations: int
    sessions: int
    updated_at: UtcDatetime


class LineageExport(BaseModel):
    """Everything stored about one lineage, as :func:`copy_store` moves it between stores.

    ``sessions`` are parents before children; ``messages`` maps a session id to its messages
    in order; ``compactions`` is the lineage's history, oldest first.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    root_id: str
    sessions: list[Session]
    messages: dict[str, list[StoredMessage]]
    compactions: list[CompactionEntry]


class CopyReport(BaseModel):
    """What :func:`copy_store` (or one ``import_lineages`` call) did: rows copied, and rows the
    target already held (a second copy of the same data copies nothing)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    lineages: int = 0
    sessions_copied: int = 0
    sessions_present: int = 0
    messages_copied: int = 0
    messages_present: int = 0
    compactions_copied: int = 0
    compactions_present: int = 0

    def __add__(self, other: CopyReport) -> CopyReport:
        return CopyReport.model_construct(
            **{name: getattr(self, name) + getattr(other, name) for name in CopyReport.model_fields}
        )


class SearchHit(BaseModel):
    """A stored message that matches a search (:meth:`SessionStore.search_messages`).

    ``seq`` is the message's 0-based position in session ``session_id`` (``sessions show``
    numbers it ``seq + 1``); ``tool_name`` names the tool when the excerpt is a tool call's
    input or a tool's result; ``excerpt`` is one line around the first matching word.
    ``root_id``, ``title`` and ``workspace`` say which conversation said it.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    seq: int
    role: Role
    created_at: UtcDatetime
    tool_name: str | None = None
    excerpt: str
    root_id: str
    title: str | None = None
    workspace: str
