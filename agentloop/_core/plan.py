"""The compaction preview: what a compaction would do, with no model call and no write.

It follows the same cut, strategy choice and estimates as the compaction itself; the summary's
size is taken at its upper bound (``summary_max_tokens``), so the figure after is an estimate
on the safe side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop._core.effects import RunHooks, Steps, perform
from agentloop._core.messages import Message
from agentloop._core.results import CompactionPlan
from agentloop._core.strategies import carried_items, choose_tail_start, prune_tool_outputs

if TYPE_CHECKING:
    from agentloop._core.compaction_core import CompactionCore


def plan_steps(
    core: CompactionCore,
    msgs: Sequence[Message],
    *,
    system: str,
    tools: Sequence[dict[str, Any]],
    force: bool,
) -> Steps[CompactionPlan]:
    """The preview; it only runs the preserved-state hooks (to show their state)."""
    decision = core.should_compact(msgs, system=system, tools=tools, force=force)
    if not decision.compact:
        return CompactionPlan(decision=decision, strategy="none", note=decision.reason)
    settings = core.settings
    target = int(min(decision.trigger_tokens, decision.usage.tokens) * settings.target_ratio)

    def tokens(part: Sequence[Message]) -> int:
        return core.calibrate(sum(core.count(m) for m in part), len(part))

    window = settings.window_messages if settings.strategy == "sliding_window" else None
    split = choose_tail_start(
        msgs,
        tail_tokens=min(int(core.context_window * settings.tail_fraction), target // 2),
        count=lambda message: core.calibrate(core.count(message), 1),
        max_messages=window,
    )
    if split is None:
        return CompactionPlan(
            decision=decision, strategy="none", note="nothing to compact: no safe cut point"
        )
    hooks = yield from perform(RunHooks(tuple(core.hooks)))
    fixed = core.calibrate(core.fixed_tokens(system, tools), 0)
    head, tail = split.head(msgs), split.tail(msgs)
    pinned, request = carried_items(msgs, split)
    base = CompactionPlan(
        decision=decision,
        strategy="summarize",
        verbatim_messages=len(tail),
        verbatim_tokens=tokens(tail),
        pinned_messages=len(pinned),
        request_carried=request is not None,
        preserved_state=hooks.state,
        warnings=list(hooks.warnings),
    )
    if settings.strategy in ("auto", "prune", "server"):  # a /compact under "server" is "auto"
        pruned = prune_tool_outputs(msgs, keep_from=split.tail_start)
        pairs = list(zip(pruned, msgs, strict=True))
        changed = [(p, m) for p, m in pairs if p.content is not m.content]
        after = fixed + tokens(pruned)
        if changed and (settings.strategy == "prune" or after <= target):
            kept = [m for p, m in pairs if p.content is m.content]
            return base.model_copy(
                update={
                    "strategy": "prune",
                    "pruned_messages": len(changed),
                    "pruned_tokens": tokens([m for _, m in changed])
                    - tokens([p for p, _ in changed]),
                    "verbatim_messages": len(kept),
                    "verbatim_tokens": tokens(kept),
                    "expected_tokens_after": after,
                }
            )
    strategy: str = "sliding_window" if settings.strategy == "sliding_window" else "summarize"
    if strategy == "summarize" and core.summarizer is None:
        strategy = "digest"
    prefix = settings.summary_max_tokens if strategy != "sliding_window" else 50
    carried = tokens([*pinned, *([request] if request is not None else [])])
    return base.model_copy(
        update={
            "strategy": strategy,
            "summarized_messages": len(head),
            "summarized_tokens": tokens(head),
            "expected_tokens_after": fixed + prefix + carried + base.verbatim_tokens,
        }
    )
