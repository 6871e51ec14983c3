"""Summaries prepared ahead, in the background, so a compaction at the trigger needs no model call.

Past an early mark (``CompactionSettings.prepare_at`` of the trigger) the loop sends one summary
request in the background: the request that continues the cached conversation (see
``summary.py``), covering the history as it is then. As the conversation grows it is brought up
to date (``refresh_at``), anchored on the summary so far. At the trigger the child is the newest
prepared summary plus everything after what it covers, verbatim.

This module holds the values and the bookkeeping, all pure: what a prepared summary covers
(:class:`PreparedSummary`), what is in flight (:class:`PrepareJob`), and the counts a user sees
(:class:`PrepareLedger`: started, applied, discarded and what they cost). A prepared summary is
only ever applied to the conversation it was made for, unchanged up to its cut, under the same
settings; anything else discards it, and the discard is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloop._core.compaction.api_compaction import (
    api_instructions,
    compaction_request,
    response_block,
    response_usage,
)
from agentloop._core.compaction.summary import (
    NotASummary,
    continuing_summary_request,
    summary_instruction,
    summary_text,
)
from agentloop._core.cutting.cut_and_prune import Split
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.messages import ContentBlock, Message, Usage, is_safe_boundary
from agentloop._core.values.model import ModelRequest, ModelResponse
from agentloop._core.values.settings import CompactionSettings
from agentloop._errors import CompactionFailed

SettingsKey = tuple[object, ...]
"""What a summary depends on besides the messages: the model, the summarizer, instructions."""


@dataclass(frozen=True, slots=True)
class PrepareJob:
    """A summary request sent in the background, and what its answer will cover."""

    session_id: str
    covered: tuple[Message, ...]
    key: SettingsKey
    tokens: int
    """The context's size (API units) when it was sent."""
    request: ModelRequest


@dataclass(frozen=True, slots=True)
class PreparedSummary:
    """A summary of ``covered`` (a prefix of the conversation ``session_id``), ready to apply."""

    session_id: str
    covered: tuple[Message, ...]
    key: SettingsKey
    tokens: int
    text: str
    block: ContentBlock | None = None
    """The API's compaction block, when the API wrote the summary (on-demand compaction):
    the swap replaces exactly ``covered`` by it and keeps every turn appended since."""

    def fits(self, session_id: str, messages: Sequence[Message], key: SettingsKey) -> str | None:
        """None when this summary may be applied to ``messages``; else why it is stale."""
        return _stale(self.session_id, self.covered, self.key, session_id, messages, key)


@dataclass
class Preparation:
    """The newest prepared summary (``ready``) and what preparing summaries did and cost, for
    the notice, ``/context`` and ``/cost``."""

    ready: PreparedSummary | None = None
    started: int = 0
    since_compaction: int = 0
    """Requests started since the last compaction (:func:`next_job` allows two)."""
    applied: int = 0
    discarded: int = 0
    failed: int = 0
    cancelled: int = 0
    """Requests stopped while in flight (Ctrl-C, the session ended): what they cost is not known."""
    not_applied: int = 0
    """Compactions worked out and not applied (a review redone or aborted): their summary
    requests were billed; their usage is counted with the discarded ones'."""
    fallbacks: int = 0
    """Compactions at the trigger that could not use a prepared summary and summarized then."""
    spent: Usage = field(default_factory=Usage)
    """Usage of background requests since the last compaction (applied or superseded)."""
    calls: int = 0
    discarded_usage: Usage = field(default_factory=Usage)
    discarded_calls: int = 0
    last_discard: str | None = None
    _unreported: tuple[Usage, int] = (Usage(), 0)

    def record(self, usage: Usage) -> None:
        self.spent = self.spent + usage
        self.calls += 1

    def accept(
        self,
        job: PrepareJob,
        answer: ModelResponse | BaseException,
        session_id: str,
        msgs: Sequence[Message],
        key: SettingsKey,
    ) -> str | None:
        """Keep the answer to ``job`` as ``ready``; else why not (a failure, no summary, or
        what it covers changed since it was sent: then it is discarded, counted)."""
        if isinstance(answer, BaseException):
            self.failed += 1
            return f"the background summary failed ({type(answer).__name__}: {answer})"
        on_demand = job.request.compaction is not None
        self.record(response_usage(answer) if on_demand else answer.usage)
        stale = _stale(job.session_id, job.covered, job.key, session_id, msgs, key)
        block: ContentBlock | None = None
        try:
            if on_demand:  # any stop reason but ``compaction`` is a failure: history kept
                block = response_block(answer)
                text = str(block["content"])
            else:
                text = summary_text(answer)
        except (NotASummary, CompactionFailed) as error:
            stale = stale or str(error)
        if stale is not None:
            self.discard(stale)
            return stale
        self.ready = PreparedSummary(
            job.session_id, job.covered, job.key, job.tokens, text, block=block
        )
        return None

    def usable(
        self,
        session_id: str,
        msgs: Sequence[Message],
        key: SettingsKey,
        instructions: str | None,
    ) -> PreparedSummary | None:
        """``ready`` when a compaction of ``msgs`` may apply it; else None (a stale one is
        discarded, counted)."""
        ready = self.ready
        if ready is None:
            return None
        why = "the compaction has its own instructions" if instructions else None
        why = why or ready.fits(session_id, msgs, key)
        if why is not None:
            self.discard(why)
            return None
        return ready

    def discard(self, reason: str) -> None:
        """The prepared work since the last compaction is thrown away (counted, with its cost)."""
        if self.ready is None and not self.calls:
            return
        self.ready = None
        self.discarded += 1
        self.discarded_usage = self.discarded_usage + self.spent
        self.discarded_calls += self.calls
        usage, calls = self._unreported
        self._unreported = (usage + self.spent, calls + self.calls)
        self.spent, self.calls = Usage(), 0
        self.last_discard = reason

    def count_discarded(self, usage: Usage, calls: int, reason: str) -> None:
        """Summary requests made for a compaction that was not applied (a reviewed one the
        user dropped): counted apart from the background's (``not_applied``), with what they
        used, beside the discarded ones' cost."""
        self.not_applied += 1
        self.discarded_usage = self.discarded_usage + usage
        self.discarded_calls += calls
        unreported, count = self._unreported
        self._unreported = (unreported + usage, count + calls)
        self.last_discard = reason

    def take(self) -> tuple[Usage, int]:
        """The usage and calls of the prepared work a compaction applies (then reset)."""
        spent, calls = self.spent, self.calls
        self.spent, self.calls, self.ready = Usage(), 0, None
        self.applied += 1
        return spent, calls

    def take_discarded(self) -> tuple[Usage, int]:
        """What was discarded since the last time a compaction reported it (then reset)."""
        taken, self._unreported = self._unreported, (Usage(), 0)
        self.since_compaction = 0  # called once by each compaction
        return taken


MAX_PREPARED = 2
"""Summary requests prepared ahead between two compactions: the first and one refresh."""


ROOM_FOR_A_SUMMARY = 1024
"""The least ``max_tokens`` a summary prepared ahead is asked with when the full one does not fit
beside the history (a paste close to the trigger): less would cut most summaries short."""


def next_job(
    session_id: str,
    msgs: Sequence[Message],
    decision: CompactionDecision,
    *,
    settings: CompactionSettings,
    model_name: str,
    window: int,
    key: SettingsKey,
    ready: PreparedSummary | None,
    system: str,
    tools: Sequence[dict[str, Any]],
    count_text: Callable[[str], int],
    on_demand: bool = False,
    fixed: int = 0,
    started: int = 0,
) -> PrepareJob | None:
    """The background summary request due for ``msgs`` now, or None. Due past the early mark
    (``prepare_at`` of the trigger, and at least ``refresh_at`` of the room the trigger leaves
    beside the system prompt and tools, ``fixed``: with a large fixed prefix a summary of
    almost nothing would be thrown away) and below the trigger, once, then once more
    (``started``: requests since the last compaction; at most two a compaction) when
    ``refresh_at`` of the trigger was added after what the prepared summary covers. Only for a
    history a summary can continue: at a safe boundary, ending with a user turn, on the
    conversation's own model, with room for the request."""
    if (
        settings.prepare_at is None
        or not settings.enabled
        or settings.summary_model not in (None, model_name)
        or not msgs
        or msgs[-1].role != "user"
        or not is_safe_boundary(msgs)
    ):
        return None
    tokens, trigger = decision.usage.tokens, decision.trigger_tokens
    room = trigger - fixed
    if started >= MAX_PREPARED or room <= 0:
        return None  # the prepared one and one refresh; or no room beside the fixed prefix
    mark = max(trigger * settings.prepare_at, fixed + room * settings.refresh_at)
    if decision.compact or not mark <= tokens < trigger:
        return None
    so_far = None
    if ready is not None and ready.fits(session_id, msgs, key) is None:
        if tokens - ready.tokens < trigger * settings.refresh_at:
            return None
        so_far = ready.text
    if on_demand:  # the API summarizes the history as it stands (see api_compaction.py)
        full = max(1024, min(settings.summary_max_tokens, window // 4))
        max_tokens = min(full, window - tokens)  # a paste near the trigger: the room left
        if max_tokens < min(full, ROOM_FOR_A_SUMMARY):
            return None
        request = compaction_request(
            msgs,
            model_name=model_name,
            system=system,
            tools=tools,
            max_tokens=max_tokens,
            instructions=api_instructions(settings.standing_instructions, None),
            background=True,
        )
        return PrepareJob(session_id, tuple(msgs), key, tokens, request)
    full = max(256, min(settings.summary_max_tokens, window // 4))
    instruction = summary_instruction(
        settings.standing_instructions, updates_previous=True, so_far=so_far
    )
    max_tokens = min(full, window - tokens - count_text(instruction))
    if max_tokens < min(full, ROOM_FOR_A_SUMMARY):
        return None  # it would not fit: the compaction at the trigger summarizes
    request = continuing_summary_request(
        msgs,
        model_name=model_name,
        system=system,
        tools=tools,
        max_tokens=max_tokens,
        instructions=settings.standing_instructions,
        so_far=so_far,
        background=True,
    )
    return PrepareJob(session_id, tuple(msgs), key, tokens, request)


def prepared_cut(messages: Sequence[Message], covered: int) -> Split | None:
    """Where the child's verbatim tail starts for a summary of ``messages[:covered]``: the last
    assistant message at or before ``covered`` (a tool_result never leaves its tool_use), so
    nothing after what the summary covers is dropped. None when there is no such cut."""
    for index in range(min(covered, len(messages) - 1), 0, -1):
        if messages[index].role == "assistant":
            return Split(index)
    return None


def _stale(
    made_for: str,
    covered: tuple[Message, ...],
    made_under: SettingsKey,
    session_id: str,
    messages: Sequence[Message],
    key: SettingsKey,
) -> str | None:
    if made_for != session_id:
        return "the conversation moved to another session"
    if made_under != key:
        return "the model or the compaction settings changed"
    if len(messages) < len(covered):
        return "messages it covers were removed"
    for mine, theirs in zip(covered, messages, strict=False):
        # What was said, not the bookkeeping (token counts and usage are added as it goes).
        if mine is not theirs and (mine.role, mine.content) != (theirs.role, theirs.content):
            return "a message it covers was changed"
    return None
