"""The fake Messages API server: routes, usage, streaming, the Models API."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from fake_api.cache import (
    DEFAULT_CACHE_LOOKBACK,
    DEFAULT_CACHE_MIN_TOKENS,
    Bill,
    CacheUse,
    Prefix,
    PromptCache,
    bill_from_usage,
    cache_problems,
    min_cache_tokens,
    request_prefix,
)
from fake_api.compaction import compaction_problems, compaction_reply
from fake_api.counting import MediaPrices, Tally, block_tokens
from fake_api.faults import send_json, send_stream, stream_events
from fake_api.media import IMAGE_TOKEN_CAP
from fake_api.replies import (
    TEST_API_KEY,
    ErrorReply,
    Handler,
    Reply,
    ReplySpec,
    api_error,
    invalid_request,
    prompt_too_long,
)
from fake_api.rules import check_request

if TYPE_CHECKING:
    import anthropic


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
    ``message_requests`` (bodies of ``POST /v1/messages``), ``count_requests`` (bodies of
    ``POST /v1/messages/count_tokens``), ``violations`` (strings), ``handler``,
    ``context_window``, the counting options (``token_factor``, ``message_overhead``,
    ``media_costs``, ``pdf_page_tokens``, ``image_token_cap``), ``count_tokens_error``,
    ``models``, ``models_unavailable``, the prompt cache (``prompt_caching``, ``cache``,
    ``cache_min_tokens``, :meth:`advance_clock`) and ``bills`` (:class:`~fake_api.cache.Bill`).
    """

    def __init__(
        self,
        *,
        api_key: str = TEST_API_KEY,
        handler: Handler | None = None,
        context_window: int | None = None,
        token_factor: float = 1.0,
        message_overhead: int = 3,
        media_costs: bool = True,
        pdf_page_tokens: int = 1800,
        image_token_cap: int = IMAGE_TOKEN_CAP,
        retry_after_ms: int | None = 1,
        stream_chunk_chars: int = 8,
        prompt_caching: bool = True,
        cache_min_tokens: int | Mapping[str, int] = DEFAULT_CACHE_MIN_TOKENS,
        cache_lookback: int = DEFAULT_CACHE_LOOKBACK,
        clock: Callable[[], float] = time.monotonic,
        models: Sequence[ModelSpec] = DEFAULT_MODELS,
    ) -> None:
        self._api_key = api_key
        self.handler = handler
        self.context_window = context_window
        """When set, a request counting more input tokens is refused "prompt is too long"."""
        self.token_factor = token_factor
        """Text tokens are tiktoken's times this (the API's tokenizer counts more)."""
        self.message_overhead = message_overhead
        """A fixed cost per message, charged as text (so scaled by ``token_factor``)."""
        self.media_costs = media_costs
        """Charge images by their pixels and PDFs by their pages as the API does (False: by the
        size of their JSON, base64 included, like any other block)."""
        self.pdf_page_tokens = pdf_page_tokens
        self.image_token_cap = image_token_cap
        self.count_tokens_error: ErrorReply | None = None
        """When set, ``count_tokens`` answers this error (a proxy or provider without it)."""
        self.retry_after_ms = retry_after_ms
        """Sent as ``retry-after-ms`` on retryable errors so the SDK's retries are instant;
        ``None`` leaves the SDK to its own exponential backoff."""
        self.stream_chunk_chars = stream_chunk_chars
        self.prompt_caching = prompt_caching
        """Bill like the API's prompt cache (:mod:`fake_api.cache`); False: nothing cached."""
        self.cache = PromptCache(clock, lookback=cache_lookback)
        self.cache_min_tokens = cache_min_tokens
        """The minimum cacheable prefix: one for all models, or per model (``"*"``: others)."""
        self.bills: list[Bill] = []
        """One per answered ``POST /v1/messages``, in order."""
        self.models: dict[str, ModelSpec] = {spec.id: spec for spec in models}
        self.models_unavailable = False
        """When true, the Models API answers 500 ``api_error``."""
        self.models_without_compaction: set[str] = set()
        """Models whose requests with the compaction edit are refused (400), see compaction.py."""
        self.failed_compactions = False
        """When true, a compaction returns a block with null content (the API's failure)."""
        self.requests: list[RecordedRequest] = []
        self.violations: list[str] = []
        self._queue: deque[ReplySpec] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

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
        self._stopping.set()  # ends any stall a reply is in
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

    @property
    def count_requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``POST /v1/messages/count_tokens`` received, in order."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.method == "POST"
                and r.path == "/v1/messages/count_tokens"
                and isinstance(r.body, dict)
            ]

    @property
    def media_prices(self) -> MediaPrices | None:
        if not self.media_costs:
            return None
        return MediaPrices(self.pdf_page_tokens, self.image_token_cap)

    def count_input_tokens(self, body: Mapping[str, Any]) -> int:
        """The input tokens the server reports for a request body (system + tools + messages):
        what ``count_tokens`` answers, and input + cache tokens of a ``/v1/messages`` reply."""
        return self.prefix(body).total

    def prefix(self, body: Mapping[str, Any]) -> Prefix:
        """The request's prefix as the prompt cache sees it (its positions and breakpoints)."""
        return request_prefix(
            body,
            token_factor=self.token_factor,
            message_overhead=self.message_overhead,
            prices=self.media_prices,
        )

    def advance_clock(self, seconds: float) -> None:
        """Move the prompt cache's clock on (to expire entries without sleeping)."""
        self.cache.advance(seconds)

    def count_message_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """What ``messages`` alone cost in a request (no system, no tools)."""
        return self.count_input_tokens({"messages": list(messages)})

    def count_output_tokens(self, content: Sequence[Mapping[str, Any]]) -> int:
        tally = Tally()
        for block in content:
            tally.add(block_tokens(dict(block), None))
        return max(1, math.ceil(tally.text * self.token_factor))

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
    ) -> dict[str, Any]:
        prefix = self.prefix(body)
        if (
            reply.cache_read_input_tokens is not None
            or reply.cache_creation_input_tokens is not None
        ):
            cache = CacheUse(
                read=reply.cache_read_input_tokens or 0,
                write_5m=reply.cache_creation_input_tokens or 0,
            )
        elif self.prompt_caching:
            model = str(body.get("model", ""))
            cache = self.cache.use(model, prefix, min_cache_tokens(self.cache_min_tokens, model))
        else:
            cache = CacheUse()
        input_tokens = reply.input_tokens
        if input_tokens is None:
            input_tokens = max(0, prefix.total - cache.read - cache.write)
        output_tokens = reply.output_tokens
        if output_tokens is None:
            output_tokens = self.count_output_tokens(content)
        return {"input_tokens": input_tokens, "output_tokens": output_tokens, **cache.usage()}

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
        usage = dict(reply.usage) if reply.usage else self._usage(body, reply, content)
        with self._lock:
            self.bills.append(bill_from_usage(body, usage))
        return {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model", ""),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

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

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away (a request cancelled in the background, a dropped stream)
        # is what the tests do on purpose: no traceback for it.
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


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
        problems += compaction_problems(body, self.headers.get("anthropic-beta"))
        problems += cache_problems(body)
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
        reply = compaction_reply(self.fake, body) or self.fake._next_reply(body)
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
        if reply.fault is not None or reply.framing != "close":
            self._send_faulty(number, body, message, reply)
        elif body.get("stream"):
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
        for event, data in stream_events(message, self.fake.stream_chunk_chars):
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def _send_faulty(
        self, number: int, body: dict[str, Any], message: dict[str, Any], reply: Reply
    ) -> None:
        # The client may give up (its timeout) while the reply stalls: nothing left to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._write_faulty(number, body, message, reply)

    def _write_faulty(
        self, number: int, body: dict[str, Any], message: dict[str, Any], reply: Reply
    ) -> None:
        request_id = self.fake._new_id("req")
        stopped = self.fake._stopping.is_set
        if body.get("stream"):
            events = stream_events(message, self.fake.stream_chunk_chars)
            send_stream(
                self,
                events,
                headers=reply.headers,
                framing=reply.framing,
                fault=reply.fault,
                request_id=request_id,
                stopped=stopped,
            )
            return
        fault = reply.fault
        if fault is not None and fault.kind in ("end", "no_stop"):
            self.fake._violation(f"request {number}: a {fault.kind} fault needs a streamed request")
            fault = None
        send_json(
            self,
            message,
            headers=reply.headers,
            fault=fault,
            request_id=request_id,
            stopped=stopped,
        )

    def _count_tokens(self, number: int, body: Any) -> None:
        if self._refuse_invalid(number, body, count_tokens=True):
            return
        if self.fake.count_tokens_error is not None:
            self._send_error(self.fake.count_tokens_error)
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
