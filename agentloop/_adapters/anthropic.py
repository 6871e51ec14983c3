"""The ``anthropic`` adapter for the model seam: :class:`AnthropicModel` and the Models API.

``anthropic`` is imported inside functions only: importing it costs over a second, and
``agentloop --help`` or a test-double loop must not pay that. The sync and async paths share one
conversion core (:func:`build_request_kwargs`, :func:`response_from_message`,
:func:`model_error_from`); only the SDK call itself differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agentloop._core.messages import ContentBlock, Message, Usage, has_compaction, to_params
from agentloop._core.model import (
    IterationUsage,
    ModelRequest,
    ModelResponse,
    ServerCompaction,
    ServerCompactionUnsupported,
    TextCallback,
)
from agentloop._errors import (
    ConfigurationError,
    IncompleteReplyError,
    ModelError,
    PromptTooLongError,
)

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message as SDKMessage
    from anthropic.types.beta import BetaMessage

__all__ = [
    "AnthropicModel",
    "build_request_kwargs",
    "fetch_model_limits",
    "message_from_response",
    "model_error_from",
    "response_from_message",
]

# What the API accepts back on input for the blocks it returns. Anything else the SDK adds to its
# response objects (``parsed_output``, ``caller``, ``citations=None``...) would be refused with
# "Extra inputs are not permitted" when the reply is sent back as history.
_INPUT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "text": ("type", "text", "citations"),
    "tool_use": ("type", "id", "name", "input"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    # Sent back verbatim: the API checks the signature and continues from the block.
    "compaction": ("type", "content", "encrypted_content", "signature", "tool_changes"),
}

COMPACT_BETA = "compact-2026-01-12"
"""The beta of server-side compaction (the ``compact_20260112`` context edit)."""
COMPACT_EDIT = "compact_20260112"
# Words of a 400 that refuses the beta or the edit (a model or endpoint without compaction).
_REFUSED_COMPACTION = ("compact", "context_management", "context management", "anthropic-beta")

_MAX_DETAIL = 300
_NO_KEY = "no API key: set ANTHROPIC_API_KEY (or pass api_key=)"
_MODELS_API_RETRIES = 1
_MODELS_API_TIMEOUT = 15.0


# ---------------------------------------------------------------------------------------------
# The shared conversion core


def build_request_kwargs(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments for ``messages.create`` / ``messages.stream``.

    The system prompt goes as one text block marked ``cache_control: ephemeral``: it is byte-stable
    across turns, so the tools and system prefix is served from the prompt cache. ``metadata`` is
    for test doubles and is never sent.
    """
    kwargs: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_params(request.messages),
    }
    if request.system.strip():
        kwargs["system"] = [
            {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
        ]
    if request.tools:
        kwargs["tools"] = [dict(tool) for tool in request.tools]
    edit = request.server_compaction
    if edit is not None:
        kwargs["context_management"] = {"edits": [_edit_param(edit)]}
    # A compaction block in the history needs the beta too, whatever the strategy is now.
    if edit is not None or has_compaction(request.messages):
        kwargs["betas"] = [COMPACT_BETA]
    return kwargs


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
    return ModelResponse(
        content=content,
        usage=Usage.from_mapping(message.usage.model_dump()) or Usage(),
        stop_reason=message.stop_reason,
        model=message.model,
        iterations=tuple(
            IterationUsage(str(it.type), Usage.from_mapping(it.model_dump()) or Usage())
            for it in iterations
        ),
    )


def message_from_response(message: SDKMessage) -> Message:
    """An SDK ``Message`` (``client.messages.create(...)``'s answer) as the agentloop
    :class:`Message` to append to your history: content ready to send back, and the usage the
    API reported (cache tokens included), which anchors the compacter's measurement."""
    return response_from_message(message).to_message()


def _block_dict(block: Any) -> ContentBlock:
    data: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    fields = _INPUT_FIELDS.get(str(data.get("type")))
    if fields is None:
        return data  # a block type we do not know: passed through untouched
    kept = {key: data[key] for key in fields if key in data}
    if not kept.get("citations"):
        kept.pop("citations", None)
    return kept


def model_error_from(
    error: BaseException, *, base_url: str | None = None, retries: int | None = None
) -> ModelError | None:
    """The one-line :class:`ModelError` for an SDK error (None when ``error`` is not one).

    ``retries`` is how many retries the SDK made before giving up (its ``max_retries``), quoted
    for the statuses it retries.
    """
    import anthropic

    if isinstance(error, anthropic.APIStatusError):
        return _status_error(error, retries)
    if isinstance(error, anthropic.APITimeoutError):
        where = f" at {base_url}" if base_url else ""
        return ModelError(f"could not reach the API{where}: the request timed out{_after(retries)}")
    if isinstance(error, anthropic.APIConnectionError):
        where = f" at {base_url}" if base_url else ""
        return ModelError(f"could not reach the API{where}: {_detail(error)}")
    if isinstance(error, anthropic.APIError):
        return ModelError(f"the API call failed: {_one_line(error.message)}")
    if isinstance(error, anthropic.AnthropicError):  # e.g. an unreadable credentials file
        return ModelError(f"the anthropic client failed: {_one_line(str(error))}")
    if isinstance(error, TypeError) and "Could not resolve authentication method" in str(error):
        # The SDK's way of saying that no key was found anywhere (a TypeError at request time).
        return ModelError(_NO_KEY)
    return None


def _status_error(error: anthropic.APIStatusError, retries: int | None) -> ModelError:
    status = error.status_code
    message = _api_message(error)
    kind = _api_error_type(error)
    if status == 400 and _says_prompt_too_long(error, message):
        return PromptTooLongError(message, status_code=status)
    if status == 401:
        return ModelError("authentication failed: check ANTHROPIC_API_KEY", status_code=status)
    if status == 403:
        text = f"permission denied (403): {message}"
    elif status == 404:
        text = f"not found (404): {message}"
    elif status == 529 or kind == "overloaded_error":
        text = f"the API is overloaded ({status}){_after(retries)}; try again in a moment"
    elif status == 429:
        text = f"rate limited by the API (429){_after(retries)}: {message}"
    elif status >= 500:
        text = f"the API failed with a server error ({status}){_after(retries)}: {message}"
    else:
        label = f"{status} {kind}" if kind else str(status)
        text = f"the API refused the request ({label}): {message}"
    return ModelError(text, status_code=status)


def _says_prompt_too_long(error: anthropic.APIStatusError, message: str) -> bool:
    lowered = message.lower()
    # The second form is the API's answer when input + max_tokens exceed the window: the cure,
    # compaction, is the same.
    return (
        "prompt is too long" in lowered
        or "exceed context limit" in lowered
        or getattr(error, "error_code", None) == "prompt_too_long"
    )


def _api_message(error: anthropic.APIStatusError) -> str:
    message = getattr(error, "api_message", None)  # newer SDKs parse it for us
    if not isinstance(message, str) or not message:
        body = error.body
        inner = body.get("error") if isinstance(body, dict) else None
        message = inner.get("message") if isinstance(inner, dict) else None
    if not isinstance(message, str) or not message:
        message = error.message
    return _one_line(message)


def _api_error_type(error: anthropic.APIStatusError) -> str | None:
    kind = getattr(error, "type", None)
    if isinstance(kind, str) and kind:
        return kind
    body = error.body
    inner = body.get("error") if isinstance(body, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return kind if isinstance(kind, str) else None


def _detail(error: anthropic.APIError) -> str:
    # The SDK's message ("Connection error.") hides the cause; the cause says what happened.
    cause = error.__cause__ or error.__context__
    parts = [error.message.rstrip(".")]
    if cause is not None and str(cause):
        parts.append(str(cause))
    return _one_line(" (".join(parts) + (")" if len(parts) > 1 else ""))


def _after(retries: int | None) -> str:
    if not retries:
        return ""
    return f" after {retries} {'retry' if retries == 1 else 'retries'}"


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_DETAIL else line[: _MAX_DETAIL - 1] + "…"


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
    ) -> None:
        if max_retries is not None and max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, not {max_retries}")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, not {timeout}")
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
        return True

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        """Send the request; with ``on_text``, stream and pass each text delta to it."""
        client = self._sync()
        kwargs = build_request_kwargs(request)
        api = _messages_api(client, kwargs)
        with _refused_compaction(request), _sdk_errors(client):
            if on_text is None:
                message = api.create(**kwargs)
            else:
                with api.stream(**kwargs) as stream:
                    stopped = False
                    for event in stream:
                        stopped = _passed_on(event, on_text) or stopped
                    _require_stop(stopped)
                    message = stream.current_message_snapshot
        return response_from_message(message)

    async def acomplete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """The async form of :meth:`complete`."""
        client = self._async()
        if client is None:  # only a sync client was given
            return await asyncio.to_thread(self.complete, request, on_text)
        kwargs = build_request_kwargs(request)
        api = _messages_api(client, kwargs)
        with _refused_compaction(request), _sdk_errors(client):
            if on_text is None:
                message = await api.create(**kwargs)
            else:
                async with api.stream(**kwargs) as stream:
                    stopped = False
                    async for event in stream:
                        stopped = _passed_on(event, on_text) or stopped
                    _require_stop(stopped)
                    message = stream.current_message_snapshot
        return response_from_message(message)

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens the API counts for ``request`` (``messages.count_tokens``, free)."""
        client = self._sync()
        kwargs = _count_kwargs(request)
        with _sdk_errors(client):
            counted = _messages_api(client, kwargs).count_tokens(**kwargs)
        return int(counted.input_tokens)

    async def acount_tokens(self, request: ModelRequest) -> int:
        """The async form of :meth:`count_tokens`."""
        client = self._async()
        if client is None:
            return await asyncio.to_thread(self.count_tokens, request)
        kwargs = _count_kwargs(request)
        with _sdk_errors(client):
            counted = await _messages_api(client, kwargs).count_tokens(**kwargs)
        return int(counted.input_tokens)


def _messages_api(client: anthropic.Anthropic | anthropic.AsyncAnthropic, kwargs: Any) -> Any:
    """``client.beta.messages`` for a request with a beta (server compaction), else
    ``client.messages``."""
    return client.beta.messages if "betas" in kwargs else client.messages


@contextlib.contextmanager
def _refused_compaction(request: ModelRequest) -> Iterator[None]:
    """A 400 that refuses the compaction beta or edit as :class:`ServerCompactionUnsupported`
    (the loop then compacts locally)."""
    try:
        yield
    except ModelError as error:
        refused = (
            request.server_compaction is not None
            and error.status_code == 400
            and not isinstance(error, PromptTooLongError)
            and any(word in str(error).lower() for word in _REFUSED_COMPACTION)
        )
        if not refused:
            raise
        raise ServerCompactionUnsupported(str(error), status_code=400) from error


@contextlib.contextmanager
def _sdk_errors(client: anthropic.Anthropic | anthropic.AsyncAnthropic) -> Iterator[None]:
    """SDK errors (after its own retries) and transport errors as one-line
    :class:`ModelError`; other exceptions pass."""
    import anthropic

    try:
        yield
    except (anthropic.AnthropicError, TypeError) as error:
        mapped = _translated(error, client)
        if mapped is None:
            raise
        raise mapped from error
    except Exception as error:
        if not _is_transport_error(error):
            raise
        # The SDK wraps what fails before a reply starts; a stream that breaks midway comes
        # up raw from the HTTP layer ("peer closed connection ... incomplete chunked read").
        detail = _one_line(str(error) or type(error).__name__)
        raise IncompleteReplyError(
            f"the connection to the API broke off mid-reply ({detail})"
        ) from error


def _is_transport_error(error: BaseException) -> bool:
    module = type(error).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "h11") or isinstance(error, OSError)


def _passed_on(event: Any, on_text: TextCallback) -> bool:
    """Hand a streamed text delta to ``on_text``; True for the event that ends the message."""
    if event.type == "text":
        on_text(event.text)
    return bool(event.type == "message_stop")


def _count_kwargs(request: ModelRequest) -> dict[str, Any]:
    """``messages.count_tokens`` takes what ``create`` takes, less the reply size."""
    kwargs = build_request_kwargs(request)
    kwargs.pop("max_tokens")
    return kwargs


def _require_stop(stopped: bool) -> None:
    """A stream that ended without ``message_stop`` — cut before its first event, or after
    some — is no whole answer, whatever its snapshot holds (read only after this check)."""
    if not stopped:
        raise IncompleteReplyError(
            "the API's reply broke off before its end (the stream closed without message_stop)"
        )


def _translated(
    error: BaseException, client: anthropic.Anthropic | anthropic.AsyncAnthropic
) -> ModelError | None:
    """The ModelError for what a call raised; None for an error that is not the SDK's."""
    return model_error_from(error, base_url=str(client.base_url), retries=client.max_retries)


# ---------------------------------------------------------------------------------------------
# The Models API


def fetch_model_limits(
    model: str,
    *,
    client: anthropic.Anthropic | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
) -> tuple[int | None, int | None]:
    """``(max_input_tokens, max_tokens)`` of ``model`` from the Models API.

    Raises :class:`ModelError` when the API cannot answer (unknown model, no key, unreachable);
    the caller falls back to its built-in table. A client created here retries once with a short
    timeout, since a fallback exists.
    """
    import anthropic

    if client is None:
        settings: dict[str, Any] = {
            "max_retries": _MODELS_API_RETRIES,
            "timeout": _MODELS_API_TIMEOUT,
        }
        if api_key is not None:
            settings["api_key"] = api_key
        if base_url is not None:
            settings["base_url"] = base_url
        try:
            client = anthropic.Anthropic(**settings)
        except anthropic.AnthropicError as error:  # e.g. an unreadable credentials file
            raise ModelError(
                f"could not ask the Models API about {model}: {_one_line(str(error))}"
            ) from error
    try:
        info = client.models.retrieve(model)
    except anthropic.NotFoundError as error:
        raise ModelError(
            f"the Models API does not know the model {model!r}", status_code=404
        ) from error
    except (anthropic.AnthropicError, TypeError) as error:
        mapped = _translated(error, client)
        if mapped is None:
            raise
        raise ModelError(
            f"could not ask the Models API about {model}: {mapped}", status_code=mapped.status_code
        ) from error
    max_input = getattr(info, "max_input_tokens", None)
    max_output = getattr(info, "max_tokens", None)
    return (
        max_input if isinstance(max_input, int) else None,
        max_output if isinstance(max_output, int) else None,
    )
