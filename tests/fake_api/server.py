"""The fake Messages API server: routes, usage, streaming, the Models API."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from fake_api.cache import (
    DEFAULT_CACHE_LOOKBACK,
    Bill,
    CacheUse,
    Prefix,
    PromptCache,
    bill_from_usage,
    min_cache_tokens,
    request_prefix,
)
from fake_api.counting import MediaPrices, Tally, block_tokens
from fake_api.gate import Admitted
from fake_api.handler import HTTPServer, RecordedRequest, RequestHandler
from fake_api.media import IMAGE_TOKEN_CAP
from fake_api.model_facts import capabilities, family, ondemand_compaction
from fake_api.model_rules import effort
from fake_api.ondemand import FAILURE_STOPS
from fake_api.replies import (
    TEST_API_KEY,
    ErrorReply,
    Handler,
    Reply,
    ReplySpec,
)
from fake_api.thinking import add_thinking, cap, signed_as_cut

if TYPE_CHECKING:
    import anthropic

DEFAULT_THINKING_TOKENS = 24
"""Each thinking block's hidden output figure: modest, so that small ``max_tokens`` still fit."""
DEFAULT_SECRET = b"fake-api-signing-key"
DEFAULT_MAX_TOOL_REFERENCES = 256
"""How many distinct tools a compaction block records (the docs give no figure)."""


@dataclass
class ModelSpec:
    """What ``GET /v1/models/{id}`` answers for one model."""

    id: str
    max_input_tokens: int | None = 200_000
    max_tokens: int | None = 64_000
    display_name: str | None = None
    created_at: str = "2025-09-29T00:00:00Z"
    lifecycle: str = "active"
    """``active``, ``deprecated`` or ``retired`` (the SDK's ``ModelInfo.lifecycle``)."""
    deprecated_at: str | None = None
    """RFC 3339: the most recent deprecation; set for ``deprecated`` and ``retired`` models."""
    retires_at: str | None = None
    """RFC 3339: the scheduled retirement; None while ``active`` or none is scheduled."""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "model",
            "id": self.id,
            "display_name": self.display_name or self.id,
            "created_at": self.created_at,
            "lifecycle": self.lifecycle,
            "deprecated_at": self.deprecated_at,
            "retires_at": self.retires_at,
            "max_input_tokens": self.max_input_tokens,
            "max_tokens": self.max_tokens,
        }


DEFAULT_MODELS = (
    ModelSpec("claude-sonnet-5-5", 1_000_000, 128_000, "Claude Sonnet 5.5"),
    ModelSpec("claude-opus-5-5", 1_000_000, 128_000, "Claude Opus 5.5"),
    ModelSpec("claude-haiku-5-5", 1_000_000, 128_000, "Claude Haiku 5.5"),
    ModelSpec("claude-sonnet-4-6", 1_000_000, 64_000, "Claude Sonnet 4.6"),
    ModelSpec("claude-opus-4-6", 1_000_000, 128_000, "Claude Opus 4.6"),
    ModelSpec("claude-haiku-4-5", 200_000, 64_000, "Claude Haiku 4.5"),
    ModelSpec("claude-opus-4-8", 1_000_000, 128_000, "Claude Opus 4.8"),
    ModelSpec("claude-sonnet-5", 1_000_000, 128_000, "Claude Sonnet 5"),
    ModelSpec("claude-fable-5-1", 1_000_000, 128_000, "Claude Fable 5.1"),
)


class FakeAnthropicServer:
    """The fake Messages API. Use as a context manager or via the ``fake_api`` fixture.

    Attributes tests use: ``base_url``, ``requests`` (all :class:`RecordedRequest`),
    ``message_requests`` (bodies of ``POST /v1/messages``), ``count_requests`` (bodies of
    ``POST /v1/messages/count_tokens``), ``violations`` (strings), ``abandoned`` (requests
    cut short by a client that went away), ``handler``,
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
        cache_min_tokens: int | Mapping[str, int] | None = None,
        cache_lookback: int = DEFAULT_CACHE_LOOKBACK,
        clock: Callable[[], float] = time.monotonic,
        models: Sequence[ModelSpec] = DEFAULT_MODELS,
        account: str = "acct_fake_test",
        account_created_after_cutoff: bool = True,
        thinking_tokens: int = DEFAULT_THINKING_TOKENS,
        secret: bytes = DEFAULT_SECRET,
        compaction_encrypted_content: bool = True,
        compaction_tool_changes: bool = False,
        max_tool_references: int = DEFAULT_MAX_TOOL_REFERENCES,
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
        """The minimum cacheable prefix: one for all models, or per model (``"*"``: others);
        None: the docs' figures (512 on Sonnet 5.5, else 1,024)."""
        self.bills: list[Bill] = []
        """One per answered ``POST /v1/messages``, in order."""
        self.models: dict[str, ModelSpec] = {spec.id: spec for spec in models}
        self.models_unavailable = False
        """When true, the Models API answers 500 ``api_error``."""
        self.models_without_compaction: set[str] = set()
        """Models whose requests with the compaction edit are refused (400), see compaction.py."""
        self.failed_compactions = False
        """When true, a compaction returns a block with null content (the API's failure)."""
        self.compaction_handler: Callable[[dict[str, Any]], ReplySpec | None] | None = None
        """When set, called with each on-demand compaction request (the body as sent) before
        the server answers it: a reply it returns is sent instead (a fault, a hang), None lets
        the server write the summary."""
        self.account = account
        """The account requests come from (thinking of Sonnet/Haiku 5.5 is bound to it)."""
        self.account_created_after_cutoff = account_created_after_cutoff
        """An account created on or after 2026-08-31: the prefix check is enforced on the
        prefix-check models by default; False: only on requests that set
        ``prefix_mismatch_behavior`` (and on Fable/Mythos 5.2, Mythos 5.1)."""
        self.thinking_tokens = thinking_tokens
        """The hidden output-token figure of each thinking block the server writes."""
        self.secret = secret
        """The key signatures are made with (thinking and on-demand compaction blocks)."""
        self.compaction_encrypted_content = compaction_encrypted_content
        """On-demand compaction blocks carry an opaque ``encrypted_content`` (signed with
        them: sent back altered, ``compaction_content_mismatch``)."""
        self.compaction_tool_changes = compaction_tool_changes
        """On-demand compaction blocks carry ``tool_changes`` even without a tool-changes beta
        (with ``inline-tools-2026-09-15`` or ``mid-conversation-tool-changes-2026-07-01`` they
        always do)."""
        self.max_tool_references = max_tool_references
        """The distinct tools a compaction block can record: a compaction request whose
        conversation references more is ``compaction_too_many_tool_references``."""
        self.refusals_expected = False
        """When true, a refused request goes to ``refusals`` instead of ``violations``."""
        self.too_long: list[str] = []
        """Every request refused "prompt is too long" (over ``context_window``), in order."""
        self.refusals: list[str] = []
        """Every refused request's problems (expected or not), in order."""
        self._compaction_failures: deque[str] = deque()
        self.requests: list[RecordedRequest] = []
        self.violations: list[str] = []
        self.abandoned = 0
        """Requests whose body ended before its ``Content-Length`` (a client that went away)."""
        self._queue: deque[ReplySpec] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeAnthropicServer:
        httpd = HTTPServer(("127.0.0.1", 0), RequestHandler)
        httpd.fake = self
        self._httpd = httpd
        # stop() waits for the serving loop to look at its flag, once per poll interval: 5 ms,
        # not 50, as every test with a server stops one (an idle wake-up costs microseconds).
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True
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
        return max(1, math.ceil(tally.text * self.token_factor) + tally.media)

    # -- answering (called from the HTTP threads) -------------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)

    def _abandoned(self) -> None:
        with self._lock:
            self.abandoned += 1

    def _violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)

    def _refused(self, number: int, problems: Sequence[str]) -> None:
        """A request refused by the API's rules: a violation unless the test expects it."""
        with self._lock:
            lines = [f"request {number}: {problem}" for problem in problems]
            self.refusals.extend(lines)
            if not self.refusals_expected:
                self.violations.extend(lines)

    def expect_refusals(self, expected: bool = True) -> None:
        """Refused requests are what this test checks: keep them out of ``violations`` (they
        are still listed in ``refusals``)."""
        self.refusals_expected = expected

    def fail_next_compactions(self, *modes: str) -> None:
        """The next on-demand compactions fail, in order: ``"unavailable"`` (529
        ``compaction_unavailable``) or a stop reason (``max_tokens``, ``tool_use``,
        ``refusal``, ``end_turn``, ``model_context_window_exceeded``: HTTP 200, empty
        content)."""
        unknown = set(modes) - FAILURE_STOPS - {"unavailable"}
        if unknown:
            raise ValueError(f"unknown compaction failure: {sorted(unknown)}")
        with self._lock:
            self._compaction_failures.extend(modes)

    def _next_compaction_failure(self) -> str | None:
        with self._lock:
            return self._compaction_failures.popleft() if self._compaction_failures else None

    def has_ondemand_compaction(self, model: str) -> bool:
        """Whether ``model`` takes the ``compaction`` parameter (the model table, less
        ``models_without_compaction``)."""
        return model not in self.models_without_compaction and ondemand_compaction(family(model))

    def model_json(self, spec: ModelSpec) -> dict[str, Any]:
        """What the Models API answers for ``spec``, its capabilities included."""
        compaction = self.has_ondemand_compaction(spec.id)
        return {
            **spec.to_json(),
            "capabilities": capabilities(family(spec.id), compaction=compaction),
        }

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
        else:
            cache = self.cache_use(body, prefix)
        input_tokens = reply.input_tokens
        if input_tokens is None:
            input_tokens = max(0, prefix.total - cache.read - cache.write)
        output_tokens = reply.output_tokens
        if output_tokens is None:
            output_tokens = self.count_output_tokens(content)
        return {"input_tokens": input_tokens, "output_tokens": output_tokens, **cache.usage()}

    def cache_use(self, body: Mapping[str, Any], prefix: Prefix | None = None) -> CacheUse:
        """What a request reads from and writes to the prompt cache (nothing when it is off)."""
        if not self.prompt_caching:
            return CacheUse()
        model = str(body.get("model", ""))
        minimum = min_cache_tokens(self.cache_min_tokens, model)
        # An effort change restarts the prompt cache (docs: effort, preserved thinking): the
        # entries are the model's at one effort.
        return self.cache.use(f"{model}@{effort(body)}", prefix or self.prefix(body), minimum)

    def _message_json(
        self, body: dict[str, Any], reply: Reply, admitted: Admitted | None = None
    ) -> dict[str, Any]:
        """The response message (``body``: as sent; ``admitted.effective``: as counted)."""
        content: list[dict[str, Any]] = []
        for block in reply.content:
            block = dict(block)
            if block.get("type") == "tool_use" and not block.get("id"):
                block["id"] = self._new_id("toolu")
            content.append(block)
        content = add_thinking(self, body, reply, content)
        stop_reason = reply.stop_reason
        if stop_reason is None:
            has_tool_use = any(b.get("type") == "tool_use" for b in content)
            stop_reason = "tool_use" if has_tool_use else "end_turn"
        counted = admitted.effective if admitted is not None else body
        cut: tuple[list[dict[str, Any]], int] | None = None
        if body.get("max_tokens") == 0:  # a cache keep-alive: reads and writes, samples nothing
            cut = ([], 0)
        elif not reply.usage and reply.output_tokens is None:
            cut = cap(content, body.get("max_tokens"), self.token_factor)
        if cut is not None:
            content, stop_reason = signed_as_cut(self, body, cut[0]), "max_tokens"
            reply = replace(reply, output_tokens=cut[1])
        usage = dict(reply.usage) if reply.usage else self._usage(counted, reply, content)
        with self._lock:
            self.bills.append(bill_from_usage(body, usage))
        message = {
            "id": self._new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model", ""),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": dict(reply.stop_details) if reply.stop_details else None,
            "usage": usage,
        }
        if admitted is not None and admitted.binding.report:
            message["input_transformations"] = list(admitted.binding.transformations)
        return message

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
