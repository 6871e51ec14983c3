"""The anthropic SDK's errors as agentloop's one-line :class:`ModelError` (the sync and async
paths and the Models API share this mapping); ``anthropic`` is imported inside functions only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentloop._core.values.model import ModelRequest, ServerCompactionUnsupported
from agentloop._errors import (
    CompactionFailed,
    IncompleteReplyError,
    ModelError,
    PromptTooLongError,
    ThinkingBindingError,
)

if TYPE_CHECKING:
    import anthropic

BOUND_ELSEWHERE = "bound to a different conversation"
"""The words of the API's 400 for a thinking block whose prefix changed."""
_REFUSED_COMPACTION = ("compact", "context_management", "context management", "anthropic-beta")
_MAX_DETAIL = 300
NO_KEY = "no API key: set ANTHROPIC_API_KEY (or pass api_key=)"


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
        return ModelError(f"the API call failed: {one_line(error.message)}")
    if isinstance(error, anthropic.AnthropicError):  # e.g. an unreadable credentials file
        return ModelError(f"the anthropic client failed: {one_line(str(error))}")
    if isinstance(error, TypeError) and "Could not resolve authentication method" in str(error):
        # The SDK's way of saying that no key was found anywhere (a TypeError at request time).
        return ModelError(NO_KEY)
    return None


def _status_error(error: anthropic.APIStatusError, retries: int | None) -> ModelError:
    status = error.status_code
    message = _api_message(error)
    kind = _api_error_type(error)
    if status == 400 and _says_prompt_too_long(error, message):
        return PromptTooLongError(message, status_code=status)
    if status == 400 and BOUND_ELSEWHERE in message:
        return ThinkingBindingError(
            f"the API refused a thinking block sent back (400): {message}", status_code=status
        )
    code = getattr(error, "error_code", None)
    if code == "compaction_unavailable":
        return ModelError(
            f"the API could not compact now ({status} compaction_unavailable){_after(retries)}",
            status_code=status,
        )
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
    return one_line(message)


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
    return one_line(" (".join(parts) + (")" if len(parts) > 1 else ""))


def _after(retries: int | None) -> str:
    if not retries:
        return ""
    return f" after {retries} {'retry' if retries == 1 else 'retries'}"


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_DETAIL else line[: _MAX_DETAIL - 1] + "…"


@contextlib.contextmanager
def refused_compaction(request: ModelRequest) -> Iterator[None]:
    """A 400 that refuses the compaction beta or edit as :class:`ServerCompactionUnsupported`
    (the loop then compacts locally)."""
    try:
        yield
    except ModelError as error:
        refused = (
            request.server_compaction is not None
            and error.status_code == 400
            and not isinstance(error, PromptTooLongError | ThinkingBindingError)
            and any(word in str(error).lower() for word in _REFUSED_COMPACTION)
        )
        if not refused:
            raise
        raise ServerCompactionUnsupported(str(error), status_code=400) from error


@contextlib.contextmanager
def refused_on_demand(request: ModelRequest) -> Iterator[None]:
    """An error the API answers an on-demand compaction with (a ``compaction_*`` code, or the
    beta refused) as :class:`CompactionFailed`: the caller keeps the history and summarizes
    another way."""
    try:
        yield
    except ModelError as error:
        if request.compaction is None or isinstance(error, CompactionFailed | ThinkingBindingError):
            raise
        code = getattr(error.__cause__, "error_code", None)
        about_compaction = (isinstance(code, str) and code.startswith("compaction")) or (
            error.status_code == 400 and "compact" in str(error).lower()
        )
        if not about_compaction:
            raise
        raise CompactionFailed(str(error), status_code=error.status_code) from error


@contextlib.contextmanager
def sdk_errors(client: anthropic.Anthropic | anthropic.AsyncAnthropic) -> Iterator[None]:
    """SDK errors (after its own retries) and transport errors as one-line
    :class:`ModelError`; other exceptions pass."""
    import anthropic

    try:
        yield
    except (anthropic.AnthropicError, TypeError) as error:
        mapped = translated(error, client)
        if mapped is None:
            raise
        raise mapped from error
    except Exception as error:
        if not _is_transport_error(error):
            raise
        # The SDK wraps what fails before a reply starts; a stream that breaks midway comes
        # up raw from the HTTP layer ("peer closed connection ... incomplete chunked read").
        detail = one_line(str(error) or type(error).__name__)
        raise IncompleteReplyError(
            f"the connection to the API broke off mid-reply ({detail})"
        ) from error


def _is_transport_error(error: BaseException) -> bool:
    module = type(error).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "h11") or isinstance(error, OSError)


@contextlib.contextmanager
def broken_reply(stall: Any) -> Iterator[None]:
    """What goes wrong while a reply streams, as an :class:`IncompleteReplyError` (withdrawn
    and asked again by the loop, never stored): a stall, an ``error`` event, an event that is
    not JSON or not of the shape the SDK expects. A connection that breaks passes (see
    :func:`sdk_errors`)."""
    import anthropic

    try:
        yield
    except anthropic.APIStatusError as error:  # an `error` event: the status was 200 already
        kind = _api_error_type(error) or "error"
        raise IncompleteReplyError(
            f"the API reported an error mid-reply ({kind}: {_api_message(error)})"
        ) from error
    except Exception as error:
        if _is_timeout(error):
            raise IncompleteReplyError(
                f"the reply stalled: nothing came for {stall.read:g} s (the read timed out)"
            ) from error
        if _is_transport_error(error) or isinstance(error, anthropic.AnthropicError):
            raise
        detail = one_line(f"{type(error).__name__}: {error}")
        raise IncompleteReplyError(f"the API's reply was malformed ({detail})") from error


def _is_timeout(error: BaseException) -> bool:
    import anthropic

    if isinstance(error, anthropic.APITimeoutError | TimeoutError):
        return True
    return _is_transport_error(error) and "Timeout" in type(error).__name__


def translated(
    error: BaseException, client: anthropic.Anthropic | anthropic.AsyncAnthropic
) -> ModelError | None:
    """The ModelError for what a call raised; None for an error that is not the SDK's."""
    return model_error_from(error, base_url=str(client.base_url), retries=client.max_retries)
