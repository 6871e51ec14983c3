"""Conversion between agentloop's messages and the session store's records (the storage seam)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentloop._core.compaction.effects import AppendMessages, CreateSession, SaveTransition
from agentloop._core.compaction.results import SUMMARY_USAGE, child_metadata
from agentloop._core.measuring.figures import TOKEN_SOURCES
from agentloop._core.values.carried import Carried
from agentloop._core.values.messages import Message, MessageParam, SummaryInfo, Usage
from agentloop._sessions import Lease, NewMessage, SessionStore, StoredMessage

COUNTED = "counted"
"""The message metadata key of the API's token count up to that message (``Message.counted``)."""
USAGE_ESTIMATED = "usage_estimated"
"""The message metadata key that marks its usage as a model's local estimate, not the API's
count (``Usage.estimated``): the stored usage keeps the API's shape, the mark says what it is."""
CARRIED = "carried"
"""The message metadata key of what a carried message's text renders (``Message.carried``), so
that reading the message back reads no text of agentloop's."""
ROLE = "role"
"""The message metadata key that marks a mid-conversation system message: the store takes the
roles of user and assistant turns, so one is kept as a ``user`` record marked ``system``."""


def _summary_to_dict(info: SummaryInfo) -> dict[str, Any]:
    return {
        "text": info.text,
        "pinned": [_message_to_dict(m) for m in info.pinned],
        "request": None if info.request is None else _message_to_dict(info.request),
        "replaced_count": info.replaced_count,
        "replaced_here": info.replaced_here,
        "parent_count": info.parent_count,
    }


def _message_to_dict(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": list(message.content), "pinned": message.pinned}


def _message_from_dict(data: dict[str, Any]) -> Message:
    param: MessageParam = {"role": data["role"], "content": data["content"]}
    return Message.from_param(param, pinned=bool(data.get("pinned")))


def _summary_from_dict(data: dict[str, Any]) -> SummaryInfo:
    request = data.get("request")
    return SummaryInfo(
        text=str(data.get("text", "")),
        pinned=tuple(_message_from_dict(m) for m in data.get("pinned", ())),
        request=None if request is None else _message_from_dict(request),
        replaced_count=int(data.get("replaced_count", 0)),
        replaced_here=int(data.get("replaced_here", 0)),
        parent_count=int(data.get("parent_count", 0)),
    )


def to_record(message: Message) -> NewMessage:
    """A message as the store keeps it: API content as-is, agentloop flags in metadata."""
    metadata: dict[str, Any] = {}
    if message.pinned:
        metadata["pinned"] = True
    if message.summary is not None:
        metadata["summary"] = _summary_to_dict(message.summary)
    if message.carried is not None:  # the parts its text renders, kept beside it
        metadata[CARRIED] = message.carried.to_dict()
    if message.counted is not None:
        metadata[COUNTED] = message.counted
    if message.usage is not None and message.usage.estimated:
        metadata[USAGE_ESTIMATED] = True
    role = message.role
    if role == "system":
        metadata[ROLE], role = "system", "user"
    # A Message is already a valid shape: constructing without re-validation keeps a
    # compaction's child (hundreds of messages) cheap to save.
    return NewMessage.model_construct(
        role=role,
        content=list(message.content),
        token_estimate=message.tokens,
        usage=None if message.usage is None else message.usage.to_dict(),
        metadata=metadata,
        created_at=None,
    )


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def from_record(record: StoredMessage) -> Message:
    """A stored message back as a :class:`Message`, with its cached estimate and usage."""
    summary = record.metadata.get("summary")
    usage = Usage.from_mapping(record.usage)
    if usage is not None and record.metadata.get(USAGE_ESTIMATED) is True:
        usage = replace(usage, estimated=True)
    return Message(
        role="system" if record.metadata.get(ROLE) == "system" else record.role,
        content=tuple(dict(block) for block in record.content),
        pinned=bool(record.metadata.get("pinned")),
        tokens=record.token_estimate,
        usage=usage,
        counted=_positive(record.metadata.get(COUNTED)),
        summary=None if summary is None else _summary_from_dict(summary),
        carried=Carried.from_dict(record.metadata.get(CARRIED)),
    )


def perform_store_effect(
    store: SessionStore,
    effect: CreateSession | AppendMessages | SaveTransition,
    *,
    lease: Lease | None = None,
    lease_owner: str | None = None,
) -> Lease | None:
    """Carry out one store effect of the core (the only place that maps them to store calls).

    Writes carry ``lease`` (one writer per session: the store refuses another's). A session
    created here is leased to ``lease_owner`` when one is given. Returns the lease to use next.
    """
    if isinstance(effect, CreateSession):
        store.create_session(
            session_id=effect.session_id,
            model=effect.model,
            workspace=effect.workspace,
            title=effect.title,
        )
        if lease_owner is not None:
            return store.acquire_lease(effect.session_id, owner=lease_owner)
    elif isinstance(effect, AppendMessages):
        store.append_messages(
            effect.session_id, [to_record(m) for m in effect.messages], lease=lease
        )
    else:
        transition = effect.transition
        summary = transition.summary
        store.transition(
            transition.original_session_id,
            messages=[to_record(m) for m in transition.compacted_messages],
            strategy=effect.strategy,
            messages_before=summary.original_message_count,
            tokens_before=summary.tokens_before,
            tokens_after=summary.tokens_after,
            summary=summary.summary,
            metadata=child_metadata(summary),
            child_id=transition.new_session_id,
            lease=lease,  # the same lease holds the child from now on
        )
    return lease


def fork_session(store: SessionStore, session_id: str) -> str:
    """A new branch of the lineage that continues from ``session_id`` as it is: a child holding
    a copy of its messages. ``session_id`` and its other children stay as they are, whoever
    holds them (to undo a compaction, fork the uncompacted parent). Returns the new id."""
    source = store.get_session(session_id)
    messages = store.get_messages(source.id)
    fork = store.create_session(
        model=source.model,
        workspace=source.workspace,
        title=source.title,
        parent_id=source.id,
        # What the source's own compaction cost is billed to the source, not again to its fork.
        # (nor its compaction's figures: a fork is no compaction)
        metadata={
            k: v for k, v in source.metadata.items() if k not in (SUMMARY_USAGE, TOKEN_SOURCES)
        },
    )
    store.append_messages(fork.id, [message.to_new() for message in messages])
    return fork.id
