"""Test doubles for the model seam, shipped so users can test their own loops offline.

* :class:`ScriptedModel` answers from a list of scripted replies (text, tool calls, errors).
* :class:`FunctionModel` answers with a function of the request.

Both record every request they receive and report plausible usage (a local token count of the
request), so context measurement and compaction behave as they would against the API. They stand
in for the API, so that usage passes for its count; with ``estimated_usage=True`` it is marked
as what it is (``Usage.estimated``), and is measured, stored and shown as an estimate (``~``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloop._core.values.blocks import is_text, is_tool_use
from agentloop._core.values.messages import ContentBlock, Message, Usage
from agentloop._core.values.model import IterationUsage, ModelRequest, ModelResponse, TextCallback
from agentloop._core.values.model_profile import ModelProfile
from agentloop._errors import ModelError

__all__ = [
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "scripted_summary",
    "summary_input",
    "text_reply",
    "tool_call",
    "tool_reply",
]

_ids = itertools.count(1)


def tool_call(
    name: str, tool_input: Mapping[str, Any], *, call_id: str | None = None
) -> ContentBlock:
    """A tool_use content block (ids are unique per process unless given)."""
    return {
        "type": "tool_use",
        "id": call_id or f"toolu_{next(_ids):06d}",
        "name": name,
        "input": dict(tool_input),
    }


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: content blocks, or an exception to raise instead."""

    content: tuple[ContentBlock, ...] = ()
    error: Exception | None = None
    stop_reason: str | None = None


def text_reply(text: str) -> Reply:
    return Reply(({"type": "text", "text": text},))


def tool_reply(*calls: ContentBlock, text: str = "") -> Reply:
    blocks: list[ContentBlock] = [{"type": "text", "text": text}] if text else []
    return Reply((*blocks, *calls))


class _RecordingModel:
    """Shared behaviour: counting usage, streaming text, keeping the requests."""

    def __init__(
        self,
        *,
        input_token_factor: float = 1.0,
        counts_tokens: bool = False,
        on_demand_compaction: bool = False,
        estimated_usage: bool = False,
        profile: ModelProfile | None = None,
    ) -> None:
        self.requests: list[ModelRequest] = []
        self.counted: list[ModelRequest] = []
        self.input_token_factor = input_token_factor
        self.counts_tokens = counts_tokens
        self.on_demand_compaction = on_demand_compaction
        self.estimated_usage = estimated_usage
        self.profile = profile
        self._estimator: Any = None
        self._check_flags()

    def _check_flags(self) -> None:
        if self.estimated_usage and self.counts_tokens:
            # count_tokens answers for the API: a double that only estimates cannot offer it.
            raise ValueError("a model whose usage is estimated cannot count tokens")

    def supports_on_demand_compaction(self, model: str) -> bool:
        """Whether this double writes summaries itself (its ``profile`` says so, else
        ``on_demand_compaction=True``): a request with ``compaction`` is then answered with a
        signed-looking compaction block."""
        if self.profile is not None:
            return self.profile.on_demand_compaction
        return self.on_demand_compaction

    def _compaction_reply(self, request: ModelRequest) -> ModelResponse:
        """The answer to an on-demand compaction request: one compaction block summarizing
        the requests seen, zero top-level usage, the work in a ``compaction`` iteration."""
        self.requests.append(request)
        if not self.supports_on_demand_compaction(request.model):
            raise ModelError("this model does not offer on-demand compaction")
        asks = [m.text.strip()[:200] for m in request.messages if m.is_request and m.text.strip()]
        content = "## Goal\n" + ("\n".join(f"- {a}" for a in asks[-5:]) or "none")
        block = {"type": "compaction", "content": content, "signature": f"sig-{len(content)}"}
        work = Usage(
            input_tokens=self._count(request),
            output_tokens=len(content) // 4 + 1,
            estimated=self.estimated_usage,
        )
        return ModelResponse(
            content=(block,),
            usage=Usage(estimated=self.estimated_usage),
            stop_reason="compaction",
            model=request.model,
            iterations=(IterationUsage("compaction", work),),
        )

    def count_tokens(self, request: ModelRequest) -> int:
        """What this model would report as input tokens for ``request`` (like the Messages
        API's ``count_tokens``). Off unless ``counts_tokens=True``: a double that counts makes
        compaction measure its results by that count, as it does against the API."""
        if not self.counts_tokens:
            raise ModelError("this model cannot count tokens")
        self.counted.append(request)
        return self._count(request)

    def _count(self, request: ModelRequest) -> int:
        if self._estimator is None:
            from agentloop._adapters.tokens import TokenEstimator

            self._estimator = TokenEstimator()
        local = self._estimator.count_system(request.system) + self._estimator.count_tools(
            list(request.tools)
        )
        local += sum(self._estimator.count_message(m) for m in request.messages)
        return int(local * self.input_token_factor)

    def _respond(
        self, request: ModelRequest, reply: Reply, on_text: TextCallback | None
    ) -> ModelResponse:
        self.requests.append(request)
        if reply.error is not None:
            raise reply.error
        content = reply.content or ({"type": "text", "text": "(no reply scripted)"},)
        if on_text is not None:
            for block in content:
                if is_text(block):
                    on_text(str(block["text"]))
        output = sum(self._estimator_count_block(b) for b in content) if content else 0
        stop = reply.stop_reason or (
            "tool_use" if any(is_tool_use(b) for b in content) else "end_turn"
        )
        usage = Usage(
            input_tokens=self._count(request), output_tokens=output, estimated=self.estimated_usage
        )
        return ModelResponse(
            content=tuple(content), usage=usage, stop_reason=stop, model=request.model
        )

    def _estimator_count_block(self, block: ContentBlock) -> int:
        message = Message("assistant", (block,))
        if self._estimator is None:
            from agentloop._adapters.tokens import TokenEstimator

            self._estimator = TokenEstimator()
        return int(self._estimator.count_message(message))


def summary_input(request: ModelRequest) -> str:
    """What a summary request shows the summarizer, as one text: a request that continues the
    conversation, its messages rendered as a transcript (tool inputs and outputs whole), then the
    instruction; a transcript request, its prompt (which holds the rendered transcript)."""
    if not request.metadata.get("continues"):
        return request.messages[-1].text if request.messages else ""
    from agentloop._core.compaction.summary import SUMMARY_REQUEST_OPENING, render_message

    messages = list(request.messages)
    last = messages[-1]
    kept = tuple(
        b for b in last.content if not str(b.get("text", "")).startswith(SUMMARY_REQUEST_OPENING)
    )
    instruction = "\n".join(str(b["text"]) for b in last.content if b not in kept and is_text(b))
    messages[-1] = Message(last.role, kept)
    parts: list[str] = []
    if messages[0].summary is not None:
        parts.append(f"<summary-so-far>\n{messages[0].summary.text}\n</summary-so-far>")
        messages = messages[1:]
    rendered = [render_message(m, tool_output_chars=10**9) for m in messages if m.content]
    parts.append("<conversation>\n" + "\n\n".join(rendered) + "\n</conversation>")
    parts.append(instruction)
    return "\n\n".join(parts)


def scripted_summary(request: ModelRequest) -> str:
    """A deterministic stand-in for a model summary: the requests, tool calls and errors seen."""
    text = summary_input(request)
    previous = ""
    if "<summary-so-far>" in text:
        previous = text.split("<summary-so-far>", 1)[1].split("</summary-so-far>", 1)[0].strip()
    conversation = text.split("<conversation>", 1)[-1].split("</conversation>", 1)[0]
    asks, calls, errors = [], [], []
    for line in conversation.splitlines():
        if line.startswith("User: "):
            asks.append(line[6:].strip()[:200])
        elif " called tool " in line:
            calls.append(line.split(" called tool ", 1)[1][:120])
        elif line.startswith("Tool error"):
            errors.append(line[:160])
    sections = ["## Goal", *(f"- {a}" for a in asks[-5:])] if asks else ["## Goal", "none"]
    if previous:
        sections += ["## Earlier progress", previous[:1500]]
    sections += ["## Progress", *(f"- called {c}" for c in calls[-8:])] if calls else []
    sections += ["## Errors and their state", *([f"- {e}" for e in errors[-5:]] or ["none"])]
    sections += ["## Next steps", "continue with the latest request"]
    return "\n".join(sections)


class ScriptedModel(_RecordingModel):
    """Answers conversation requests with the scripted replies in order (past the end,
    ``default``, else an error) and summary requests with ``summarizer``. With
    ``estimated_usage`` its usage is marked a local estimate, not the API's count."""

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        default: Reply | None = None,
        input_token_factor: float = 1.0,
        counts_tokens: bool = False,
        summarizer: Callable[[ModelRequest], str] = scripted_summary,
        on_demand_compaction: bool = False,
        estimated_usage: bool = False,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(
            input_token_factor=input_token_factor,
            counts_tokens=counts_tokens,
            on_demand_compaction=on_demand_compaction,
            estimated_usage=estimated_usage,
            profile=profile,
        )
        self.replies: list[Reply] = [text_reply(r) if isinstance(r, str) else r for r in replies]
        self.default = default
        self.summarizer = summarizer

    def add(self, *replies: Reply | str) -> None:
        self.replies.extend(text_reply(r) if isinstance(r, str) else r for r in replies)

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if request.compaction is not None:
            return self._compaction_reply(request)
        if request.metadata.get("purpose") == "summary":
            return self._respond(request, text_reply(self.summarizer(request)), None)
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError("ScriptedModel ran out of scripted replies")
        return self._respond(request, reply, on_text)

    async def acomplete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        return self.complete(request, on_text)


@dataclass
class FunctionModel(_RecordingModel):
    """Answers with ``function(request)``: a :class:`Reply`, a string, or content blocks. With
    ``estimated_usage`` its usage is marked a local estimate, not the API's count; ``profile``
    declares what the model can do (:class:`~agentloop.ModelProfile`)."""

    function: Callable[[ModelRequest], Reply | str | Sequence[ContentBlock]]
    input_token_factor: float = 1.0
    counts_tokens: bool = False
    on_demand_compaction: bool = False
    estimated_usage: bool = False
    profile: ModelProfile | None = None
    """What the model can do (window, output limit, on-demand compaction, system messages
    mid-conversation...); None: the shipped table's profile of the request's model name."""
    requests: list[ModelRequest] = field(default_factory=list)
    counted: list[ModelRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._estimator = None
        self._check_flags()

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if request.compaction is not None and self.supports_on_demand_compaction(request.model):
            return self._compaction_reply(request)
        try:
            answer = self.function(request)
        except Exception:
            self.requests.append(request)
            raise
        if isinstance(answer, str):
            reply = text_reply(answer)
        elif isinstance(answer, Reply):
            reply = answer
        else:
            reply = Reply(tuple(answer))
        return self._respond(request, reply, on_text)

    async def acomplete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        return self.complete(request, on_text)
