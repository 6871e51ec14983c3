"""Server-side compaction in the fake API: the ``compact_20260112`` context edit.

- A request that carries the edit (``context_management.edits``) or a compaction block needs
  the beta header ``compact-2026-01-12``; without it the request is refused (400) and recorded
  as a violation, as is an edit of the wrong shape.
- Everything before the last compaction block is ignored (:func:`visible_messages`): for
  counting, for the context window, and for the next compaction's summary.
- When the counted input of a request with the edit reaches its trigger (default 150,000), the
  server compacts: a deterministic, signed compaction block whose content lists the user
  requests it compacted (an earlier summary's list included), and usage with a ``compaction``
  iteration (its input: the whole context compacted). With ``pause_after_compaction`` the reply
  is the block alone, stop reason ``compaction`` (the top-level usage is then empty: the API
  keeps a compaction iteration out of it); without, the scripted reply follows the block and a
  ``message`` iteration is reported too.
- ``FakeAnthropicServer.models_without_compaction``: models whose requests with the edit are
  refused with a 400 naming the edit, as the API refuses it for a model that lacks it.
- A compaction block sent back altered (its signature no longer matches) is refused (400) and
  recorded as a violation: blocks must go back verbatim.
- ``FakeAnthropicServer.failed_compactions``: the block comes back with null content, the API's
  way of saying the summary failed (a no-op when sent back).
- The real API wants a trigger of at least 50,000 tokens; the fake takes any, so that tests can
  use small windows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fake_api import signing
from fake_api.replies import Reply, ReplySpec, invalid_request

if TYPE_CHECKING:
    from fake_api.server import FakeAnthropicServer

COMPACT_BETA = "compact-2026-01-12"
EDIT_TYPE = "compact_20260112"
DEFAULT_TRIGGER = 150_000
_OTHER_EDITS = frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"})
_EDIT_KEYS = frozenset({"type", "trigger", "pause_after_compaction", "instructions"})
_REQUEST_CHARS = 60


def compaction_edit(body: Any) -> Mapping[str, Any] | None:
    """The request's ``compact_20260112`` edit, if it carries one."""
    management = body.get("context_management") if isinstance(body, dict) else None
    edits = management.get("edits") if isinstance(management, dict) else None
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict) and edit.get("type") == EDIT_TYPE:
            return edit
    return None


def visible_messages(messages: Sequence[Any]) -> list[Any]:
    """What the server reads of ``messages``: from the last compaction block on (the blocks
    before it in its own message dropped too)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for position in range(len(content) - 1, -1, -1):
            block = content[position]
            if isinstance(block, dict) and block.get("type") == "compaction":
                return [{**message, "content": content[position:]}, *messages[index + 1 :]]
    return list(messages)


def signature(content: str, encrypted: str) -> str:
    return hashlib.sha256(f"fake-compaction|{content}|{encrypted}".encode()).hexdigest()


def compaction_problems(body: Any, beta_header: str | None) -> list[str]:
    """What the API would refuse about compaction in ``body`` (empty: nothing)."""
    if not isinstance(body, dict):
        return []
    problems: list[str] = []
    management = body.get("context_management")
    if management is not None:
        problems.extend(_management_problems(management))
    # On-demand blocks (our signature) answer to their own beta and rules: ondemand.py.
    blocks = [
        (where, block)
        for where, block in _compaction_blocks(body.get("messages"))
        if not signing.looks_signed(block.get("signature"))
    ]
    for where, block in blocks:
        content, encrypted = block.get("content"), block.get("encrypted_content")
        if content == "":
            problems.append(f"{where}.content: empty string content is not allowed")
        elif content is not None and block.get("signature") != signature(
            str(content), str(encrypted)
        ):
            problems.append(f"{where}: the compaction block was altered (signature mismatch)")
    betas = {part.strip() for part in (beta_header or "").split(",")}
    if (compaction_edit(body) is not None or blocks) and COMPACT_BETA not in betas:
        problems.append(f"compaction needs the beta header anthropic-beta: {COMPACT_BETA}")
    return problems


def _management_problems(management: Any) -> list[str]:
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        return ["context_management.edits: must be a list"]
    problems = []
    for index, edit in enumerate(edits):
        where = f"context_management.edits.{index}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind in _OTHER_EDITS:
            continue
        if kind != EDIT_TYPE or not isinstance(edit, dict):
            problems.append(f"{where}.type: unknown context management edit {kind!r}")
            continue
        problems.extend(
            f"{where}.{key}: Extra inputs are not permitted" for key in set(edit) - _EDIT_KEYS
        )
        trigger = edit.get("trigger")
        if trigger is not None and not (
            isinstance(trigger, dict)
            and trigger.get("type") == "input_tokens"
            and isinstance(trigger.get("value"), int)
            and trigger["value"] > 0
        ):
            problems.append(f"{where}.trigger: must be {{'type': 'input_tokens', 'value': N}}")
        if not isinstance(edit.get("pause_after_compaction", False), bool):
            problems.append(f"{where}.pause_after_compaction: must be a boolean")
        if not isinstance(edit.get("instructions") or "", str):
            problems.append(f"{where}.instructions: must be a string")
    return problems


def _compaction_blocks(messages: Any) -> Any:
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for position, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "compaction":
                yield f"messages.{index}.content.{position}", block


def compaction_reply(fake: FakeAnthropicServer, body: dict[str, Any]) -> ReplySpec | None:
    """The answer of a request whose input reaches its edit's trigger (None: no compaction)."""
    edit = compaction_edit(body)
    if edit is None:
        return None
    model = str(body.get("model", ""))
    if model in fake.models_without_compaction:
        return invalid_request(
            f"context_management.edits.0: the {EDIT_TYPE} edit is not supported for model {model}"
        )
    trigger = edit.get("trigger") or {}
    counted = fake.count_input_tokens(body)
    if counted < int(trigger.get("value", DEFAULT_TRIGGER)):
        return None
    block = _block(visible_messages(body["messages"]))
    summary_tokens = fake.count_output_tokens([{"type": "text", "text": block["content"]}])
    if fake.failed_compactions:
        block = {"type": "compaction", "content": None}
    iteration = {
        "type": "compaction",
        "input_tokens": counted,
        "output_tokens": summary_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if edit.get("pause_after_compaction"):
        empty = {key: 0 for key in iteration if key != "type"}
        usage = {**empty, "iterations": [iteration]}
        return Reply(content=(block,), stop_reason="compaction", usage=usage)
    following = fake._next_reply(body)
    if not isinstance(following, Reply):
        return following
    after = fake.count_input_tokens(
        {**body, "messages": [{"role": "assistant", "content": [block]}]}
    )
    message = {**iteration, "type": "message", "input_tokens": after}
    message["output_tokens"] = fake.count_output_tokens(following.content)
    top = {key: value for key, value in message.items() if key != "type"}
    return Reply(
        content=(block, *following.content),
        stop_reason=following.stop_reason,
        usage={**top, "iterations": [iteration, message]},
    )


def summary_requests(messages: Sequence[Any]) -> list[str]:
    """The user requests a summary of ``messages`` lists (from the last compaction block on,
    that block's own list first), oldest first, each once."""
    return _requests(visible_messages(messages))


def _requests(messages: Sequence[Any]) -> list[str]:
    requests: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "compaction":  # an earlier summary: its list goes on
                earlier = str(block.get("content") or "").splitlines()
                requests.extend(line[2:] for line in earlier if line.startswith("- "))
            elif message.get("role") == "user" and block.get("type") == "text":
                requests.append(" ".join(str(block.get("text", "")).split())[:_REQUEST_CHARS])
    return list(dict.fromkeys(r for r in requests if r))


def _block(messages: Sequence[Any]) -> dict[str, Any]:
    """A deterministic summary of ``messages``: the user requests, oldest first."""
    unique = _requests(messages)
    content = "\n".join(
        [f"Summary by the server of {len(messages)} messages. The user asked:"]
        + [f"- {request}" for request in unique]
    )
    encrypted = "fakeenc_" + hashlib.sha256(content.encode()).hexdigest()[:32]
    return {
        "type": "compaction",
        "content": content,
        "encrypted_content": encrypted,
        "signature": signature(content, encrypted),
    }


def stream_parts(block: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """How a compaction block streams: its start (the signature), then one
    ``compaction_delta`` with the content, as the SDK accumulates it."""
    if signing.looks_signed(block.get("signature")):  # on-demand: the whole block at once
        return dict(block), []
    start = {"type": "compaction", "content": None, "signature": block.get("signature")}
    delta = {
        "type": "compaction_delta",
        "content": block.get("content"),
        "encrypted_content": block.get("encrypted_content"),
    }
    return start, [delta]
