"""A small Messages-API server of our own on 127.0.0.1, for driving the real ``anthropic`` SDK.

Tests script its replies (a queue of :class:`Reply` / :class:`ErrorReply` and/or a handler
callable), point the SDK at ``server.base_url`` and afterwards inspect ``server.requests`` and
assert ``server.violations == []``. Every ``POST /v1/messages`` (and ``count_tokens``) is checked
against the API's conversation rules by :func:`check_request`, written independently of
agentloop's own validator so that it can catch agentloop's mistakes; a violating request is
answered with a 400 ``invalid_request_error`` as the API would.

Reported ``input_tokens`` are counted from the content (:mod:`fake_api.counting`): text and JSON
with tiktoken times ``token_factor``, a fixed ``message_overhead`` per message, images by their
pixels and PDFs by their pages (``media_costs``). ``POST /v1/messages/count_tokens`` answers the
very figure a ``/v1/messages`` call with the same body reports as input plus cache tokens.

Prompt caching (:mod:`fake_api.cache`, on unless ``prompt_caching=False``): ``cache_control``
breakpoints write and read cache entries as the API does (per model, 5 minutes or 1 hour from
their last use on ``server.cache``'s clock, see :meth:`FakeAnthropicServer.advance_clock`), the
usage reports them, and ``server.bills`` keeps one :class:`Bill` per answered request
(:func:`billed_ratio`: what a run paid over what it would have paid without the cache).

Faults on the wire (:class:`Fault`, :func:`dropped_reply`, :func:`unfinished_reply`,
:func:`stalled_reply`; a reply's ``framing``): a stream whose connection drops (close-delimited
or chunked, between events or inside one, FIN or RST), one that ends without ``message_stop``,
a stall bounded in time, bytes injected as they are (:func:`injected_reply`,
:func:`error_event_reply`); error sequences are queues of :class:`ErrorReply`.

Modules: ``replies`` (reply specs), ``faults`` (writing bodies and their faults), ``rules``
(:func:`check_request`), ``media`` (image and PDF headers), ``counting`` (token costs),
``cache`` (the prompt cache and bills), ``server`` (:class:`FakeAnthropicServer`). Standard
library only (plus tiktoken for counting); the SDK is imported only by the convenience
:meth:`FakeAnthropicServer.client` / :meth:`FakeAnthropicServer.async_client`.
``tests/support/fake_server.py`` holds the ``fake_api``
pytest fixture.
"""

from fake_api.cache import Bill, billed_ratio
from fake_api.counting import PDF_PAGE_TOKENS, MediaPrices, text_tokens
from fake_api.handler import RecordedRequest
from fake_api.media import IMAGE_TOKEN_CAP, ImageInfo, image_tokens, pdf_pages, sniff_image
from fake_api.replies import (
    ANTHROPIC_VERSION,
    TEST_API_KEY,
    ErrorReply,
    Fault,
    FaultKind,
    Framing,
    Handler,
    Reply,
    ReplySpec,
    ToolCall,
    api_error,
    dropped_reply,
    error_event,
    error_event_reply,
    injected_reply,
    invalid_request,
    overloaded,
    prompt_too_long,
    rate_limited,
    stalled_reply,
    text_reply,
    tool_reply,
    unauthorized,
    unfinished_reply,
)
from fake_api.rules import check_request
from fake_api.server import DEFAULT_MODELS, FakeAnthropicServer, ModelSpec

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MODELS",
    "IMAGE_TOKEN_CAP",
    "PDF_PAGE_TOKENS",
    "TEST_API_KEY",
    "Bill",
    "ErrorReply",
    "FakeAnthropicServer",
    "Fault",
    "FaultKind",
    "Framing",
    "Handler",
    "ImageInfo",
    "MediaPrices",
    "ModelSpec",
    "RecordedRequest",
    "Reply",
    "ReplySpec",
    "ToolCall",
    "api_error",
    "billed_ratio",
    "check_request",
    "dropped_reply",
    "error_event",
    "error_event_reply",
    "image_tokens",
    "injected_reply",
    "invalid_request",
    "overloaded",
    "pdf_pages",
    "prompt_too_long",
    "rate_limited",
    "sniff_image",
    "stalled_reply",
    "text_reply",
    "text_tokens",
    "tool_reply",
    "unauthorized",
    "unfinished_reply",
]
