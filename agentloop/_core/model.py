"""The model seam: one small protocol between agentloop and whatever answers messages.

The anthropic adapter implements it over the real SDK; :mod:`agentloop.testing` ships doubles
(a scripted model and a function-backed model) so loops can be tested offline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentloop._core.messages import ContentBlock, Message, Usage
from agentloop._core.validation import DEFAULT_MAX_TOKENS

TextCallback = Callable[[str], None]


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


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The assistant reply and the usage the API reported for it."""

    content: tuple[ContentBlock, ...]
    usage: Usage
    stop_reason: str | None = "end_turn"
    model: str = ""

    @property
    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[ContentBlock]:
        return [b for b in self.content if b.get("type") == "tool_use"]

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
class CountingModel(Protocol):
    """A model that can count a request's input tokens the way the API bills them (the
    Messages API's ``count_tokens``, free of charge). Compaction uses it as the truth."""

    def count_tokens(self, request: ModelRequest) -> int: ...


@runtime_checkable
class AsyncCountingModel(Protocol):
    """The async form of :class:`CountingModel`."""

    async def acount_tokens(self, request: ModelRequest) -> int: ...
