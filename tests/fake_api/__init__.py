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

The API of late 2026:

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
- The Models API answers ``capabilities`` (:mod:`fake_api.model_facts`) and each model's
  ``lifecycle``, ``deprecated_at`` and ``retires_at`` (``ModelSpec``); stop reasons on demand:
  :func:`pause_reply`, :func:`refusal_reply`, :func:`context_exceeded_reply`,
  :func:`cut_tool_reply`.
- Every request refused by these rules is recorded in ``server.violations`` (and
  ``server.refusals``) unless the test called ``server.expect_refusals()``.

Rules it enforces, by the docs page they come from (``platform.claude.com/docs/en/...``). Each is a
400 ``invalid_request_error`` (with ``error.details.error_code`` where the docs give one)
unless said otherwise:

- ``api/messages``: the top-level fields (``max_tokens`` an integer, ``0`` a cache keep-alive
  that samples nothing); ``system`` as text blocks; tools with unique names and an object
  schema; the first message ``user``, roles alternating (two assistant messages may follow an
  on-demand block), no empty content, no whitespace-only text; which block types each role
  may send and their fields ("Extra inputs are not permitted"); every ``tool_use`` answered by
  a ``tool_result`` first in the next message, nothing answered twice or unasked; server tool
  results after their ``server_tool_use``; image and PDF sources checked by their bytes;
  citation shapes. ``count_tokens``: its own field set, the same answer as the input a
  ``/v1/messages`` with that body reports. ``api/errors``: the envelope, "prompt is too long"
  past ``context_window`` (recorded in ``too_long``).
- ``api/versioning``, ``api/migration-2026-10-21`` (:mod:`fake_api.api_version`): under
  ``anthropic-version: 2026-10-21`` (the SDK's) ``temperature``/``top_p``/``top_k`` are refused
  on every model, a ``document`` in an assistant message, ``citations`` on user text.
- ``about-claude/models/overview``: each model's window and output limit (Models API);
  ``max_tokens`` over the limit refused (Sonnet, Haiku and Opus 5.5: 128K).
- ``build-with-claude/prompt-caching`` (:mod:`fake_api.cache`): at most 4 breakpoints, none on
  thinking or empty text, 1h before 5m, a 20-block lookback, 5m/1h lifetimes, the minimum
  cacheable prefix (1,024; 512 on Sonnet 5.5), ``thinking``/``tool_choice`` changes
  invalidate the message cache; ``build-with-claude/effort`` and preserved thinking: an effort
  change restarts the cache.
- ``build-with-claude/thinking`` (:mod:`fake_api.thinking`, :mod:`fake_api.model_rules`):
  the 5.x models think by default (``display`` omitted), progress-update blocks before tool
  calls, thinking counted in ``output_tokens``, against ``max_tokens`` and as input when sent
  back (``thinking_tokens``, per reply too); the ``thinking.type`` values each model takes
  (Sonnet 5.5's exact messages), ``between_tools`` rules, ``display`` values, forced
  ``tool_choice`` on Sonnet/Opus 5.5 and Fable/Mythos 5.1, sampling values on 5.x (under
  ``2023-06-01``), prefill.
- ``build-with-claude/preserved-thinking`` (+ ``prefix-checks``, ``fix-bound-to-a-different-
  conversation``; :mod:`fake_api.binding`): a tampered signature; an edited latest assistant
  turn; a changed ``system``/tools/prefix, a gap or a re-inserted block ("bound to a different
  conversation", the header sentence without the beta); ``drop_block`` and
  ``input_transformations``; the account-date switch; blocks another model or account cannot
  read dropped silently; ``block_binding`` needs its beta.
- ``build-with-claude/mid-conversation-system-messages`` (:mod:`fake_api.system_messages`):
  the models and the positions; ``clear_at``, per-message ``output_config`` and
  ``tool_addition``/``tool_removal`` each need their beta (turn-scoped: text only);
  ``tool_reference_unresolved``.
- ``build-with-claude/compaction-on-demand`` (:mod:`fake_api.ondemand`): the beta; the
  companions it refuses (``context_management``, ``stop_sequences``, ``output_config.format``,
  forced ``tool_choice``, ``output_config.task_budget.remaining``, ``max_tokens: 0``);
  ``compaction_nothing_to_summarize``, ``compaction_incomplete_turn``,
  ``compaction_too_many_tool_references`` (``max_tool_references``); the reply (one signed
  block with ``encrypted_content`` and, with a tool-changes beta, ``tool_changes``; usage in one
  ``compaction`` iteration; streamed as one block start); later requests: the beta,
  ``compaction_block_misplaced`` (also inside a system message), ``compaction_block_ambiguous``,
  ``compaction_signature_invalid``, ``compaction_content_mismatch`` (``content`` or
  ``encrypted_content``), ``compaction_tool_changes_mismatch``, no
  ``task_budget.remaining`` and no ``compact_20260112`` beside the block; failures on demand.
- ``build-with-claude/compaction-thinking-blocks`` (:mod:`fake_api.prefix_chain`): kept
  turns keep their thinking only under rules (a)-(c): compacted on a preserved-thinking model,
  directly continuing the summarized messages with another role, and under the same
  ``system`` and non-deferred tools on the compaction request and after it (else the kept
  thinking fails, or is dropped, on the next request).
- ``build-with-claude/compaction-threshold`` (:mod:`fake_api.compaction`): the edit's beta
  and shape, the block verbatim, a model without it refused.
- ``build-with-claude/handling-stop-reasons``, ``handle-streaming-refusals``: ``pause_turn``,
  ``refusal`` with ``stop_details``, ``model_context_window_exceeded`` and cut tool calls on
  demand.

What it does not model (a test passing here says nothing about these): the real tokenizer
(tiktoken times ``token_factor``) and effort's effect on how long thinking is; a cleared
turn-scoped system message costing nothing (it is still counted); deferred tools hidden until
a ``tool_addition`` and inline ``tool_definition`` tools joining ``tools`` (only the prefix
digest and the references are checked); MCP references and ``mcp_servers``; server tools
actually running (their results are scripted); context editing (``clear_tool_uses``,
``clear_thinking``) beyond its shape; the threshold edit's 50,000-token minimum trigger;
``output_config.format`` and ``task_budget.total`` semantics; Batches, Files (``file_id``) and
message threads; rate limits and request-size limits (413) unless scripted; model fallback,
``fallback_credit_token`` and ``fallback_message`` iterations; ``end_user_binding_mismatch``;
other platforms (Bedrock, Vertex, Foundry); the minimum cacheable prefix of models the docs
give no figure for (1,024, settable); whether the compaction call reads the prompt cache (it
does here; the docs are silent); the SDK's own ten-minute limit on non-streamed calls.

Modules: ``api_version`` (the version's rules), ``replies`` (reply specs), ``faults`` (writing
bodies and their faults), ``gate`` (the order of the checks), ``rules`` (:func:`check_request`),
``model_rules``, ``system_messages``, ``binding``, ``prefix_chain``, ``signing``, ``thinking``,
``ondemand``, ``model_facts``,
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
