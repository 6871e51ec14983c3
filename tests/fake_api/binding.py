"""The checks on thinking sent back (notes 1.1-1.4), in the order the API runs them.

1. A signature of ours that no longer verifies (or, on a prefix-check model, one that is not
   ours at all, or empty): a plain 400 "Invalid `signature` in `thinking` block" that
   ``drop_block`` does not soften.
2. The latest assistant message: its thinking blocks exactly as generated (all of a reply's, in
   order, text unedited) or none of them; else 400 "... cannot be modified".
3. Per block, in order: another account's Sonnet/Haiku 5.5 block (``organization_binding_mismatch``)
   and a block the requested model cannot read (``model_binding_mismatch``) are dropped
   silently; on a prefix-check model, a block whose system+tools or prefix differ from its
   signature's, or whose preceding thinking block in the request is neither its recorded
   predecessor nor absent (a gap, a re-inserted block), fails the prefix check: the exact "bound
   to a different conversation" 400 where enforced, dropped with every later thinking block
   under ``drop_block``, let through and listed as ``thinking_mismatch_allowed`` where not
   enforced (an old account, ``FakeAnthropicServer.account_created_after_cutoff = False``, and no
   ``prefix_mismatch_behavior`` in the request).

Dropped blocks are left out of the effective request (so out of ``input_tokens``); with the
beta header ``thinking-binding-controls-2026-08-01`` every response lists them in
``input_transformations`` (``[]`` when none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fake_api import signing
from fake_api.model_facts import ACCOUNT_BOUND, ALWAYS_ENFORCED, can_read, family, prefix_checked
from fake_api.prefix_chain import Scan, Slot, scan, system_tools
from fake_api.replies import ErrorReply, invalid_request

if TYPE_CHECKING:
    from fake_api.server import FakeAnthropicServer

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_BOUND = (
    "{path}: Invalid `signature` in `{kind}` block. The block is bound to a different "
    "conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` "
    'to "drop_block".'
)
_HEADER = (
    "That setting requires the `thinking-binding-controls-2026-08-01` value in the "
    "`anthropic-beta` header."
)
_MODIFIED = (
    "{path}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
    "modified. These blocks must remain as they were in the original response."
)
_WHY_TOOLS = "The `system` prompt or the `tools` differ from the request the block was made in."
_WHY_PREFIX = "The messages before the block differ from the conversation it was made in."
_WHY_GAP = (
    "The thinking block before it is not the one that preceded it when it was made (a thinking "
    "block was removed from the middle or put back)."
)


@dataclass
class Binding:
    """The outcome of the checks: an error, or the blocks dropped and what to report."""

    error: ErrorReply | None = None
    dropped: set[tuple[int, int]] = field(default_factory=set)
    transformations: list[dict[str, Any]] = field(default_factory=list)
    report: bool = False
    """Whether the response carries ``input_transformations`` (the beta header was sent)."""


def behavior(body: Mapping[str, Any]) -> Any:
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, dict) else None
    return binding.get("prefix_mismatch_behavior") if isinstance(binding, dict) else None


def check_thinking(fake: FakeAnthropicServer, body: Mapping[str, Any], betas: set[str]) -> Binding:
    model = family(body.get("model"))
    result = Binding(report=BINDING_BETA in betas)
    found = scan(body, fake.secret)
    for slot in found.slots:
        error = _signature_error(fake.secret, slot, prefix_checked(model))
        if error is not None:
            result.error = invalid_request(error)
            return result
    messages = body.get("messages")
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages or []]
    latest = max((i for i, role in enumerate(roles) if role == "assistant"), default=-1)
    modified = _modified(found, latest)
    if modified is not None:
        result.error = invalid_request(_MODIFIED.format(path=modified))
        return result
    chosen = behavior(body)
    checked = prefix_checked(model)
    by_default = model in ALWAYS_ENFORCED or fake.account_created_after_cutoff
    enforced = checked and (chosen is not None or by_default)
    st = system_tools(body)
    previous: str | None = None
    dropping = False
    for slot in found.slots:
        payload = signing.read(slot.signature)
        if payload is None:
            continue  # not ours: an older model's, taken as it is
        reason = None
        producer = str(payload.get("model"))
        if producer in ACCOUNT_BOUND and payload.get("acct") != fake.account:
            reason = "organization_binding_mismatch"
        elif not can_read(model, producer):
            reason = "model_binding_mismatch"
        elif dropping:
            reason = "prefix_binding_mismatch"
        elif checked:
            why = _mismatch(slot, payload, st, previous)
            if why is not None and enforced and chosen != "drop_block":
                lines = [_BOUND.format(path=slot.path, kind=slot.block.get("type"))]
                if BINDING_BETA not in betas:
                    lines.append(_HEADER)
                result.error = invalid_request("\n".join([*lines, why]))
                return result
            if why is not None and enforced:
                reason, dropping = "prefix_binding_mismatch", True
            elif why is not None and chosen is None:
                result.transformations.append(
                    {
                        "type": "thinking_mismatch_allowed",
                        "path": slot.path,
                        "reason": "prefix_binding_mismatch",
                    }
                )
        previous = str(payload.get("id"))
        if reason is not None:
            result.dropped.add((slot.index, slot.position))
            result.transformations.append(
                {"type": "thinking_dropped", "path": slot.path, "reason": reason}
            )
    return result


def _signature_error(secret: bytes, slot: Slot, checked: bool) -> str | None:
    signature = slot.signature
    kind = slot.block.get("type")
    plain = f"{slot.path}: Invalid `signature` in `{kind}` block."
    if signing.looks_signed(signature):
        return None if signing.verify(secret, signature) is not None else plain
    if checked or signature == "":
        return plain
    return None


def _modified(found: Scan, index: int) -> str | None:
    """The path of the first edited thinking block of the latest assistant message."""
    latest = [s for s in found.slots if s.index == index]
    turns: dict[str, list[tuple[Slot, dict[str, Any]]]] = {}
    for slot in latest:
        payload = signing.read(slot.signature)
        if payload is not None and payload.get("kind") == "thinking":
            turns.setdefault(str(payload.get("turn")), []).append((slot, payload))
    for blocks in turns.values():
        seqs = [payload.get("seq") for _, payload in blocks]
        if seqs != list(range(int(blocks[0][1].get("n", 0)))):
            return blocks[0][0].path
        for slot, payload in blocks:
            text = str(slot.block.get("thinking") or "")
            if payload.get("text") and signing.digest(text) != payload.get("text"):
                return slot.path
    return None


def _mismatch(slot: Slot, payload: Mapping[str, Any], st: str, previous: str | None) -> str | None:
    if payload.get("st") != st:
        return _WHY_TOOLS
    if payload.get("prefix") != slot.prefix:
        return _WHY_PREFIX
    if previous is not None and payload.get("prev") != previous:
        return _WHY_GAP
    return None


def effective_body(body: Mapping[str, Any], dropped: set[tuple[int, int]]) -> dict[str, Any]:
    """``body`` without the dropped blocks (what the model reads, and what is counted)."""
    if not dropped:
        return dict(body)
    messages = []
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(i == index for i, _ in dropped):
            kept = [b for j, b in enumerate(content) if (index, j) not in dropped]
            message = {**message, "content": kept}
        messages.append(message)
    return {**body, "messages": messages}
