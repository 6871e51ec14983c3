"""Server-side compaction (strategy ``server``): the Messages API's ``compact_20260112`` edit.

Every request carries the edit (:class:`ServerCompaction`). When a request's input reaches the
trigger, the API summarizes the conversation into a ``compaction`` block and, paused, stops
right after it (stop reason ``compaction``); from then on it ignores everything before the
block. The loop turns the block into a child session, as for every strategy (parent kept
whole, the same transition, notice and lineage). The child is::

    [R, assistant: [compaction block, *carried], last]

- ``R``, the latest user request verbatim. The API drops it (it comes before the block); it is
  there because a conversation opens with a user message (our validator's rule, and the API's
  for requests without a compaction block), and it tells a reader, and a later local
  compaction, what was being worked on.
- the compaction block, sent back verbatim (content, encrypted_content, signature). When the
  compaction came between tool rounds, the blocks of the assistant message that asked for the
  tools follow it (``carried``), so that
- ``last``, the message the compacted request ended with (the user's request, or the tool
  results), follows unchanged: the turn continues with an ordinary request, and the API sees
  the summary, then the most recent exchange (the documented way to keep recent messages after
  a compaction block). An exchange too large to carry (over half the trigger) is carried with
  its tool outputs pruned, as ``prune`` does; the parent keeps them whole.

Token figures are the API's: before is the input of the compaction iteration
(``usage.iterations``), after is what ``count_tokens`` counts for the child (the calibrated
estimate when the model cannot count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from agentloop._core.compaction.effects import CountTokens, NewSessionId, ReadClock, Steps, perform
from agentloop._core.compaction.results import (
    CompactionOutcome,
    CompactionSummary,
    CompactionTransition,
)
from agentloop._core.compaction.strategy import Meter
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.cutting.cut_and_prune import prune_tool_outputs, unbound_thinking
from agentloop._core.measuring.context import CompactionDecision, ContextUsage
from agentloop._core.values.blocks import is_compaction
from agentloop._core.values.messages import (
    COMPACTION,
    ContentBlock,
    Message,
    compaction_block,
    latest_user_request,
)
from agentloop._core.values.model import ModelRequest, ModelResponse, ServerCompaction
from agentloop._errors import ModelError

SERVER = "server"
"""The strategy's name, as the compaction record keeps it."""


def server_edit(core: Meter) -> ServerCompaction:
    """The edit every request of a conversation on strategy ``server`` carries: the loop's own
    trigger, and the standing instructions."""
    return ServerCompaction(
        trigger_tokens=core.trigger_tokens,
        instructions=server_instructions(core.settings.standing_instructions),
    )


def server_instructions(standing: str) -> str | None:
    """What the edit's ``instructions`` carry: None (the API's own prompt) unless there are
    standing instructions. The API's ``instructions`` replace its prompt entirely, so they
    come with agentloop's own summarizer prompt, not alone."""
    if not standing.strip():
        return None
    return f"{SUMMARIZER_SYSTEM}\n\nFollow these standing instructions too:\n{standing.strip()}"


def compacted_tokens(response: ModelResponse) -> int | None:
    """The context the API compacted: the input of the response's compaction iteration."""
    for iteration in response.iterations:
        if iteration.kind == COMPACTION:
            return iteration.usage.prompt_tokens
    return None


def server_child(
    parent: Sequence[Message], block: Mapping[str, object], *, prune: bool = False
) -> list[Message]:
    """The child's history after the API compacted ``parent`` into ``block`` (see above);
    ``prune`` shortens the tool outputs and inputs of the exchange carried after the block."""
    last = parent[-1]
    carried: tuple[ContentBlock, ...] = ()
    if last.is_tool_result and len(parent) > 1 and parent[-2].role == "assistant":
        # An older compaction block would win over the new one: never carried.
        carried = tuple(b for b in parent[-2].content if not is_compaction(b))
    request = latest_user_request(parent) or parent[0]
    opening = Message("user", request.content, pinned=request.pinned)
    tail = [Message("assistant", (dict(block), *carried)), replace(last, counted=None)]
    if prune:
        tail = prune_tool_outputs(tail, keep_from=len(tail))
    # The carried blocks' thinking was bound to the messages the block replaced.
    return unbound_thinking(parent, [opening, *tail])[0]


def server_compaction_steps(
    core: Meter,
    *,
    session_id: str,
    parent: Sequence[Message],
    response: ModelResponse,
    request: ModelRequest,
) -> Steps[CompactionOutcome]:
    """The transition to a child after the API paused on a compaction of ``parent`` (the
    messages ``request`` sent); ``response`` is that paused reply."""
    block = compaction_block(response.content)
    if block is None or not block.get("content"):
        raise ModelError("the API stopped for a compaction but sent no summary")
    edit = request.server_compaction
    trigger = edit.trigger_tokens if edit is not None else core.trigger_tokens
    before = compacted_tokens(response)
    if before is not None and any(i.usage.estimated for i in response.iterations):
        usage = ContextUsage(
            tokens=before, window=core.context_window, source="estimate", estimated_tokens=before
        )
    elif before is not None:
        usage = ContextUsage(
            tokens=before, window=core.context_window, source="api", reported_tokens=before
        )
    else:  # no iterations reported: what the loop measured for the request
        usage = core.measure(parent, system=request.system, tools=request.tools)
    decision = CompactionDecision(
        compact=True,
        reason=f"the API compacted the conversation at {usage.tokens:,} tokens "
        f"(trigger {trigger:,})",
        usage=usage,
        trigger_tokens=trigger,
        threshold=core.threshold,
    )
    child = server_child(parent, block)
    if sum(core.count(m) for m in child[1:]) > trigger // 2:
        # A large exchange carried verbatim would bring the next request back to the trigger.
        child = server_child(parent, block, prune=True)
    counted = yield from perform(
        CountTokens(replace(request, messages=tuple(child), metadata={"purpose": "count"}))
    )
    # What the API reads of the child: the compaction block onward, system and tools too.
    local = core.fixed_tokens(request.system, request.tools) + sum(core.count(m) for m in child[1:])
    if counted is not None:
        core.record_usage(counted, local, len(child) - 1)
        child[-1] = replace(child[-1], counted=counted)
        after, after_source = counted, "api"
    else:
        after, after_source = core.calibrate(local, len(child) - 1), "estimate"
    created_at = yield from perform(ReadClock())
    child_id = yield from perform(NewSessionId())
    summary = CompactionSummary(
        original_message_count=len(parent),
        compacted_message_count=len(child),
        tokens_before=usage.tokens,
        tokens_after=after,
        tokens_before_source=usage.source,
        tokens_after_source=after_source,
        summary=str(block["content"]),
        strategy=SERVER,
        model=core.model_name,
        created_at=created_at,
        reason=decision.reason,
    )
    transition = CompactionTransition(
        original_session_id=session_id,
        new_session_id=child_id,
        compacted_messages=child,
        summary=summary,
    )
    return CompactionOutcome(decision=decision, transition=transition)
