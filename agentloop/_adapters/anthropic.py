"""The ``anthropic`` adapter for the model seam: :class:`AnthropicModel` and the Models API.

``anthropic`` is imported inside functions only: importing it costs over a second, and
``agentloop --help`` or a test-double loop must not pay that. The sync and async paths share one
conversion core (:func:`build_request_kwargs`, :func:`response_from_message`,
:func:`model_error_from`); only the SDK call itself differs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentloop._adapters.anthropic_capabilities import (
    CapabilityCache,
    ModelCapabilities,
    ModelLifecycle,
    afetch_capabilities,
    fetch_capabilities,
    fetch_model_limits,
    is_bedrock,
)
from agentloop._adapters.anthropic_errors import (
    broken_reply,
    model_error_from,
    refused_compaction,
    refused_on_demand,
    sdk_errors,
)
from agentloop._adapters.anthropic_params import (
    COMPACT_BETA,
    COMPACT_EDIT,
    checked_compaction,
    compaction_param,
    needed_betas,
    thinking_params,
    without_refused_companions,
)
from agentloop._core.measuring.cache import CacheMode, with_cache_breakpoints
from agentloop._core.values.blocks import is_compaction
from agentloop._core.values.messages import (
    ContentBlock,
    Message,
    Usage,
    sdk_block,
    to_params,
)
from agentloop._core.values.model import (
    IterationUsage,
    ModelRequest,
    ModelResponse,
    ServerCompaction,
    TextCallback,
    ThinkingListener,
)
from agentloop._core.values.model_profile import ModelProfile
from agentloop._core.values.profile_table import builtin_profile
from agentloop._errors import (
    ConfigurationError,
    IncompleteReplyError,
    ModelError,
)

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message as SDKMessage
    from anthropic.types.beta import BetaMessage

__all__ = [
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "AnthropicModel",
    "ModelCapabilities",
    "build_request_kwargs",
    "fetch_model_limits",
    "message_from_response",
    "model_error_from",
    "response_from_message",
]

STREAM_TIMEOUT = 90.0
"""Seconds a streamed reply may send nothing before it counts as stalled (a read timeout per
chunk; the API sends ``ping`` events while it works)."""


# ---------------------------------------------------------------------------------------------
# The shared conversion core


def build_request_kwargs(
    request: ModelRequest,
    *,
    cache: CacheMode = "conversation",
    capabilities: ModelProfile | None = None,
) -> dict[str, Any]:
    """The keyword arguments for ``messages.create`` / ``messages.stream``.

    Prompt-cache breakpoints follow the conversation (``measuring/cache.py``): the tools and system
    prefix, the newest message, and the previous request's end where a long tool round would
    put it out of the cache's reach. ``metadata`` is for test doubles and is never sent.
    Thinking and effort follow the model's ``capabilities`` (default: the built-in table, see
    :func:`~agentloop._adapters.anthropic_params.thinking_params`); an on-demand compaction
    (``request.compaction``) carries ``compaction`` and none of what the API refuses beside it.
    """
    caps = capabilities if capabilities is not None else builtin_profile(request.model)
    kwargs: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_params(request.messages),
    }
    if request.system.strip():
        kwargs["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        kwargs["tools"] = [dict(tool) for tool in request.tools]
    kwargs = with_cache_breakpoints(
        kwargs,
        mode=cache,
        mark_newest=request.cache_newest,
        prefix_message=_opens_with_prefix(request.messages),
    )
    kwargs.update(thinking_params(request, caps))
    edit = request.server_compaction
    if edit is not None:
        kwargs["context_management"] = {"edits": [_edit_param(edit)]}
    if request.compaction is not None:
        kwargs = without_refused_companions(kwargs)
        kwargs["compaction"] = compaction_param(request.compaction)
    # A compaction block in the history needs its beta too, whatever the strategy is now.
    betas = needed_betas(request, kwargs)
    if betas:
        kwargs["betas"] = betas
    return kwargs


def _opens_with_prefix(messages: Sequence[Message]) -> bool:
    """Whether the first message stands for what came before: a compaction prefix of ours or
    an on-demand summary block (a breakpoint after it serves every later turn)."""
    if not messages:
        return False
    first = messages[0]
    return first.summary is not None or (bool(first.content) and is_compaction(first.content[0]))


def _edit_param(edit: ServerCompaction) -> dict[str, Any]:
    param: dict[str, Any] = {
        "type": COMPACT_EDIT,
        "trigger": {"type": "input_tokens", "value": edit.trigger_tokens},
        "pause_after_compaction": edit.pause,
    }
    if edit.instructions:
        param["instructions"] = edit.instructions
    return param


def response_from_message(message: SDKMessage | BetaMessage) -> ModelResponse:
    """An SDK ``Message`` (from ``create`` or a stream's final message) as a :class:`ModelResponse`.

    Content blocks become plain dicts holding only the fields the API takes back on input, so the
    reply can be appended to the history and sent again as-is.
    """
    content = tuple(_block_dict(block) for block in message.content)
    iterations = getattr(message.usage, "iterations", None) or ()
    transformations = getattr(message, "input_transformations", None) or ()
    details = getattr(message, "stop_details", None)
    return ModelResponse(
        content=content,
        usage=Usage.from_mapping(message.usage.model_dump()) or Usage(),
        stop_reason=message.stop_reason,
        model=message.model,
        iterations=tuple(
            IterationUsage(str(it.type), Usage.from_mapping(it.model_dump()) or Usage())
            for it in iterations
        ),
        input_transformations=tuple(
            item.model_dump(mode="json", exclude_none=True) for item in transformations
        ),
        stop_details=None if details is None else details.model_dump(mode="json"),
    )


def message_from_response(message: SDKMessage | BetaMessage) -> Message:
    """An SDK ``Message`` (``client.messages.create(...)``'s answer) as the agentloop
    :class:`Message` to append to your history: content ready to send back, and the usage the
    API reported (cache tokens included), which anchors the compacter's measurement."""
    return response_from_message(message).to_message()


def _block_dict(block: Any) -> ContentBlock:
    return sdk_block(block.model_dump(mode="json", exclude_none=True))


# ---------------------------------------------------------------------------------------------
# The model


RetryCallback = Callable[[int, int, str], None]
"""``on_retry(attempt, max_retries, reason)``: attempt counts from 1."""
_SDK_DEFAULT_RETRIES = 2


class _RetryWatch:
    """Tells ``on_retry`` when the SDK starts a retry: every attempt carries the SDK's own
    ``x-stainless-retry-count`` header, and the failure before it left a status (or nothing, for
    a connection that failed)."""

    def __init__(self, on_retry: RetryCallback, max_retries: int | None) -> None:
        self.on_retry = on_retry
        self.max_retries = _SDK_DEFAULT_RETRIES if max_retries is None else max_retries
        self.last_failure = ""

    def request(self, request: Any) -> None:
        attempt = int(request.headers.get("x-stainless-retry-count", "0") or 0)
        if attempt > 0:
            reason = self.last_failure or "no answer (the connection failed or timed out)"
            self.on_retry(attempt, self.max_retries, reason)
        self.last_failure = ""

    def response(self, response: Any) -> None:
        if response.status_code >= 400:
            self.last_failure = f"the API answered {response.status_code}"

    async def arequest(self, request: Any) -> None:
        self.request(request)

    async def aresponse(self, response: Any) -> None:
        self.response(response)

    def hooks(self) -> dict[str, list[Callable[[Any], None]]]:
        return {"request": [self.request], "response": [self.response]}

    def async_hooks(self) -> dict[str, list[Callable[[Any], Awaitable[None]]]]:
        return {"request": [self.arequest], "response": [self.aresponse]}


class AnthropicModel:
    """The model seam over the real ``anthropic`` SDK (sync :meth:`complete`, async
    :meth:`acomplete`).

    Give ready clients (``client`` / ``async_client``) or the settings to create them lazily
    (``api_key``, ``base_url``, ``max_retries``, ``timeout``; unset ones fall back to the SDK's
    defaults and its ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` environment variables). Given
    only a sync ``client``, :meth:`acomplete` runs :meth:`complete` in a worker thread.

    Failures that survive the SDK's own retries raise :class:`ModelError` (or
    :class:`PromptTooLongError`) with a one-line message. ``on_retry(attempt, max_retries,
    reason)`` is called as each of the SDK's retries starts (clients created from settings), so
    a user is not left in silence while a refused connection is retried.

    A streamed reply that stalls (nothing arrives for ``stream_timeout`` seconds: a read
    timeout per chunk), breaks off, carries an ``error`` event or a malformed event raises
    :class:`IncompleteReplyError`: the loop withdraws what was shown and asks once more.

    ``prompt_cache`` says where requests carry cache breakpoints: ``conversation`` (the
    default: tools, system and the conversation, see ``measuring/cache.py``), ``system`` (tools and
    system only) or ``off``.
    """

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        on_retry: RetryCallback | None = None,
        prompt_cache: CacheMode = "conversation",
        stream_timeout: float = STREAM_TIMEOUT,
    ) -> None:
        if prompt_cache not in ("conversation", "system", "off"):
            raise ConfigurationError(
                f"prompt_cache must be 'conversation', 'system' or 'off', not {prompt_cache!r}"
            )
        self.prompt_cache: CacheMode = prompt_cache
        if max_retries is not None and max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, not {max_retries}")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, not {timeout}")
        if not stream_timeout > 0:
            raise ConfigurationError(f"stream_timeout must be positive, not {stream_timeout}")
        self.stream_timeout = float(stream_timeout)
        self._settings: dict[str, Any] = {
            key: value
            for key, value in {
                "api_key": api_key,
                "base_url": base_url,
                "max_retries": max_retries,
                "timeout": timeout,
            }.items()
            if value is not None
        }
        # Clients given by the caller are used as they are (their http client, headers...);
        # clients are only ever created from settings, never derived from a given one.
        self._from_settings = client is None and async_client is None
        if self._settings and not self._from_settings:
            raise ConfigurationError(
                "AnthropicModel takes either ready clients or api_key/base_url/max_retries/"
                "timeout, not both"
            )
        self._client = client
        self._async_client = async_client
        self._lock = threading.Lock()
        self._retries = _RetryWatch(on_retry, max_retries) if on_retry is not None else None
        self._capabilities = CapabilityCache()
        self._lookup: anthropic.Anthropic | None = None
        self._alookup: anthropic.AsyncAnthropic | None = None

    def _sync(self) -> anthropic.Anthropic:
        with self._lock:
            if self._client is None:
                if not self._from_settings:
                    raise ConfigurationError(
                        "AnthropicModel was given only an async_client: call acomplete, "
                        "or pass client= as well"
                    )
                import anthropic

                settings = dict(self._settings)
                if self._retries is not None:
                    hooks = self._retries.hooks()
                    settings["http_client"] = anthropic.DefaultHttpxClient(event_hooks=hooks)
                self._client = anthropic.Anthropic(**settings)
            return self._client

    def _async(self) -> anthropic.AsyncAnthropic | None:
        """The async client, or None when only a sync client was given."""
        with self._lock:
            if self._async_client is None and self._from_settings:
                import anthropic

                settings = dict(self._settings)
                if self._retries is not None:
                    hooks = self._retries.async_hooks()
                    settings["http_client"] = anthropic.DefaultAsyncHttpxClient(event_hooks=hooks)
                self._async_client = anthropic.AsyncAnthropic(**settings)
            return self._async_client

    def supports_server_compaction(self, model: str) -> bool:
        """Whether requests may carry :class:`ServerCompaction` (the API answers for the model:
        a refusal raises :class:`ServerCompactionUnsupported`)."""
        return self.profile(model).server_compaction

    # -- what a model can do (the Models API, once per model) --------------------------------

    def capabilities(self, model: str) -> ModelProfile:
        """What ``model`` takes, from the Models API (asked once per model and remembered);
        the built-in table by model id when it cannot answer (never an error)."""
        known = self._capabilities.get(model)
        if known is None:
            client = self._lookup_client()
            if client is None:  # only an async client: the table until acomplete asks
                return builtin_profile(model)
            try:
                fetched: ModelProfile | ModelError = fetch_capabilities(model, client)
            except ModelError as error:
                fetched = error
            known = self._capabilities.put(model, fetched)
        return known.capabilities

    async def acapabilities(self, model: str) -> ModelProfile:
        """The async form of :meth:`capabilities`."""
        known = self._capabilities.get(model)
        if known is None:
            client = self._alookup_client()
            if client is None:  # only a sync client was given
                return await asyncio.to_thread(self.capabilities, model)
            try:
                fetched: ModelProfile | ModelError = await afetch_capabilities(model, client)
            except ModelError as error:
                fetched = error
            known = self._capabilities.put(model, fetched)
        return known.capabilities

    def profile(self, model: str) -> ModelProfile:
        """What ``model`` can do on this adapter: its :meth:`capabilities` (the Models API,
        once per model; the shipped table when it cannot answer), with no on-demand
        compaction where the Models API cannot vouch for it (Bedrock, no lookup client)."""
        caps = self.capabilities(model)
        client = self._lookup_client() or self._async()
        if caps.on_demand_compaction and (client is None or is_bedrock(client)):
            return replace(caps, on_demand_compaction=False)
        return caps

    def supports_on_demand_compaction(self, model: str) -> bool:
        """Whether the API writes summaries itself for ``model`` (its :meth:`profile`)."""
        return self.profile(model).on_demand_compaction

    def max_reply_tokens(self, model: str) -> int | None:
        """The most ``max_tokens`` the model takes (None: unknown; its :meth:`profile`)."""
        return self.profile(model).max_output_tokens

    def known_lifecycle(self, model: str) -> ModelLifecycle | None:
        """What the Models API said of ``model``'s lifecycle, if it was asked already (by a
        request or a lookup of limits); never a lookup of its own."""
        known = self._capabilities.get(model)
        return None if known is None else known.capabilities.lifecycle

    def fetch_limits(self, model: str) -> tuple[int | None, int | None]:
        """``(max_input_tokens, max_tokens)`` as the Models API gave them, for a
        :class:`~agentloop.ContextWindowResolver`; raises :class:`ModelError` when it could
        not answer (the resolver then uses its own table). Shares this model's one lookup."""
        caps = self.capabilities(model)
        known = self._capabilities.get(model)
        if known is not None and known.failure is not None:
            raise ModelError(known.failure, status_code=known.status)
        return caps.context_window, caps.max_output_tokens

    # -- requests ----------------------------------------------------------------------------

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        """Send the request; with ``on_text``, stream and pass each text delta to it (and the
        thinking's to ``on_text.on_thinking``, see :class:`ThinkingListener`)."""
        client = self._sync()
        caps = self.capabilities(request.model)
        kwargs = build_request_kwargs(request, cache=self.prompt_cache, capabilities=caps)
        api = _messages_api(client, kwargs)
        on_text = _streamed_if_long(kwargs, on_text)
        with refused_on_demand(request), refused_compaction(request), sdk_errors(client):
            if on_text is None:
                message = api.create(**kwargs)
            else:
                stall = _stall_timeout(client, self.stream_timeout)
                with api.stream(**kwargs, timeout=stall) as stream:
                    return _finished(request, _read_stream(stream, on_text, stall))
        return _finished(request, response_from_message(message))

    async def acomplete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """The async form of :meth:`complete`."""
        client = self._async()
        if client is None:  # only a sync client was given
            return await asyncio.to_thread(self.complete, request, on_text)
        caps = await self.acapabilities(request.model)
        kwargs = build_request_kwargs(request, cache=self.prompt_cache, capabilities=caps)
        api = _messages_api(client, kwargs)
        on_text = _streamed_if_long(kwargs, on_text)
        with refused_on_demand(request), refused_compaction(request), sdk_errors(client):
            if on_text is None:
                message = await api.create(**kwargs)
            else:
                stall = _stall_timeout(client, self.stream_timeout)
                async with api.stream(**kwargs, timeout=stall) as stream:
                    return _finished(request, await _aread_stream(stream, on_text, stall))
        return _finished(request, response_from_message(message))

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens the API counts for ``request`` (``messages.count_tokens``, free)."""
        client = self._sync()
        caps = self.capabilities(request.model)
        kwargs = _count_kwargs(request, self.prompt_cache, caps)
        with sdk_errors(client):
            counted = _messages_api(client, kwargs).count_tokens(**kwargs)
        return int(counted.input_tokens)

    def _lookup_client(self) -> anthropic.Anthropic | None:
        """The sync client the Models API is asked with (None: only an async client was
        given). One created from settings has no retry hooks: a lookup is not the reply the
        user waits for, and its failure only means the built-in table."""
        if not self._from_settings:
            return self._client
        with self._lock:
            if self._lookup is None:
                import anthropic

                self._lookup = anthropic.Anthropic(**self._settings)
            return self._lookup

    def _alookup_client(self) -> anthropic.AsyncAnthropic | None:
        """The async form of :meth:`_lookup_client` (None: only a sync client was given)."""
        if not self._from_settings:
            return self._async_client
        with self._lock:
            if self._alookup is None:
                import anthropic

                self._alookup = anthropic.AsyncAnthropic(**self._settings)
            return self._alookup


def _messages_api(client: anthropic.Anthropic | anthropic.AsyncAnthropic, kwargs: Any) -> Any:
    """``client.beta.messages`` for a request with a beta (server compaction), else
    ``client.messages``."""
    return client.beta.messages if "betas" in kwargs else client.messages


def _stall_timeout(client: anthropic.Anthropic | anthropic.AsyncAnthropic, stall: float) -> Any:
    """The client's timeout with its read timeout (the longest wait for the next chunk of a
    stream) at most ``stall`` seconds: a stalled stream is noticed in a bounded time."""
    import anthropic

    base = client.timeout
    if isinstance(base, anthropic.Timeout):
        read = stall if base.read is None else min(base.read, stall)
        return anthropic.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)
    if isinstance(base, int | float):
        return anthropic.Timeout(float(base), read=min(float(base), stall))
    return anthropic.Timeout(None, read=stall)


def _read_stream(stream: Any, on_text: TextCallback, stall: Any) -> ModelResponse:
    """Read a streamed reply to its end, each text delta handed to ``on_text`` (outside the
    error mapping: what the callback raises stays its own)."""
    events = iter(stream)
    stopped = False
    while True:
        with broken_reply(stall):
            event = next(events, None)
        if event is None:
            break
        stopped = _passed_on(event, on_text) or stopped
    _require_stop(stopped)
    with broken_reply(stall):
        return response_from_message(stream.current_message_snapshot)


async def _aread_stream(stream: Any, on_text: TextCallback, stall: Any) -> ModelResponse:
    """The async form of :func:`_read_stream`."""
    events = stream.__aiter__()
    stopped = False
    while True:
        with broken_reply(stall):
            event = await anext(events, None)
        if event is None:
            break
        stopped = _passed_on(event, on_text) or stopped
    _require_stop(stopped)
    with broken_reply(stall):
        return response_from_message(stream.current_message_snapshot)


def _passed_on(event: Any, on_text: TextCallback) -> bool:
    """Hand a streamed text delta to ``on_text`` (thinking to its ``on_thinking``, a newline
    opening each thinking block after the first); True for the event that ends the message."""
    kind = event.type
    if kind == "text":
        on_text(event.text)
    elif kind == "thinking" and isinstance(on_text, ThinkingListener):
        if event.thinking:
            on_text.on_thinking(event.thinking)
    elif (
        kind == "content_block_start"
        and isinstance(on_text, ThinkingListener)
        and getattr(event.content_block, "type", None) == "thinking"
        and event.index > 0
    ):
        on_text.on_thinking("\n")
    return bool(kind == "message_stop")


_NONSTREAMING_MAX_TOKENS = 21_000
"""Above this ``max_tokens`` the SDK refuses a call that is not streamed (it could take over
ten minutes): such a call is streamed here, its text handed to nobody."""


def _ignore(_delta: str) -> None:
    pass


def _streamed_if_long(kwargs: dict[str, Any], on_text: TextCallback | None) -> TextCallback | None:
    if on_text is None and int(kwargs["max_tokens"]) > _NONSTREAMING_MAX_TOKENS:
        return _ignore
    return on_text


def _finished(request: ModelRequest, response: ModelResponse) -> ModelResponse:
    """An on-demand compaction's reply checked for its summary (see ``checked_compaction``)."""
    return checked_compaction(response) if request.compaction is not None else response


def _count_kwargs(
    request: ModelRequest, cache: CacheMode, caps: ModelProfile | None = None
) -> dict[str, Any]:
    """``messages.count_tokens`` takes what ``create`` takes, less the reply size (it ignores
    ``compaction``, which is left out)."""
    kwargs = build_request_kwargs(request, cache=cache, capabilities=caps)
    kwargs.pop("max_tokens")
    kwargs.pop("compaction", None)
    return kwargs


def _require_stop(stopped: bool) -> None:
    """A stream that ended without ``message_stop`` — cut before its first event, or after
    some — is no whole answer, whatever its snapshot holds (read only after this check)."""
    if not stopped:
        raise IncompleteReplyError(
            "the API's reply broke off before its end (the stream closed without message_stop)"
        )
