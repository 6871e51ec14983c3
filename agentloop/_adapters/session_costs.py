"""What a session and a whole conversation cost, from the usage the API reported and the store
kept: each reply's usage (on its message) and each compaction's summary requests (on the child
session it made). Copies are not billed twice: a compaction's verbatim tail loses its usage, and
a fork's copied messages keep the time they were first written, before the fork existed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from agentloop._adapters.records import USAGE_ESTIMATED
from agentloop._core.messages import Usage
from agentloop._core.pricing import NO_BILL, Bill, Price, bill
from agentloop._core.results import SUMMARY_USAGE
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
    summaries, calls = NO_BILL, 0
    recorded = session.metadata.get(SUMMARY_USAGE)
    if isinstance(recorded, dict):
        usage = Usage.from_mapping(recorded) or Usage()
        usage = replace(usage, estimated=recorded.get("estimated") is True)
        calls = int(recorded.get("calls") or 0)
        summaries = bill(usage, str(recorded.get("model") or session.model), prices)
    return CostReport(replies, summaries, requests, calls)


def conversation_cost(
    store: SessionStore, session_id: str, prices: Mapping[str, Price] | None = None
) -> tuple[CostReport, CostReport]:
    """What ``session_id`` was billed, and the conversation up to it: the session and its
    ancestors, across every compaction."""
    session = store.get_session(session_id)
    own = session_cost(store, session, prices)
    report = own
    for ancestor in store.ancestors(session.id):
        report = report + session_cost(store, ancestor, prices)
    return own, report
