"""A summary prepared ahead that covered too little: one request brings it up to date.

At the trigger, the summary prepared in the background can leave a child over its share of the
window (the conversation outgrew it before a refresh could run). Summarizing the whole history
again would cost the user every request of the ordinary path (two or more where the history
does not fit one); instead one request folds what the prepared summary does not cover into it.
That request continues the cached conversation where it fits the window (the prepared text in
its instruction), else it renders only the messages the prepared summary does not cover, shortened
until they fit one request. When the request fails, the digest of those messages follows the
prepared text: never a second request. The child is then the summary and the verbatim tail,
tightened as any summary's.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentloop._core.compaction.effects import CallModel, Steps, perform
from agentloop._core.compaction.prepared import PreparedSummary
from agentloop._core.compaction.strategy import Built, Job, levels_steps
from agentloop._core.compaction.summary import (
    SUMMARIZER_SYSTEM,
    continuing_summary_request,
    digest,
    summary_instruction,
    summary_prompt,
    summary_text,
    transcript_parts,
)
from agentloop._core.values.messages import Message
from agentloop._core.values.model import ModelRequest
from agentloop._core.values.shorten import shorten


def rest_summary_steps(job: Job, prepared: PreparedSummary) -> Steps[Built]:
    """The compaction of ``job`` from ``prepared`` brought up to date in at most one summary
    request (see the module's docstring)."""
    text, fallback = yield from _updated(job, prepared)
    built = yield from levels_steps(job, lambda _cut: text, "summarize")
    built.fallback, built.continued, built.prepared = fallback, True, True
    return built


def _updated(job: Job, prepared: PreparedSummary) -> Steps[tuple[str, str | None]]:
    """The prepared text with what it does not cover folded in, and the fallback reason (None
    when the summarizer wrote it)."""
    meter, settings = job.meter, job.settings
    rest = job.msgs[len(prepared.covered) :]
    window = settings.summarizer_window or meter.context_window
    max_tokens = max(256, min(settings.summary_max_tokens, window // 4))
    instructions = settings.standing_instructions
    ask = summary_instruction(instructions, updates_previous=True, so_far=prepared.text)
    if job.decision.usage.tokens + meter.counter_text(ask) + max_tokens <= window:
        request = continuing_summary_request(
            job.msgs,
            model_name=meter.model_name,
            system=job.system,
            tools=job.tools,
            max_tokens=max_tokens,
            instructions=instructions,
            so_far=prepared.text,
        )
    else:
        request = _transcript_request(job, rest, prepared.text, window, max_tokens)
    try:
        response = yield from perform(CallModel(request, model=meter.summarizer))
        job.spent.append(response.usage)
        return summary_text(response), None
    except Exception as error:  # the session goes on: no second request
        reason = f"the summarizer failed ({type(error).__name__}: {error})"
        job.warnings.append(f"{reason}: what the prepared summary did not cover was digested")
        return digest(rest, reason=reason, previous=prepared.text), reason


def _transcript_request(
    job: Job, rest: Sequence[Message], previous: str, window: int, max_tokens: int
) -> ModelRequest:
    """One request over the rendered ``rest`` with ``previous`` to update: tool outputs are
    shortened further until the transcript fits the summarizer's window (then cut to fit)."""
    count, instructions = job.meter.counter_text, job.settings.standing_instructions
    overhead = count(SUMMARIZER_SYSTEM) + count(instructions) + 400
    room = max(256, window - overhead - max_tokens - max(max_tokens, count(previous)))
    chars = job.settings.tool_output_chars
    while True:
        chunk = "\n\n".join(transcript_parts(rest, tool_output_chars=chars))
        if count(chunk) <= room or chars <= 200:
            break
        chars //= 2
    if count(chunk) > room:  # the salient lines kept (errors, paths), the rest cut
        chunk = shorten(chunk, len(chunk) * room // count(chunk))
    prompt = summary_prompt(chunk, previous=previous, part=1, parts=1, instructions=instructions)
    return ModelRequest(
        model=job.meter.model_name,
        messages=(Message.user(prompt),),
        system=SUMMARIZER_SYSTEM,
        max_tokens=max_tokens,
        metadata={"purpose": "summary", "part": 1, "parts": 1},
        cache_newest=False,
    )
