"""Strategy ``summarize``: the API's own summary where the job offers it (on-demand
compaction: the block first, the kept turns with their thinking); else, or when it fails,
agentloop's: one summary of the whole history, then the verbatim tail chosen within the
budget. Tightening drops tail (the planned tail; then old content in it pruned and the carried
request capped; then the smallest tail), never asks again, except that a summary too long for
the compaction to help is asked for once more, shorter."""

from __future__ import annotations

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job, levels_steps
from agentloop._core.compaction.summary import digest
from agentloop._core.compaction.whole_summary import previous_text
from agentloop._core.cutting.cut_and_prune import Split


class SummarizeStrategy(BaseStrategy):
    name = "summarize"
    prepares = True
    summarizes = True
    api_summary = True

    def build(self, job: Job) -> Steps[Built | str]:
        return (yield from summarized_steps(job))


def summarized_steps(job: Job) -> Steps[Built | str]:
    """The API's summary where the job offers it; else, or when it fails, agentloop's own
    (:func:`summary_steps`), which then says why the API's was not used."""
    if not job.offers_api_summary:
        built: Built = yield from summary_steps(job)
        return built
    api = yield from job.api_summary()
    if not isinstance(api, str):
        return api
    own = yield from summary_steps(job)
    why = f"{api}: agentloop compacted it itself instead"
    own.fallback = why if own.fallback is None else f"{api}; {own.fallback}"
    return own


def summary_steps(job: Job) -> Steps[Built]:
    """The summary (or, without a model, a digest of just what each cut replaces) + the tail."""
    whole = yield from job.whole_summary()
    previous = previous_text(job.msgs)

    def text_for(cut: Split) -> str:
        if whole.fallback is None:
            return whole.text
        # No model call: a digest of just what is replaced.
        return digest(job.msgs[: cut.tail_start], reason=whole.fallback, previous=previous)

    built = yield from levels_steps(job, text_for, whole.label)
    built.fallback, built.continued = whole.fallback, whole.continued
    if whole.fallback is not None or not job.budget.refused(built.measured.tokens):
        return built
    summary_tokens = job.summary_tokens(built.text)
    if summary_tokens <= job.budget.target // 2:
        return built
    try:
        text = yield from job.condense(built.text)
    except Exception as error:  # the longer summary stands
        job.warnings.append(f"the summary could not be condensed ({error})")
        return built
    job.notes.append(
        f"the summary was too long (about {summary_tokens:,} tokens): it was condensed in a "
        "second summarizer call"
    )
    compacted, measured = yield from job.assembled(
        job.smallest, text, request_chars=job.budget.request_chars, tighten=True
    )
    built.messages, built.measured, built.text, built.cut = compacted, measured, text, job.smallest
    return built
