"""The 2026 request parameters and reply rules: thinking (``adaptive`` with summarized display
on the models that think, effort, ``drop_block``), the beta headers a request needs, on-demand
compaction (``compaction: {"type": "summarize"}``) and what its reply must hold.

Pure functions over request parameters; ``anthropic`` is not imported here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloop._core.compaction.api_compaction import response_block
from agentloop._core.values.blocks import is_compaction
from agentloop._core.values.messages import Message, compaction_block, has_compaction
from agentloop._core.values.model import (
    MAX_COMPACTION_INSTRUCTIONS,
    ON_DEMAND_COMPACTION_BETA,
    ModelRequest,
    ModelResponse,
    OnDemandCompaction,
    Thinking,
)
from agentloop._core.values.model_profile import ModelProfile

__all__ = [
    "BINDING_BETA",
    "COMPACT_BETA",
    "COMPACT_EDIT",
    "checked_compaction",
    "compaction_param",
    "needed_betas",
    "thinking_params",
]

COMPACT_BETA = "compact-2026-01-12"
"""The beta of server-side threshold compaction (the ``compact_20260112`` context edit)."""
COMPACT_EDIT = "compact_20260112"
BINDING_BETA = "thinking-binding-controls-2026-08-01"
"""Adds ``thinking.block_binding`` and the response's ``input_transformations``."""
# What an on-demand compaction request may not carry (the API refuses each with a 400).
_REFUSED_WITH_COMPACTION = ("context_management", "stop_sequences")


def thinking_params(request: ModelRequest, caps: ModelProfile) -> dict[str, Any]:
    """The ``thinking`` and ``output_config`` params for ``request`` on a model with ``caps``
    (empty for a model that does not think and was given no effort it takes).

    ``request.thinking`` None means the model's default: ``adaptive`` with summarized display
    on the models that think by default (the 5.x ones), nothing on the others. An explicit
    :class:`Thinking` asks for thinking wherever the model accepts the kind. ``disabled`` and
    ``enabled`` are never sent (a 400 on the 5.5 models)."""
    thinking = request.thinking
    if thinking is None:
        thinking = Thinking() if caps.thinks_by_default else Thinking(kind="none")
    params: dict[str, Any] = {}
    if thinking.kind == "adaptive" and "adaptive" in caps.thinking_types:
        param: dict[str, Any] = {"type": "adaptive"}
        if thinking.display is not None:
            param["display"] = thinking.display
        if thinking.drop_block:
            param["block_binding"] = {"prefix_mismatch_behavior": "drop_block"}
        params["thinking"] = param
    elif thinking.kind == "between_tools" and "between_tools" in caps.thinking_types:
        params["thinking"] = {"type": "between_tools"}  # it takes no other field
    if thinking.effort is not None and thinking.effort in caps.effort_levels:
        params["output_config"] = {"effort": thinking.effort}
    return params


def compaction_param(compaction: OnDemandCompaction) -> dict[str, Any]:
    """``{"type": "summarize", "instructions": ...}``: blank instructions are left out (the
    API's own prompt), long ones cut to the API's limit."""
    param: dict[str, Any] = {"type": "summarize"}
    instructions = (compaction.instructions or "").strip()
    if instructions:
        param["instructions"] = instructions[:MAX_COMPACTION_INSTRUCTIONS]
    return param


def without_refused_companions(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An on-demand compaction request without what the API refuses beside it: context
    management, stop sequences, a forced tool choice, an output format."""
    out = {key: value for key, value in kwargs.items() if key not in _REFUSED_WITH_COMPACTION}
    choice = out.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        del out["tool_choice"]
    config = out.get("output_config")
    if isinstance(config, dict) and "format" in config:
        config = {key: value for key, value in config.items() if key != "format"}
        if config:
            out["output_config"] = config
        else:
            del out["output_config"]
    return out


def _leading_compaction(messages: Sequence[Message]) -> bool:
    """Whether the history opens with a compaction block (where an on-demand summary goes)."""
    return bool(messages) and bool(messages[0].content) and is_compaction(messages[0].content[0])


def _threshold_compaction(messages: Sequence[Message]) -> bool:
    """Whether a compaction block sits anywhere but at the very start (where the threshold
    edit puts it: after the request that reached the trigger)."""
    if not has_compaction(messages):
        return False
    for index, message in enumerate(messages):
        blocks = message.content[1:] if index == 0 else message.content
        if compaction_block(blocks) is not None:
            return True
    return False


def history_betas(messages: Sequence[Message | Mapping[str, Any]]) -> list[str]:
    """The ``anthropic-beta`` values every request carrying ``messages`` needs for the
    compaction blocks in them (none, one or both kinds): what a hand-written loop passes as
    ``client.beta.messages.create(..., betas=history_betas(messages))``."""
    msgs = [m if isinstance(m, Message) else Message.from_param(m) for m in messages]
    return needed_betas(ModelRequest(model="", messages=msgs), {})


def needed_betas(request: ModelRequest, params: dict[str, Any]) -> list[str]:
    """The ``anthropic-beta`` values the request needs: threshold compaction's for its edit or
    its block, on-demand compaction's for the request or a block opening the history (on every
    later request), and the binding controls' on every thinking request (they report
    ``input_transformations`` and allow ``drop_block``)."""
    betas: list[str] = []
    if request.server_compaction is not None or _threshold_compaction(request.messages):
        betas.append(COMPACT_BETA)
    if request.compaction is not None or _leading_compaction(request.messages):
        betas.append(ON_DEMAND_COMPACTION_BETA)
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "adaptive":
        betas.append(BINDING_BETA)
    return betas


def checked_compaction(response: ModelResponse) -> ModelResponse:
    """An on-demand compaction's reply, which must hold one ``compaction`` block with a
    summary; otherwise :class:`CompactionFailed` naming the stop reason (the history is kept).
    The spend is in ``iterations`` (the top-level usage is zero)."""
    response_block(response)  # the core's one check of such a reply
    return response
