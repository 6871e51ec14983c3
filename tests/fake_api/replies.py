"""What the fake API answers: scripted replies and errors in the API's own shapes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

TEST_API_KEY = "test-key"
"""The only API key a request to the fake server may carry."""

ANTHROPIC_VERSION = "2023-06-01"

# ---------------------------------------------------------------------------------------------
# Reply specs

Framing = Literal["close", "chunked"]
"""How a streamed body is delimited: by closing the connection (HTTP/1.0, the default) or by
``Transfer-Encoding: chunked`` (HTTP/1.1), where a connection that drops mid-body is detectable."""
FaultKind = Literal["drop", "end", "no_stop", "stall", "inject"]


@dataclass(frozen=True, eq=False)
class Fault:
    """How a reply goes wrong on the wire (see :mod:`fake_api.faults`).

    ``drop``: send ``after_events`` stream events intact (a non-streamed reply: half of its
    JSON body), then, with ``partial_event``, the first half of the next one, then close the
    connection (``reset``: with an RST instead of a FIN). ``end``: end the stream cleanly (in
    chunked framing with its last chunk) after ``after_events`` events (before
    ``message_delta``: no stop reason either). ``no_stop``: the whole stream but its
    ``message_stop``, ended cleanly (``after_events`` does not apply). ``stall``: send
    ``after_events`` events, then wait until ``release`` is set or ``seconds`` have passed (the
    bound), then go on (``then="continue"``) or drop (``then="drop"``). ``inject``: send
    ``after_events`` events, then the bytes ``raw`` as they are (a line that is not JSON, an
    event of the wrong shape, an ``error`` event), then go on, drop, or end the stream cleanly
    (``then="end"``, as the API does after an ``error`` event). ``reached`` is set when the
    fault point is reached. ``after_events`` does not count the events of the thinking blocks a
    reply begins with (:func:`fake_api.faults.past_thinking`).
    """

    kind: FaultKind
    after_events: int = 4
    partial_event: bool = True
    reset: bool = False
    seconds: float = 5.0
    release: threading.Event | None = None
    then: Literal["continue", "drop", "end"] = "continue"
    raw: bytes = b""
    reached: threading.Event = field(default_factory=threading.Event)


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
    framing: Framing = "close"
    """How a streamed reply's body is delimited."""
    fault: Fault | None = None
    """How the reply goes wrong on the wire (None: it does not)."""
    usage: Mapping[str, Any] | None = None
    """The whole ``usage`` object as sent (None: computed; a server compaction sets it)."""
    thinking: bool | str | None = None
    """On a thinking request (:mod:`fake_api.thinking`): None or True, the server's own
    thinking blocks; False, none; a string, the leading block's text (shown when the request
    asked for ``display: "summarized"``)."""
    progress: tuple[str, ...] = ()
    """Texts of the progress-update thinking blocks before the tool calls, in order."""
    thinking_tokens: int | None = None
    """The hidden figure of each thinking block (None: the server's ``thinking_tokens``)."""
    redacted: bool = False
    """The leading thinking block comes back as ``redacted_thinking``."""
    stop_details: Mapping[str, Any] | None = None
    """The response's ``stop_details`` (a refusal's)."""


@dataclass(frozen=True)
class ErrorReply:
    """An error answer: HTTP status, the API's error type and its message."""

    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    error_code: str | None = None
    """Sent as ``error.details.error_code`` (the SDK's ``err.error_code``)."""


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


def dropped_reply(
    text: str,
    *,
    after_events: int = 4,
    framing: Framing = "close",
    partial_event: bool = True,
    reset: bool = False,
) -> Reply:
    """A text reply whose connection drops after ``after_events`` stream events."""
    fault = Fault("drop", after_events, partial_event=partial_event, reset=reset)
    return text_reply(text, framing=framing, fault=fault)


def unfinished_reply(
    text: str, *, after_events: int | None = None, framing: Framing = "close"
) -> Reply:
    """A text reply whose stream ends cleanly without ``message_stop``: after ``after_events``
    events (without ``message_delta`` and its stop reason too), or, by default, right before
    ``message_stop``."""
    fault = Fault("no_stop") if after_events is None else Fault("end", after_events)
    return text_reply(text, framing=framing, fault=fault)


def stalled_reply(
    text: str,
    *,
    seconds: float,
    after_events: int = 4,
    release: threading.Event | None = None,
    then: Literal["continue", "drop"] = "continue",
    framing: Framing = "close",
) -> Reply:
    """A text reply whose stream stalls after ``after_events`` events for at most ``seconds``
    (less once ``release`` is set), then goes on or drops."""
    fault = Fault("stall", after_events, seconds=seconds, release=release, then=then)
    return text_reply(text, framing=framing, fault=fault)


def injected_reply(
    text: str,
    raw: bytes,
    *,
    after_events: int = 4,
    then: Literal["continue", "drop", "end"] = "continue",
    framing: Framing = "close",
) -> Reply:
    """A text reply whose stream carries ``raw`` (written as it is) after ``after_events``
    events, then goes on, drops or ends."""
    fault = Fault("inject", after_events, raw=raw, then=then)
    return text_reply(text, framing=framing, fault=fault)


def error_event(error_type: str = "overloaded_error", message: str = "Overloaded") -> bytes:
    """An ``error`` event as the API sends it mid-stream (with a 200 status already sent)."""
    data = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return f"event: error\ndata: {data}\n\n".encode()


def error_event_reply(
    text: str,
    *,
    after_events: int = 4,
    error_type: str = "overloaded_error",
    message: str = "Overloaded",
) -> Reply:
    """A text reply whose stream ends with an ``error`` event after ``after_events`` events."""
    return injected_reply(
        text, error_event(error_type, message), after_events=after_events, then="end"
    )


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


# ---------------------------------------------------------------------------------------------
# Stop reasons a loop must handle


def pause_reply(text: str = "Searching.", **options: Any) -> Reply:
    """A turn the API paused (``pause_turn``): text and a server tool call still open; the
    client sends the assistant content back as it is to let it go on."""
    search = {"type": "server_tool_use", "name": "web_search", "input": {"query": text}}
    search["id"] = options.pop("server_tool_id", "srvtoolu_paused")
    blocks = ({"type": "text", "text": text}, search)
    return Reply(content=blocks, stop_reason="pause_turn", **options)


def refusal_reply(
    category: str | None = "cyber",
    *,
    explanation: str = "The request was refused.",
    text: str | None = None,
    recommended_model: str | None = None,
    **options: Any,
) -> Reply:
    """A refusal (HTTP 200, ``stop_reason: "refusal"``, ``stop_details`` filled); ``text``: what
    was streamed before the refusal."""
    details = {
        "type": "refusal",
        "category": category,
        "explanation": explanation,
        "fallback_credit_token": None,
        "fallback_has_prefill_claim": None,
        "recommended_model": recommended_model,
    }
    content = ({"type": "text", "text": text},) if text else ()
    return Reply(content=content, stop_reason="refusal", stop_details=details, **options)


def context_exceeded_reply(text: str = "The answer was cut", **options: Any) -> Reply:
    """A reply whose output reached the context window (``model_context_window_exceeded``)."""
    return text_reply(text, stop_reason="model_context_window_exceeded", **options)


def cut_tool_reply(name: str, *, text: str | None = None, **options: Any) -> Reply:
    """A reply cut by ``max_tokens`` inside a tool call (its input incomplete: ``{}``)."""
    reply = tool_reply((name, {}), text=text, stop_reason="max_tokens", **options)
    return reply


def compaction_unavailable(message: str = "Compaction is temporarily unavailable") -> ErrorReply:
    """529 ``overloaded_error`` with ``error_code: compaction_unavailable``."""
    return ErrorReply(529, "overloaded_error", message, error_code="compaction_unavailable")
