"""What the fake API answers: scripted replies and errors in the API's own shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

TEST_API_KEY = "test-key"
"""The only API key a request to the fake server may carry."""

ANTHROPIC_VERSION = "2023-06-01"

# ---------------------------------------------------------------------------------------------
# Reply specs


@dataclass(frozen=True)
class ToolCall:
    """One tool_use block the fake model emits (``id`` is generated when omitted)."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful assistant reply: content blocks as the API returns them.

    ``stop_reason`` defaults to ``"tool_use"`` when the content has a tool_use block, else
    ``"end_turn"``. Token numbers default to counts the server computes; the cache numbers are
    carved out of the counted input (``input_tokens`` + cache numbers = the counted total).
    """

    content: tuple[dict[str, Any], ...]
    stop_reason: str | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    model: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (to provoke client timeouts)."""


@dataclass(frozen=True)
class ErrorReply:
    """An error answer: HTTP status, the API's error type and its message."""

    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


ReplySpec: TypeAlias = Reply | ErrorReply
Handler: TypeAlias = Callable[[dict[str, Any]], ReplySpec]


def text_reply(text: str, **options: Any) -> Reply:
    """A reply with one text block."""
    return Reply(content=({"type": "text", "text": text},), **options)


def tool_reply(
    *calls: ToolCall | tuple[str, Mapping[str, Any]], text: str | None = None, **options: Any
) -> Reply:
    """A reply with (optionally) a text block, then one or several parallel tool_use blocks."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in calls:
        tool = call if isinstance(call, ToolCall) else ToolCall(call[0], call[1])
        block: dict[str, Any] = {"type": "tool_use", "name": tool.name, "input": dict(tool.input)}
        if tool.id is not None:
            block["id"] = tool.id
        blocks.append(block)
    return Reply(content=tuple(blocks), **options)


def overloaded(message: str = "Overloaded") -> ErrorReply:
    return ErrorReply(529, "overloaded_error", message)


def api_error(message: str = "Internal server error") -> ErrorReply:
    return ErrorReply(500, "api_error", message)


def rate_limited(
    message: str = "Number of request tokens has exceeded your per-minute rate limit",
) -> ErrorReply:
    return ErrorReply(429, "rate_limit_error", message)


def unauthorized(message: str = "invalid x-api-key") -> ErrorReply:
    return ErrorReply(401, "authentication_error", message)


def invalid_request(message: str) -> ErrorReply:
    return ErrorReply(400, "invalid_request_error", message)


def prompt_too_long(tokens: int = 210_000, maximum: int = 200_000) -> ErrorReply:
    """The API's answer to a prompt above the context window."""
    return invalid_request(f"prompt is too long: {tokens} tokens > {maximum} maximum")
