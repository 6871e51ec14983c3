"""The summary of a whole history, as a compaction asks for it: the request that continues the
cached conversation where it can, a rendered transcript where it cannot, a digest without a
model (or when the model fails)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.summary import (
    NotASummary,
    continuing_summary_steps,
    digest,
    summarize_steps,
    summary_instruction,
)
from agentloop._core.cutting.cut_and_prune import previous_summary
from agentloop._core.values.messages import Message, Usage, latest_compaction_text
from agentloop._core.values.model import AsyncModel, Model
from agentloop._core.values.settings import CompactionSettings
from agentloop._errors import PromptTooLongError


def previous_text(msgs: Sequence[Message]) -> str | None:
    """The summary a new one updates: the previous compaction's (ours or the API's)."""
    before = previous_summary(msgs)
    # A child of a server compaction: the API's summary is the one to update.
    return before.text if before is not None else latest_compaction_text(msgs)


def whole_summary_steps(
    msgs: Sequence[Message],
    tokens: int,
    *,
    settings: CompactionSettings,
    model_name: str,
    window: int,
    summarizer: Model | AsyncModel | None,
    system: str,
    tools: Sequence[dict[str, Any]],
    instructions: str | None,
    spent: list[Usage],
    count_text: Callable[[str], int],
) -> Steps[tuple[str, str, str | None, bool]]:
    """The summary of the whole history: ``(text, strategy, fallback reason, continued)``.

    Where the conversation fits the summarizer and the summarizer is the conversation's own
    model, one request continues the conversation itself (reading its prompt cache). Else,
    or when that reply is no summary, a rendered transcript is summarized (chunked where it
    does not fit). Without a model, or when it fails, the deterministic digest.
    """
    joined = "\n".join(x for x in (settings.standing_instructions, instructions or "") if x)
    previous = previous_text(msgs)
    if summarizer is None:
        reason = "no summarizer model is configured"
        return digest(msgs, reason=reason, previous=previous), "digest", reason, False
    summary_model = settings.summary_model or model_name
    window = settings.summarizer_window or window
    max_tokens = max(256, min(settings.summary_max_tokens, window // 4))
    ask = count_text(summary_instruction(joined, updates_previous=True))
    fits = tokens + ask + max_tokens <= window
    if summary_model == model_name and fits:
        try:
            text = yield from continuing_summary_steps(
                msgs,
                model_name=model_name,
                system=system,
                tools=tools,
                max_tokens=max_tokens,
                instructions=joined,
                model=summarizer,
                spent=spent,
            )
        except (NotASummary, PromptTooLongError):
            pass  # the transcript below, which the summarizer cannot answer with a tool
        except Exception as error:  # the session must go on: fall back to the digest
            reason = f"the summarizer failed ({type(error).__name__}: {error})"
            return digest(msgs, reason=reason, previous=previous), "digest", reason, False
        else:
            return text, "summarize", None, True
    try:
        text = yield from summarize_steps(
            msgs,
            previous=previous,
            model_name=summary_model,
            budget_tokens=window,
            # A small summarizer window must still leave most of its room for the history.
            max_tokens=max_tokens,
            count=count_text,
            instructions=joined,
            tool_output_chars=settings.tool_output_chars,
            model=summarizer,
            spent=spent,
        )
    except Exception as error:  # the session must go on: fall back to the digest
        reason = f"the summarizer failed ({type(error).__name__}: {error})"
        return digest(msgs, reason=reason, previous=previous), "digest", reason, False
    return text, "summarize", None, False
