"""What a compaction produces: its summary record, the transition to a child, the outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, InstanceOf

from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.measuring.figures import sources_metadata
from agentloop._core.values.messages import Message, MessageParam, Usage, to_params


class CompactionSummary(BaseModel):
    """What one compaction did: counts, tokens before/after, the summary and how it was made."""

    model_config = ConfigDict(frozen=True)

    original_message_count: int
    compacted_message_count: int
    tokens_before: int
    tokens_after: int
    tokens_before_source: str = "estimate"
    """Where ``tokens_before`` came from: ``api``, ``api+estimate`` or ``estimate``."""
    tokens_after_source: str = "estimate"
    """``api`` when the API counted the compacted context (``count_tokens``), else
    ``estimate`` (the calibrated local estimate): shown with ``~``."""
    summary: str
    strategy: str
    """The strategy that produced the result: summarize, digest, prune, sliding_window."""
    model: str
    created_at: datetime
    instructions: str | None = None
    fallback_reason: str | None = None
    """Why a deterministic digest replaced the model summary, if it did."""
    warnings: list[str] = []
    notes: list[str] = []
    """What the user may want to know that is no warning (a second summarizer call)."""
    reason: str = ""
    """Why compaction ran (the decision's reason)."""
    summary_calls: int = 0
    """Summarizer requests this compaction made (one in the common case)."""
    summary_usage: Usage = Usage()
    """What those requests used, as the API reported it (cache reads and writes included)."""
    summary_model: str | None = None
    """The model that wrote the summary, when it was not the conversation's."""
    summary_continued: bool = False
    """Whether the summary request continued the conversation (reading its prompt cache)
    rather than summarizing a rendered transcript."""
    prepared: bool = False
    """Whether the summary was prepared in the background before the trigger (the compaction
    itself then made no summarizer call; ``summary_calls`` and ``summary_usage`` count the
    background requests)."""
    discarded_calls: int = 0
    discarded_usage: Usage = Usage()
    """Background summary requests since the previous compaction whose result was thrown away
    (stale or superseded before it could be used), and what they used."""


SUMMARY_USAGE = "compaction_usage"
"""The child session's metadata key for what the summary requests of the compaction that made
it used (every transition sets it, so a child never inherits its parent's)."""


def child_metadata(summary: CompactionSummary) -> dict[str, Any]:
    """What a store keeps in the child session's metadata about the compaction that made it:
    where its token figures came from (the store's compaction entry keeps only the numbers) and
    what its summary requests used — every request billed since the previous compaction, those
    prepared in the background and thrown away included, so the cost shown is the whole bill."""
    usage = summary.summary_usage + summary.discarded_usage
    return {
        **sources_metadata(summary.tokens_before_source, summary.tokens_after_source),
        SUMMARY_USAGE: {
            **usage.to_dict(),
            **({"estimated": True} if usage.estimated else {}),  # no API counted it
            "calls": summary.summary_calls + summary.discarded_calls,
            "model": summary.summary_model or summary.model,
            "continued": summary.summary_continued,
            "prepared": summary.prepared,
            "discarded_calls": summary.discarded_calls,
        },
    }


class CompactionTransition(BaseModel):
    """The compacted history and the child session it continues under."""

    model_config = ConfigDict(frozen=True)

    original_session_id: str
    new_session_id: str
    compacted_messages: list[InstanceOf[Message]]
    summary: CompactionSummary

    @property
    def child_metadata(self) -> dict[str, Any]:
        """What to keep in the child session's metadata when storing this transition yourself
        (``store.transition(..., metadata=transition.child_metadata)``): the figures' sources
        and the summary requests' usage, as agentloop's own loop stores them."""
        return child_metadata(self.summary)

    @property
    def compacted_params(self) -> list[MessageParam]:
        """The compacted history exactly as the Messages API takes it."""
        return to_params(self.compacted_messages)


class CompactionOutcome(BaseModel):
    """What one compaction attempt came to: the decision, and the transition or why none."""

    model_config = ConfigDict(frozen=True)

    decision: CompactionDecision
    transition: CompactionTransition | None = None
    skipped: str | None = None
    """Why nothing was compacted although the decision said to (nothing to cut, no savings)."""
    later: InstanceOf[Message] | None = None
    """What the child carries but cannot place yet (it ends with a reply): it goes after the
    next user message (a loop's compacter holds it, ``ConversationCompacter.next_turn``)."""

    @property
    def explanation(self) -> str:
        """One line for a user: what happened and why."""
        if self.transition is not None:
            summary = self.transition.summary
            return (
                f"compacted {summary.original_message_count} → "
                f"{summary.compacted_message_count} messages"
            )
        return self.skipped or self.decision.reason


class CompactionPlan(BaseModel):
    """What a compaction would do now, worked out without a model call and without writing
    (``/compact --dry-run``). Token figures are calibrated local estimates."""

    model_config = ConfigDict(frozen=True)

    decision: CompactionDecision
    strategy: str
    """What would run: ``prune``, ``summarize``, ``digest``, ``sliding_window`` or ``none``."""
    summarized_messages: int = 0
    summarized_tokens: int = 0
    """The messages the summary (or the sliding window's note) would replace, and their size."""
    pruned_messages: int = 0
    pruned_tokens: int = 0
    """Messages whose old tool outputs, inputs or media would become markers, and the saving."""
    verbatim_messages: int = 0
    verbatim_tokens: int = 0
    """The recent tail kept word for word."""
    pinned_messages: int = 0
    request_carried: bool = False
    """Whether the latest request would be carried in the prefix (it is in the replaced part)."""
    preserved_state: str = ""
    preserved_sections: list[str] = []
    """The preserved-state hooks that gave something (by name)."""
    warnings: list[str] = []
    expected_tokens_after: int = 0
    """About what the next request would hold; with a summary, its size at the longest."""
    expected_tokens_low: int = 0
    """The same with the shortest summary: with one to write the preview is a range (this to
    ``expected_tokens_after``), without one a single estimate (both equal)."""
    summary_allowance: int = 0
    """The most the summary may take (0: no summary would be written)."""
    note: str = ""
    """Why nothing would be compacted, when nothing would."""
