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

The API of late 2026 (issue 27, notes ``api-thinking-and-compaction.md``):

- Thinking (:mod:`fake_api.thinking`): the 5.x models (``claude-sonnet-5-5``,
  ``claude-opus-5-5``, ``claude-haiku-5-5``, any ``claude-*-5-*``, Fable/Mythos) think by
  default: replies begin with a signed ``thinking`` block (``thinking: ""`` unless
  ``display: "summarized"``) and have a progress-update block before each ``tool_use``; each
  block's hidden figure (``thinking_tokens``, 24) counts in ``output_tokens``, against
  ``max_tokens`` (a reply that does not fit is cut, ``stop_reason: "max_tokens"``) and as input
  when sent back. ``Reply(thinking=False)`` opts out, ``thinking="..."`` sets the text.
- Thinking sent back (:mod:`fake_api.binding`, :mod:`fake_api.prefix_chain`): the signature
  binds model, account, ``system`` + non-deferred ``tools`` and the prefix; an altered signature,
  an edited latest assistant turn, a changed prefix, a gap or a re-inserted block are refused
  with the API's messages; ``drop_block`` (beta ``thinking-binding-controls-2026-08-01``) drops
  them and reports ``input_transformations``. ``account_created_after_cutoff=False``: the check
  is enforced only on requests that set ``prefix_mismatch_behavior``.
- What the 5.x models refuse (:mod:`fake_api.model_rules`): ``thinking.type`` values, forced
  ``tool_choice``, sampling options, prefill, ``between_tools`` misuse; mid-conversation system
  messages where the model or the position does not allow them (:mod:`fake_api.system_messages`).
- On-demand compaction (:mod:`fake_api.ondemand`, beta ``compact-2026-09-04``): the signed
  block, its errors with ``error.details.error_code``, the kept-turn rule;
  :meth:`FakeAnthropicServer.fail_next_compactions` injects failures.
- The Models API answers ``capabilities`` (:mod:`fake_api.model_facts`); stop reasons on demand:
  :func:`pause_reply`, :func:`refusal_reply`, :func:`context_exceeded_reply`,
  :func:`cut_tool_reply`.
- Every request refused by these rules is recorded in ``server.violations`` (and
  ``server.refusals``) unless the test called ``server.expect_refusals()``.

Modules: ``replies`` (reply specs), ``faults`` (writing bodies and their faults), ``gate`` (the
order of the checks), ``rules`` (:func:`check_request`), ``model_rules``, ``system_messages``,
``binding``, ``prefix_chain``, ``signing``, ``thinking``, ``ondemand``, ``model_facts``,
``media`` (image and PDF headers), ``counting`` (token costs), ``cache`` (the prompt cache and
bills), ``compaction`` (threshold compaction), ``server`` (:class:`FakeAnthropicServer`).
Standard library only (plus tiktoken for counting); the SDK is imported only by the convenience
:meth:`FakeAnthropicServer.client` / :meth:`FakeAnthropicServer.async_client`.
``tests/support/fake_server.py`` holds the ``fake_api`` pytest fixture.
"""

from fake_api.binding import BINDING_BETA
from fake_api.cache import Bill, billed_ratio
from fake_api.compaction import COMPACT_BETA
from fake_api.counting import PDF_PAGE_TOKENS, MediaPrices, text_tokens
from fake_api.handler import RecordedRequest
from fake_api.media import IMAGE_TOKEN_CAP, ImageInfo, image_tokens, pdf_pages, sniff_image
from fake_api.ondemand import ONDEMAND_BETA
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
    compaction_unavailable,
    context_exceeded_reply,
    cut_tool_reply,
    dropped_reply,
    error_event,
    error_event_reply,
    injected_reply,
    invalid_request,
    overloaded,
    pause_reply,
    prompt_too_long,
    rate_limited,
    refusal_reply,
    stalled_reply,
    text_reply,
    tool_reply,
    unauthorized,
    unfinished_reply,
)
from fake_api.rules import check_request
from fake_api.server import DEFAULT_MODELS, FakeAnthropicServer, ModelSpec
from fake_api.signing import read as read_signature

__all__ = [
    "ANTHROPIC_VERSION",
    "BINDING_BETA",
    "COMPACT_BETA",
    "DEFAULT_MODELS",
    "IMAGE_TOKEN_CAP",
    "ONDEMAND_BETA",
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
    "compaction_unavailable",
    "context_exceeded_reply",
    "cut_tool_reply",
    "dropped_reply",
    "error_event",
    "error_event_reply",
    "image_tokens",
    "injected_reply",
    "invalid_request",
    "overloaded",
    "pause_reply",
    "pdf_pages",
    "prompt_too_long",
    "rate_limited",
    "read_signature",
    "refusal_reply",
    "sniff_image",
    "stalled_reply",
    "text_reply",
    "text_tokens",
    "tool_reply",
    "unauthorized",
    "unfinished_reply",
]
