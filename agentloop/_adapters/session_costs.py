"""What a session and a whole conversation cost, from the usage the API reported and the store
kept: each reply's usage (on its message) and each compaction's summary requests (on the child
session it made). Copies are not billed twice: a compaction's verbatim tail loses its usage, and
a fork's copied messages keep the time they were first written, before the fork existed.

The whole conversation is its lineage: the path to the session, and the branches off it (an
undone compaction's child, a fork), whose requests were billed all the same. Summary requests
whose summary was never applied (a review redone or aborted, a prepared summary gone stale) are
kept under :data:`DISCARDED_USAGE`, keyed by the session they were made in (children and forks
copy metadata: only a session's own entry is its bill)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from agentloop._adapters.records import USAGE_ESTIMATED
from agentloop._core.compaction.results import SUMMARY_USAGE
from agentloop._core.measuring.pricing import NO_BILL, Bill, Price, bill
from agentloop._core.values.messages import Usage
from agentloop._sessions import Session, SessionStore


@dataclass(frozen=True, slots=True)
class CostReport:
    """The bill of one session, or of a conversation across its compactions."""

    replies: Bill
    """The conversation's own requests."""
    summaries: Bill
    """Summary requests of compactions (in the background too)."""
    requests: int
    summary_requests: int
    sessions: int = 1
    discarded_requests: int = 0
    """Of ``summary_requests``: those whose summary was never applied (a review redone or
    aborted, a summary prepared ahead that went stale)."""
    off_path_requests: int = 0
    """Of ``summary_requests``: those of compactions on other branches (undone, forked from)."""
    off_path_sessions: int = 0
    """Of ``sessions``: those on other branches (an undone compaction's child, a fork)."""

    @property
    def total(self) -> Bill:
        return self.replies + self.summaries

    def __add__(self, other: CostReport) -> CostReport:
        return CostReport(
            self.replies + other.replies,
            self.summaries + other.summaries,
            self.requests + other.requests,
            self.summary_requests + other.summary_requests,
            self.sessions + other.sessions,
            self.discarded_requests + other.discarded_requests,
            self.off_path_requests + other.off_path_requests,
            self.off_path_sessions + other.off_path_sessions,
        )

    def off_path(self) -> CostReport:
        """The same bill, as a branch off the path to the session it is reported for."""
        return replace(
            self,
            discarded_requests=0,
            off_path_requests=self.summary_requests,
            off_path_sessions=self.sessions,
        )

    def to_dict(self) -> dict[str, object]:
        """For JSON output: the API's token figures, the cache-read share and the price."""
        total = self.total
        return {
            **total.usage.to_dict(),
            "cache_read_share": round(total.cache_read_share, 4),
            "billed_input_ratio": round(total.billed_input_ratio, 4),
            "cost_usd": round(total.dollars, 6),
            "cost_is_estimate": total.estimated or total.usage.estimated,
            "requests": self.requests,
            "summary_requests": self.summary_requests,
            "summary_cost_usd": round(self.summaries.dollars, 6),
            "discarded_summary_requests": self.discarded_requests,
            "sessions": self.sessions,
        }


def session_cost(
    store: SessionStore, session: Session | str, prices: Mapping[str, Price] | None = None
) -> CostReport:
    """What ``session`` itself was billed: its replies and the summary that created it."""
    if isinstance(session, str):
        session = store.get_session(session)
    replies, requests = NO_BILL, 0
    for message in store.get_messages(session.id):
        if message.role != "assistant" or not message.usage:
            continue
        if message.created_at < session.created_at:  # a fork's copy, billed where it was made
            continue
        usage = Usage.from_mapping(message.usage) or Usage()
        if message.metadata.get(USAGE_ESTIMATED) is True:  # the model's guess, no API count
            usage = replace(usage, estimated=True)
        replies = replies + bill(usage, session.model, prices)
        requests += 1
    summaries, calls, discarded = NO_BILL, 0, 0
    recorded = session.metadata.get(SUMMARY_USAGE)
    if isinstance(recorded, dict):
        usage = Usage.from_mapping(recorded) or Usage()
        usage = replace(usage, estimated=recorded.get("estimated") is True)
        calls = int(recorded.get("calls") or 0)
        discarded = int(recorded.get("discarded_calls") or 0)
        summaries = bill(usage, str(recorded.get("model") or session.model), prices)
    own = session.metadata.get(DISCARDED_USAGE)
    own = own.get(session.id) if isinstance(own, dict) else None
    if isinstance(own, dict):
        usage = Usage.from_mapping(own) or Usage()
        usage = replace(usage, estimated=own.get("estimated") is True)
        summaries = summaries + bill(usage, str(own.get("model") or session.model), prices)
        calls += int(own.get("calls") or 0)
        discarded += int(own.get("calls") or 0)
    return CostReport(replies, summaries, requests, calls, discarded_requests=discarded)


DISCARDED_USAGE = "discarded_summaries"
"""Session metadata: ``{session id: usage and calls}`` of summary requests made in that session
whose summary was never applied, stored when they are discarded."""


def record_discarded(
    store: SessionStore, session_id: str, usage: Usage, calls: int, model: str
) -> None:
    """Add ``calls`` discarded summary requests (``usage``) to ``session_id``'s own bill."""
    session = store.get_session(session_id)
    kept = session.metadata.get(DISCARDED_USAGE)
    entry = kept.get(session.id) if isinstance(kept, dict) else None
    before = Usage.from_mapping(entry) if isinstance(entry, dict) else None
    total = (before or Usage()) + usage
    previous_calls = int(entry.get("calls") or 0) if isinstance(entry, dict) else 0
    value = {
        **total.to_dict(),
        **({"estimated": True} if total.estimated else {}),
        "calls": previous_calls + calls,
        "model": model,
    }
    # Only this session's entry: what a parent's copy says is the parent's bill.
    store.update_session(session.id, metadata={DISCARDED_USAGE: {session.id: value}})


def conversation_cost(
    store: SessionStore, session_id: str, prices: Mapping[str, Price] | None = None
) -> tuple[CostReport, CostReport]:
    """What ``session_id`` was billed, and the whole conversation: every session of its
    lineage, the path to it (across every compaction) and the branches off it."""
    session = store.get_session(session_id)
    own = session_cost(store, session, prices)
    report = own
    path = {session.id, *(ancestor.id for ancestor in store.ancestors(session.id))}
    for other in store.lineage(session.id):
        if other.id == session.id:
            continue
        cost = session_cost(store, other, prices)
        report = report + (cost if other.id in path else cost.off_path())
    return own, report
