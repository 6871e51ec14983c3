"""The compaction preview: what a compaction would do, with no model call and no write.

It runs the compaction's own strategy under the same :class:`~.strategy.Budget`
through a :class:`~.strategy.PreviewJob`: candidates are measured by the local
estimate, scaled by what the API's last figure says of it, and the summary, not written yet, is
taken at both ends of its possible size. A preview that needs a summary therefore gives a
range (``expected_tokens_low`` to ``expected_tokens_after``); one that needs none (pruning, a
sliding window, a digest) gives one estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agentloop._core.compaction.effects import RunHooks, Steps, perform
from agentloop._core.compaction.results import CompactionPlan
from agentloop._core.compaction.strategy import Budget, Built, Meter, PreviewJob, cut_points
from agentloop._core.cutting.cut_and_prune import carried_items
from agentloop._core.facts.preserved_state import with_ledger
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.messages import Message

ESTIMATE_ERROR = 0.15
"""How far a local estimate may be from the API's count, for the preview's range."""
NOTHING = "none"
"""The plan's strategy when nothing would be compacted."""


def plan_steps(
    meter: Meter,
    msgs: Sequence[Message],
    *,
    system: str,
    tools: Sequence[dict[str, Any]],
    force: bool,
) -> Steps[CompactionPlan]:
    """The preview; it only runs the preserved-state hooks (to show their state)."""
    decision = meter.should_compact(msgs, system=system, tools=tools, force=force)
    if not decision.compact:
        return CompactionPlan(decision=decision, strategy=NOTHING, note=decision.reason)
    strategy = meter.strategy.runs_as()
    budget = Budget.of(decision, meter.settings, meter.context_window)
    cuts = cut_points(meter, msgs, budget, strategy)
    if cuts is None:
        note = "nothing to compact: no safe cut point"
        return CompactionPlan(decision=decision, strategy=NOTHING, note=note)
    hooks = yield from perform(RunHooks(tuple(meter.hooks)))
    hooks = with_ledger(hooks, msgs, meter, cuts[1].tail_start)
    scale = _scale(meter, msgs, decision, system, tools)

    def job(allowance: int, target: float) -> PreviewJob:
        return PreviewJob(
            meter,
            msgs,
            decision,
            budget=replace(budget, target=int(budget.target * target)),
            split=cuts[0],
            smallest=cuts[1],
            state=hooks.state,
            system=system,
            tools=tools,
            allowance=allowance,
            scale=scale,
        )

    central = job(0, 1.0)
    planned = yield from strategy.build(central)
    if isinstance(planned, str):
        return CompactionPlan(decision=decision, strategy=NOTHING, note=planned)
    # Where an estimate decides (is the target reached?), the API's count may decide the other
    # way: the strategy also runs as if the estimates were ESTIMATE_ERROR lower and higher,
    # the higher with the longest summary, when there is one to write.
    cap = summary_cap(meter) if central.asked_summary else 0
    ends = [job(0, 1 + ESTIMATE_ERROR), job(cap, 1 - ESTIMATE_ERROR)]
    figures = [planned.measured.tokens]
    for end in ends:
        built = yield from strategy.build(end)
        if not isinstance(built, str):
            figures.append(built.measured.tokens)
            if built.label != planned.label:
                end.warnings.append(
                    f"the estimate is close to the target: the compaction may run as "
                    f"{built.label!r} instead (~{built.measured.tokens:,} tokens)"
                )
            if built.cut is not None and planned.cut is not None and built.cut != planned.cut:
                kept = len(msgs) - max(built.cut.tail_start, planned.cut.tail_start)
                end.warnings.append(
                    f"the verbatim tail may be shorter (down to the last {kept} messages) "
                    "if the result is larger than estimated"
                )

    def tokens(part: Sequence[Message]) -> int:
        return round(meter.calibrate(sum(meter.count(m) for m in part), len(part)) * scale)

    fields: dict[str, Any] = {}
    if planned.cut is not None:
        head, tail = planned.cut.head(msgs), planned.cut.tail(msgs)
        pinned, request = carried_items(msgs, planned.cut)
        fields.update(
            summarized_messages=len(head),
            summarized_tokens=tokens(head),
            verbatim_messages=len(tail),
            verbatim_tokens=tokens(tail),
            pinned_messages=len(pinned),
            request_carried=request is not None,
        )
    else:
        fields.update(_pruned_fields(planned, msgs, tokens, has_state=bool(hooks.state.strip())))
    warnings = [*hooks.warnings, *central.warnings, *(w for end in ends for w in end.warnings)]
    if min(figures) >= decision.usage.tokens:
        warnings.append("it would not reduce the context: the compaction would not be committed")
    return CompactionPlan(
        decision=decision,
        strategy=planned.label,
        preserved_state=hooks.state,
        preserved_sections=list(hooks.sections),
        warnings=list(dict.fromkeys(warnings)),
        expected_tokens_low=min(figures),
        expected_tokens_after=max(figures),
        summary_allowance=cap,
        **fields,
    )


def summary_cap(meter: Meter) -> int:
    """The most a summary may take (the summarizer's ``max_tokens``)."""
    settings = meter.settings
    window = settings.summarizer_window or meter.context_window
    return max(256, min(settings.summary_max_tokens, window // 4))


def _scale(
    meter: Meter,
    msgs: Sequence[Message],
    decision: CompactionDecision,
    system: str,
    tools: Sequence[dict[str, Any]],
) -> float:
    """What the API's figure for the history says of the local estimate of it (1 without one):
    the compaction's result is counted by the API, the preview's only estimated."""
    if decision.usage.source == "estimate":
        return 1.0
    local = meter.fixed_tokens(system, tools) + sum(meter.count(m) for m in msgs)
    estimate = meter.calibrate(local, len(msgs))
    return decision.usage.tokens / estimate if estimate > 0 else 1.0


def _pruned_fields(
    built: Built,
    msgs: Sequence[Message],
    tokens: Callable[[Sequence[Message]], int],
    *,
    has_state: bool,
) -> dict[str, Any]:
    pairs = list(zip(built.messages, msgs, strict=True))
    # The first message also takes the preserved state: not a pruning.
    changed = {
        index
        for index, (p, m) in enumerate(pairs)
        if p.content is not m.content and not (index == 0 and has_state)
    }
    old = [m for index, (_, m) in enumerate(pairs) if index in changed]
    new = [p for index, (p, _) in enumerate(pairs) if index in changed]
    kept = [m for index, (_, m) in enumerate(pairs) if index not in changed]
    return {
        "pruned_messages": len(changed),
        "pruned_tokens": tokens(old) - tokens(new),
        "verbatim_messages": len(kept),
        "verbatim_tokens": tokens(kept),
    }
