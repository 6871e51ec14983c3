"""On-demand compaction in the fake API (beta ``compact-2026-09-04``, notes section 3).

The request: the conversation as it stands plus ``compaction: {"type": "summarize",
"instructions"?}`` (:func:`request_error` refuses a missing beta, extra fields, blank-free
instructions over 16,384 characters, the companions the API refuses — ``context_management``,
``stop_sequences``, ``output_config.format``, a forced ``tool_choice``,
``output_config.task_budget.remaining``, ``max_tokens: 0`` — a model without it, nothing to
summarize (``compaction_nothing_to_summarize``), more distinct tool references than a block
records (``compaction_too_many_tool_references``) and an unanswered tool call at the end
(``compaction_incomplete_turn``)).

The reply (:func:`summarize`): HTTP 200, one assistant message holding one ``compaction``
block, ``stop_reason: "compaction"``, zero top-level usage and one ``compaction`` iteration.
The call reads and writes the conversation's prompt cache like any request (a cache-sharing
fork; the docs leave it open), reported in its iteration. Its content is deterministic: the
user requests it covers (an earlier block's list included) and, when the request had
``instructions``, a line ``Instructions: <their first 80 chars>``.
The block carries an opaque ``encrypted_content`` (``compaction_encrypted_content``) and, when
the request had a tool-changes beta (or ``compaction_tool_changes``), ``tool_changes``: the net
``tool_addition``/``tool_removal`` of the summarized system messages; both are signed.
Its signature records the model, the account, the system+tools digest, the chain state of the
summarized messages and the role of the last one, so that kept turns after it keep their
thinking only as the docs allow (:mod:`fake_api.prefix_chain`). A summary longer than
``max_tokens`` gives empty content and ``max_tokens``; :meth:`FakeAnthropicServer.
fail_next_compactions` injects the other failures (empty content with a stop reason, or the
529 ``compaction_unavailable``). Streamed: ``content_block_start`` with the whole block, then
``content_block_stop``.

Later requests (:func:`block_error`): the beta is required; the block must be the very first
block (``compaction_block_misplaced``; inside a system message too, :func:`system_block_error`),
only one with content (``compaction_block_ambiguous``), byte-exact
(``compaction_signature_invalid`` / ``compaction_content_mismatch`` for ``content`` or
``encrypted_content`` / ``compaction_tool_changes_mismatch``); no
``output_config.task_budget.remaining`` and no ``compact_20260112`` edit beside it. Everything
before the block is not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fake_api import signing
from fake_api.compaction import EDIT_TYPE, compaction_edit, summary_requests
from fake_api.model_facts import family
from fake_api.prefix_chain import content_blocks, scan, system_tools
from fake_api.replies import ErrorReply, Reply, ReplySpec, compaction_unavailable
from fake_api.system_messages import (
    INLINE_TOOLS_BETA,
    TOOL_CHANGES,
    TOOL_CHANGES_BETA,
    tool_references,
)

if TYPE_CHECKING:
    from fake_api.server import FakeAnthropicServer

ONDEMAND_BETA = "compact-2026-09-04"
MAX_INSTRUCTIONS = 16_384
FAILURE_STOPS = frozenset(
    {"max_tokens", "tool_use", "refusal", "end_turn", "model_context_window_exceeded"}
)
_INSTRUCTION_CHARS = 80


def _error(message: str, code: str | None = None) -> ErrorReply:
    return ErrorReply(400, "invalid_request_error", message, error_code=code)


def request_error(
    fake: FakeAnthropicServer, body: Mapping[str, Any], betas: set[str]
) -> ErrorReply | None:
    """Why the API refuses the request's ``compaction`` parameter (None: it does not)."""
    config = body.get("compaction")
    if ONDEMAND_BETA not in betas:
        return _error(f"compaction: this parameter requires `anthropic-beta: {ONDEMAND_BETA}`")
    if not isinstance(config, dict) or config.get("type") != "summarize":
        return _error("compaction.type: Input should be 'summarize'")
    extra = sorted(set(config) - {"type", "instructions"})
    if extra:
        return _error(f"compaction.{extra[0]}: Extra inputs are not permitted")
    instructions = config.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        return _error("compaction.instructions: Input should be a valid string")
    if isinstance(instructions, str) and len(instructions) > MAX_INSTRUCTIONS:
        return _error(
            f"compaction.instructions: String should have at most {MAX_INSTRUCTIONS} characters"
        )
    companion = _companion(body)
    if companion is not None:
        return _error(f"compaction: cannot be combined with `{companion}`")
    if body.get("max_tokens") == 0:
        return _error(
            "compaction: cannot be combined with `max_tokens: 0` (a cache keep-alive request "
            "samples nothing)"
        )
    model = body.get("model")
    if not fake.has_ondemand_compaction(str(model)):
        return _error(f"compaction: on-demand compaction is not supported for model {model}")
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    if not _has_content(messages):
        return _error(
            "compaction: there is nothing to summarize (no user or assistant content)",
            "compaction_nothing_to_summarize",
        )
    references = {name for _, name in tool_references(body)}
    if len(references) > fake.max_tool_references:
        return _error(
            f"compaction: the conversation references {len(references)} distinct tools, more "
            f"than a compaction block can record ({fake.max_tool_references})",
            "compaction_too_many_tool_references",
        )
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    open_call = any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in content_blocks(last)
    )
    if last.get("role") == "assistant" and open_call:
        return _error(
            f"messages.{len(messages) - 1}: the conversation ends on an unfinished assistant "
            "turn (a tool call without its result): compact after the tool results",
            "compaction_incomplete_turn",
        )
    return None


def _companion(body: Mapping[str, Any]) -> str | None:
    if body.get("context_management") is not None:
        return "context_management"
    if body.get("stop_sequences"):
        return "stop_sequences"
    config = body.get("output_config")
    config = config if isinstance(config, dict) else {}
    if config.get("format") is not None:
        return "output_config.format"
    budget = config.get("task_budget")
    if isinstance(budget, dict) and budget.get("remaining") is not None:
        return "output_config.task_budget.remaining"
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return f"tool_choice: {choice.get('type')}"
    return None


def _has_content(messages: list[Any]) -> bool:
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        if any(
            isinstance(b, dict) and b.get("type") != "compaction" for b in content_blocks(message)
        ):
            return True
    return False


def _blocks(messages: Any) -> list[tuple[int, int, dict[str, Any]]]:
    found = []
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        for position, block in enumerate(content_blocks(message)):
            if isinstance(block, dict) and block.get("type") == "compaction":
                found.append((index, position, block))
    return found


def is_ondemand(block: Mapping[str, Any]) -> bool:
    """Whether a compaction block is one of ours from on-demand compaction (not a threshold's)."""
    return signing.looks_signed(block.get("signature"))


def block_error(
    fake: FakeAnthropicServer, body: Mapping[str, Any], betas: set[str]
) -> ErrorReply | None:
    """Why the API refuses the on-demand compaction blocks the request carries (None: fine)."""
    messages = body.get("messages")
    blocks = [(i, j, b) for i, j, b in _blocks(messages) if is_ondemand(b)]
    if not blocks:
        return None
    i, j, _ = blocks[0]
    if ONDEMAND_BETA not in betas:
        return _error(
            f"messages.{i}.content.{j}: `compaction` is not one of the expected content block "
            f"types (it requires `anthropic-beta: {ONDEMAND_BETA}`)"
        )
    with_content = [(i, j, b) for i, j, b in _blocks(messages) if b.get("content") is not None]
    if len(with_content) > 1:
        return _error(
            f"messages.{with_content[1][0]}.content.{with_content[1][1]}: more than one "
            "compaction block with content: send only the newest",
            "compaction_block_ambiguous",
        )
    for i, j, block in blocks:
        role = messages[i].get("role") if isinstance(messages, list) else None
        if (i, j) != (0, 0) or role == "system":
            return _error(
                f"messages.{i}.content.{j}: the compaction block must be the first block of the "
                "conversation (drop the messages it summarized)",
                "compaction_block_misplaced",
            )
        payload = signing.verify(fake.secret, block.get("signature"))
        if payload is None or payload.get("kind") != "compaction":
            return _error(
                f"messages.{i}.content.{j}.signature: the compaction block's signature does not "
                "verify: send the block back exactly as returned",
                "compaction_signature_invalid",
            )
        for field, signed in (
            ("content", signing.digest(str(block.get("content")))),
            ("encrypted_content", _optional_digest(block, "encrypted_content")),
        ):
            if payload.get("content" if field == "content" else "enc") != signed:
                return _error(
                    f"messages.{i}.content.{j}.{field}: the compaction block's {field} differs "
                    "from what it was signed with: send the block back exactly as returned",
                    "compaction_content_mismatch",
                )
        if payload.get("tc") != _optional_digest(block, "tool_changes"):
            return _error(
                f"messages.{i}.content.{j}.tool_changes: the compaction block's tool_changes "
                "differ from what was returned: send the block back exactly as returned",
                "compaction_tool_changes_mismatch",
            )
    config = body.get("output_config")
    budget = config.get("task_budget") if isinstance(config, dict) else None
    if isinstance(budget, dict) and budget.get("remaining") is not None:
        return _error(
            "output_config.task_budget.remaining: cannot be used on a request that carries a "
            "compaction block"
        )
    if compaction_edit(body) is not None:
        return _error(
            f"context_management: the {EDIT_TYPE} edit cannot run on a request that carries a "
            "signed compaction block"
        )
    return None


def _optional_digest(block: Mapping[str, Any], key: str) -> str | None:
    return signing.digest(signing.canonical(block[key])) if key in block else None


def system_block_error(body: Any) -> ErrorReply | None:
    """A compaction block inside a ``role: "system"`` message: ``compaction_block_misplaced``
    (checked before the system message's own rules, as the API's code says)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        for position, block in enumerate(content_blocks(message)):
            if isinstance(block, dict) and block.get("type") == "compaction":
                return _error(
                    f"messages.{index}.content.{position}: a compaction block cannot be inside "
                    "a system message: it must be the first block of the conversation",
                    "compaction_block_misplaced",
                )
    return None


def tool_changes(messages: list[Any]) -> list[dict[str, Any]]:
    """The net tool change of ``messages``' system messages (``tool_addition`` /
    ``tool_removal`` entries; an addition then a removal of the same tool cancel out)."""
    net: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        for block in content_blocks(message):
            if not isinstance(block, dict) or block.get("type") not in TOOL_CHANGES:
                continue
            tool = block.get("tool")
            name = (
                str(tool.get("name") or tool.get("definition", {}).get("name"))
                if isinstance(tool, dict)
                else ""
            )
            earlier = net.pop(name, None)
            if earlier is None or earlier["type"] == block["type"]:
                net[name] = {"type": block["type"], "tool": tool}
    return list(net.values())


def summarize(
    fake: FakeAnthropicServer, body: dict[str, Any], betas: frozenset[str] = frozenset()
) -> ReplySpec:
    """The answer to an on-demand compaction request (``body``: what the model reads)."""
    failure = fake._next_compaction_failure()
    if failure == "unavailable":
        return compaction_unavailable()
    # A cache-sharing fork: the call reads (and writes) the conversation's prompt cache.
    cache = fake.cache_use(body)
    counted = fake.count_input_tokens(body) - cache.read - cache.write
    config = body.get("compaction") or {}
    instructions = config.get("instructions") if isinstance(config, dict) else None
    found = scan(body, fake.secret)
    messages = body.get("messages") or []
    visible = messages[found.first_visible :]
    lines = [f"Summary by the server of {len(visible)} messages. The user asked:"]
    lines += [f"- {request}" for request in summary_requests(messages)]
    if isinstance(instructions, str) and instructions.strip():
        lines.append(f"Instructions: {' '.join(instructions.split())[:_INSTRUCTION_CHARS]}")
    content = "\n".join(lines)
    summary_tokens = fake.count_output_tokens([{"type": "text", "text": content}])
    max_tokens = body.get("max_tokens")
    if failure is None and isinstance(max_tokens, int) and summary_tokens > max_tokens:
        failure = "max_tokens"
    iteration = {
        "type": "compaction",
        "input_tokens": counted,
        "output_tokens": 0 if failure else summary_tokens,
        **cache.usage(),
    }
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "iterations": [iteration],
    }
    if failure is not None:
        return Reply(content=(), stop_reason=failure, usage=usage, thinking=False)
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    payload = {
        "kind": "compaction",
        "model": family(body.get("model")),
        "acct": fake.account,
        "st": system_tools(body),
        "chain": found.state,
        "last_role": last.get("role"),
        "n": len(messages),
        "content": signing.digest(content),
    }
    block: dict[str, Any] = {"type": "compaction", "content": content}
    if fake.compaction_encrypted_content:
        block["encrypted_content"] = "fakeenc1." + signing.digest(f"{content}|{found.state}")
    if fake.compaction_tool_changes or betas & {INLINE_TOOLS_BETA, TOOL_CHANGES_BETA}:
        block["tool_changes"] = tool_changes(visible)
    payload["enc"] = _optional_digest(block, "encrypted_content")
    payload["tc"] = _optional_digest(block, "tool_changes")
    block["signature"] = signing.sign(fake.secret, payload)
    return Reply(content=(block,), stop_reason="compaction", usage=usage, thinking=False)
