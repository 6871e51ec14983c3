"""Thinking in the fake API's replies (late-2026 models).

- Which requests think (:func:`thinking_mode`): the 5.x models with no ``thinking`` or
  ``adaptive``; any model with ``adaptive``/``enabled``; ``between_tools`` (Sonnet 5.5) only
  writes progress updates; ``disabled`` and a forced ``tool_choice`` on Haiku 5.5 none.
- A reply (:func:`add_thinking`) begins with one thinking block and has a progress-update
  thinking block before each ``tool_use``. Its ``thinking`` text is ``""`` unless the request
  asked for ``display: "summarized"`` (or ``"updates"``); its ``signature``
  (:mod:`fake_api.signing`) records the model, the account, the system+tools digest, the prefix
  (:mod:`fake_api.prefix_chain`), the id of the previous thinking block of the conversation, the
  hidden token figure (``FakeAnthropicServer.thinking_tokens`` per block unless the reply sets
  its own), the reply it belongs to and its place there.
- Scripted replies: ``Reply(thinking=False)`` opts out, ``thinking="text"`` sets the leading
  block's summarized text, ``progress=(...)`` the progress updates'; thinking blocks already in
  a reply's content are kept (signed by the server when they carry no signature).
- Thinking counts in ``output_tokens`` and against ``max_tokens`` (:func:`cap`): a reply that
  does not fit is cut (after thinking with no text, inside a text, or in a ``tool_use`` whose
  input is then cut) and stops with ``max_tokens``. Its thinking blocks are signed as the reply
  that comes back (:func:`signed_as_cut`): a block cut off was never produced, so sending the
  cut reply back unchanged is no edit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fake_api import signing
from fake_api.counting import block_tokens
from fake_api.model_facts import family, thinks_by_default
from fake_api.prefix_chain import THINKING_TYPES, reply_prefix, scan, system_tools

if TYPE_CHECKING:
    from fake_api.replies import Reply
    from fake_api.server import FakeAnthropicServer

Mode = Literal["none", "full", "progress"]
DEFAULT_SUMMARY = "Thinking about the request."
_ids = itertools.count(1)


def thinking_config(body: Mapping[str, Any]) -> dict[str, Any]:
    thinking = body.get("thinking")
    return thinking if isinstance(thinking, dict) else {}


def thinking_mode(body: Mapping[str, Any]) -> Mode:
    """How a reply to ``body`` thinks: fully, progress updates only, or not at all."""
    key = family(body.get("model"))
    kind = thinking_config(body).get("type")
    if kind == "between_tools":
        return "progress"
    if kind in ("adaptive", "enabled"):
        mode: Mode = "full"
    elif kind is None:
        mode = "full" if thinks_by_default(key) else "none"
    else:
        return "none"
    tool_choice = body.get("tool_choice")
    forced = isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool")
    return "none" if forced and key == "haiku-5-5" else mode


def shows_text(body: Mapping[str, Any]) -> bool:
    config = thinking_config(body)
    return config.get("display") in ("summarized", "updates") or config.get("type") == (
        "between_tools"
    )


@dataclass
class _Signer:
    fake: FakeAnthropicServer
    body: Mapping[str, Any]
    reply_id: str
    previous: str | None
    tokens: int

    def __post_init__(self) -> None:
        self.found = scan(self.body, self.fake.secret)
        messages = self.body.get("messages")
        last = messages[-1] if isinstance(messages, list) and messages else None
        # A last message that is only a compaction block is no prefill (model_rules): the
        # reply starts a turn after the summary, as the SDK's tool runner sends it.
        self.continued = (
            isinstance(last, dict) and last.get("role") == "assistant" and self.found.last is last
        )
        self.st = system_tools(self.body)

    def sign(self, block: dict[str, Any], earlier: Sequence[Any], seq: int, count: int) -> None:
        block_id = f"th{next(_ids):07d}"
        text = str(block.get("thinking") or "")
        payload = {
            "kind": "thinking",
            "id": block_id,
            "model": family(self.body.get("model")),
            "acct": self.fake.account,
            "st": self.st,
            "prefix": reply_prefix(self.found, self.continued, earlier),
            "prev": self.previous,
            "tokens": int(block.pop("_tokens", self.tokens)),
            "text": signing.digest(text) if text else "",
            "turn": self.reply_id,
            "seq": seq,
            "n": count,
        }
        signature = signing.sign(self.fake.secret, payload)
        block["data" if block.get("type") == "redacted_thinking" else "signature"] = signature
        self.previous = block_id


def previous_thinking_id(fake: FakeAnthropicServer, body: Mapping[str, Any]) -> str | None:
    """The id of the last of our thinking blocks the request shows the model."""
    for slot in reversed(scan(body, fake.secret).slots):
        payload = signing.read(slot.signature)
        if payload is not None and payload.get("kind") == "thinking":
            return str(payload.get("id"))
    return None


def add_thinking(
    fake: FakeAnthropicServer, body: Mapping[str, Any], reply: Reply, content: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``content`` with the reply's thinking blocks, every thinking block signed."""
    mode = thinking_mode(body)
    scripted = any(block.get("type") in THINKING_TYPES for block in content)
    if reply.thinking is False or reply.stop_reason == "refusal":
        mode = "none"
    visible = shows_text(body)
    out: list[dict[str, Any]] = []
    lead = None
    if mode == "full" and not scripted:
        text = reply.thinking if isinstance(reply.thinking, str) else DEFAULT_SUMMARY
        lead = _new_block(text if visible else "", reply.redacted)
    progress = iter(reply.progress)
    for block in content:
        if lead is not None and block.get("type") != "compaction":  # a threshold summary first
            out.append(lead)
            lead = None
        if block.get("type") == "tool_use" and mode != "none" and not scripted:
            note = next(progress, f"Next: {block.get('name')}.")
            out.append(_new_block(note if visible else "", False))
        out.append(block)
    if lead is not None:
        out.append(lead)
    count = sum(1 for block in out if block.get("type") in THINKING_TYPES and not _signed(block))
    if count == 0:
        return out
    tokens = reply.thinking_tokens if reply.thinking_tokens is not None else fake.thinking_tokens
    turn = f"turn{next(_ids):07d}"
    signer = _Signer(fake, body, turn, previous_thinking_id(fake, body), tokens)
    seq = 0
    for index, block in enumerate(out):
        block.pop("_auto", None)
        if block.get("type") not in THINKING_TYPES:
            continue
        if _signed(block):
            continue  # a signature the test chose (foreign or altered on purpose)
        signer.sign(block, out[:index], seq, count)
        seq += 1
    return out


def _signed(block: Mapping[str, Any]) -> bool:
    return bool(block.get("data" if block.get("type") == "redacted_thinking" else "signature"))


def _new_block(text: str, redacted: bool) -> dict[str, Any]:
    if redacted:
        return {"type": "redacted_thinking", "data": "", "_auto": True}
    return {"type": "thinking", "thinking": text, "signature": "", "_auto": True}


def cap(
    content: list[dict[str, Any]], max_tokens: Any, token_factor: float
) -> tuple[list[dict[str, Any]], int] | None:
    """``content`` cut to ``max_tokens`` output tokens and its cost, or None when it fits."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        return None
    costs = [_cost(block, token_factor) for block in content]
    if sum(costs) <= max_tokens:
        return None
    kept: list[dict[str, Any]] = []
    left = max_tokens
    for block, cost in zip(content, costs, strict=True):
        if cost <= left:
            kept.append(block)
            left -= cost
            continue
        kind = block.get("type")
        if kind in THINKING_TYPES or kind == "tool_use":
            # Thinking cut short still comes back signed; a cut tool_use has no usable input.
            kept.append(dict(block, input={}) if kind == "tool_use" else block)
        elif kind == "text" and left > 0:
            words = str(block.get("text", "")).split(" ")
            share = max(1, len(words) * left // max(cost, 1))
            kept.append(dict(block, text=" ".join(words[:share])))
        break
    return kept, max_tokens


def _cost(block: Mapping[str, Any], token_factor: float) -> int:
    tally = block_tokens(dict(block), None)
    return math.ceil(tally.text * token_factor) + tally.media  # thinking: a hidden figure


def signed_as_cut(
    fake: FakeAnthropicServer, body: Mapping[str, Any], content: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``content`` of a reply cut by ``max_tokens`` with each of its signed turns' thinking
    blocks signed again when some were cut off: place and count those of the reply as it
    comes back (a block the reply never reached is not one it produced)."""
    out = [dict(block) for block in content]
    turns: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, block in enumerate(out):
        if block.get("type") not in THINKING_TYPES:
            continue
        payload = signing.verify(fake.secret, block.get(_SIGNATURE[block["type"]]))
        if payload is not None and payload.get("kind") == "thinking":
            turns.setdefault(str(payload.get("turn")), []).append((index, payload))
    for turn, blocks in turns.items():
        if int(blocks[0][1].get("n", 0)) == len(blocks):
            continue
        previous = blocks[0][1].get("prev")
        signer = _Signer(fake, body, turn, None if previous is None else str(previous), 0)
        for seq, (index, payload) in enumerate(blocks):
            block = out[index]
            block["_tokens"] = payload.get("tokens", 0)
            signer.sign(block, out[:index], seq, len(blocks))
    return out


_SIGNATURE = {"thinking": "signature", "redacted_thinking": "data"}
