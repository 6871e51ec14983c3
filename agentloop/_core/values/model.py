"""The model seam: one small protocol between agentloop and whatever answers messages.

The anthropic adapter implements it over the real SDK; :mod:`agentloop.testing` ships doubles
(a scripted model and a function-backed model) so loops can be tested offline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentloop._core.values.blocks import ToolUseBlock, is_text, is_tool_use
from agentloop._core.values.messages import ContentBlock, Message, Usage
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS
from agentloop._errors import ModelError

TextCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ServerCompaction:
    """Ask the API to compact on the server (strategy ``server``): when a request's input
    reaches ``trigger_tokens``, the API summarizes it into a ``compaction`` block and, with
    ``pause``, stops right after it (stop reason ``compaction``)."""

    trigger_tokens: int
    instructions: str | None = None
    """Replaces the API's own summarization prompt (None: the API's prompt)."""
    pause: bool = True


@dataclass(frozen=True, slots=True)
class IterationUsage:
    """One sampling iteration of a response (``usage.iterations``): ``kind`` is
    ``compaction`` (the summarization on the server: its input is the context it compacted) or
    ``message``."""

    kind: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class OnDemandCompaction:
    """Ask the API to summarize the request's messages now (on-demand compaction, beta
    ``compact-2026-09-04``): the reply is one assistant message holding one signed
    ``compaction`` block, stop reason ``compaction``, nothing sampled after it. The request
    keeps the conversation's model, system and tools so kept turns keep their thinking."""

    instructions: str | None = None
    """Replaces the API's own summarization prompt (None or blank: the API's prompt)."""


ON_DEMAND_COMPACTION_BETA = "compact-2026-09-04"
"""The beta header on-demand compaction needs (the request's top-level ``compaction``); the
Models API fills ``capabilities.compaction`` only when it is sent."""
MAX_COMPACTION_INSTRUCTIONS = 16_384
"""The most characters ``compaction.instructions`` may hold (the API refuses more)."""


@dataclass(frozen=True, slots=True)
class Thinking:
    """How a request asks the model to think (the ``thinking`` and ``output_config`` params).

    ``kind`` is ``adaptive`` (the 5.x default), ``between_tools`` or ``none`` (send no
    ``thinking`` param: models that do not think). ``display`` is ``summarized`` (text the
    terminal can show), ``omitted`` or None (the API's default). ``effort`` goes to
    ``output_config.effort`` (None: the API's default). ``drop_block`` sends
    ``block_binding.prefix_mismatch_behavior: "drop_block"`` with its beta header: the last
    resort a session stores once a request was refused for a thinking block bound elsewhere.
    """

    kind: str = "adaptive"
    display: str | None = "summarized"
    effort: str | None = None
    drop_block: bool = False


class ServerCompactionUnsupported(ModelError):
    """The model or endpoint refused server-side compaction (the loop falls back to ``auto``)."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one Messages API call needs."""

    model: str
    messages: Sequence[Message]
    system: str = ""
    tools: Sequence[dict[str, Any]] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form hints for test doubles (e.g. ``{"purpose": "summary"}``); never sent to the API."""
    server_compaction: ServerCompaction | None = None
    """Let the API compact on the server (only models that offer it; see
    :class:`ServerCompactingModel`)."""
    compaction: OnDemandCompaction | None = None
    """Summarize ``messages`` on the API now (see :class:`OnDemandCompaction`)."""
    thinking: Thinking | None = None
    """How the model thinks (None: the adapter's choice for the model, from its profile)."""
    cache_newest: bool = True
    """Whether the newest message is a prompt-cache breakpoint. False for a one-off request (a
    summary that continues the conversation): it reads the conversation's cached prefix and
    writes nothing that no later request would read."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The assistant reply and the usage the API reported for it."""

    content: tuple[ContentBlock, ...]
    usage: Usage
    stop_reason: str | None = "end_turn"
    model: str = ""
    iterations: tuple[IterationUsage, ...] = ()
    """The API's per-iteration usage, when it reports one (a server compaction does)."""
    input_transformations: tuple[dict[str, Any], ...] = ()
    """What the API dropped or let through of the thinking sent back (``thinking_dropped`` /
    ``thinking_mismatch_allowed`` entries, each with ``path`` and ``reason``)."""
    stop_details: dict[str, Any] | None = None
    """The API's ``stop_details`` (a ``refusal``'s category and explanation)."""

    @property
    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if is_text(b))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if is_tool_use(b)]

    def to_message(self) -> Message:
        return Message("assistant", self.content, usage=self.usage)


@runtime_checkable
class Model(Protocol):
    """Send messages, get the reply with its usage. ``on_text`` receives streamed text deltas."""

    def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse: ...


@runtime_checkable
class AsyncModel(Protocol):
    """The async form of :class:`Model`; the async loop falls back to ``complete`` in a thread."""

    async def acomplete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse: ...


@runtime_checkable
class ServerCompactingModel(Protocol):
    """A model whose API can compact on the server (:class:`ServerCompaction`). It raises
    :class:`ServerCompactionUnsupported` when the API refuses it for a model.

    This and the two protocols after it are the older way to say what a model can do: a model
    adapter now gives a ``profile`` (:class:`~agentloop.ModelProfile`); one without it that
    still has these methods gets them folded into its profile (``profile_table.profile_of``),
    the one place that asks them."""

    def supports_server_compaction(self, model: str) -> bool: ...


@runtime_checkable
class OnDemandCompactingModel(Protocol):
    """A model whose API writes summaries itself (:class:`OnDemandCompaction`); the answer
    comes from the Models API's ``capabilities.compaction`` and is cached per model."""

    def supports_on_demand_compaction(self, model: str) -> bool: ...


@runtime_checkable
class OutputLimitedModel(Protocol):
    """A model that knows the most a reply may hold (the Models API's ``max_tokens``): the loop
    then sends a ``max_tokens`` that leaves room for thinking (see :func:`reply_max_tokens`)."""

    def max_reply_tokens(self, model: str) -> int | None: ...


@runtime_checkable
class ThinkingListener(Protocol):
    """An ``on_text`` callback that also hears the model's thinking as it streams (the text of
    ``thinking`` blocks under summarized display; a new block starts with a newline)."""

    def __call__(self, delta: str) -> None: ...

    def on_thinking(self, delta: str) -> None: ...


REPLY_FLOOR_TOKENS = 32_000
"""The ``max_tokens`` a reply gets when the model's own limit is not known: room to think."""


def reply_max_tokens(
    reserve: int, model_cap: int | None, *, window: int | None, context: int | None
) -> int:
    """The ``max_tokens`` to send: the model's limit (``model_cap``; 32,000 when unknown), never
    more than the window leaves beside the current ``context``, never less than ``reserve``
    (the reply reserve the compaction trigger keeps free, which it stays apart from)."""
    wanted = model_cap if model_cap is not None else max(reserve, REPLY_FLOOR_TOKENS)
    if window is not None and context is not None:
        wanted = min(wanted, window - context)
    wanted = max(reserve, wanted)
    return wanted if model_cap is None else min(wanted, model_cap)


@runtime_checkable
class CountingModel(Protocol):
    """A model that can count a request's input tokens the way the API bills them (the
    Messages API's ``count_tokens``, free of charge). Compaction uses it as the truth."""

    def count_tokens(self, request: ModelRequest) -> int: ...
