"""What the late-2026 models refuse in a request (notes section 2), with the API's messages.

- ``thinking.type``: what the model does not accept (:func:`~fake_api.model_facts.thinking_types`;
  Sonnet 5.5's ``disabled`` and ``enabled`` with their exact messages); fields a type does not
  take (``between_tools`` takes none); ``display`` outside ``omitted``/``summarized`` (``updates``
  needs its beta), or with ``disabled``; ``between_tools`` at effort ``xhigh``/``max``.
- ``thinking.block_binding`` without the beta header ``thinking-binding-controls-2026-08-01``
  ("... block_binding: Extra inputs are not permitted"), or with a value outside
  ``error``/``drop_block``.
- A forced ``tool_choice`` (``any``/``tool``) on Sonnet 5.5, Opus 5.5, Fable/Mythos 5.1 (on
  ``count_tokens`` too).
- On the 5.x models: a non-default ``temperature``/``top_p``/``top_k``; a conversation that
  ends with an assistant message (prefill), unless it is a paused turn (an open server tool
  call) or a compaction request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_api.binding import BINDING_BETA
from fake_api.model_facts import (
    EFFORTS,
    FORCED_TOOL_CHOICE_REFUSED,
    default_effort,
    family,
    thinking_types,
    thinks_by_default,
)

DISPLAY_BETA = "thinking-display-updates-2026-08-18"
SONNET_DISABLED = (
    'To turn thinking off on this model, send "thinking": {"type": "between_tools"} instead of '
    '{"type": "disabled"}.'
)
ENABLED = (
    '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
FORCED_TOOL_CHOICE = 'tool_choice: type "tool" and "any" are not supported for this model.'
PREFILL = (
    "This model does not support assistant message prefill. The conversation must end with a "
    "user message."
)
_FIELDS = {
    "adaptive": frozenset({"type", "display", "block_binding"}),
    "enabled": frozenset({"type", "budget_tokens", "display", "block_binding"}),
    "disabled": frozenset({"type"}),
    "between_tools": frozenset({"type"}),
}
_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_p": 1.0}


def effort(body: Mapping[str, Any]) -> str:
    config = body.get("output_config")
    value = config.get("effort") if isinstance(config, dict) else None
    return str(value) if value is not None else default_effort(family(body.get("model")))


def model_problems(body: Any, betas: set[str], *, count_tokens: bool = False) -> list[str]:
    """Everything the requested model refuses in ``body`` (empty: nothing)."""
    if not isinstance(body, dict):
        return []
    key = family(body.get("model"))
    problems = _thinking_problems(body, key, betas)
    config = body.get("output_config")
    value = config.get("effort") if isinstance(config, dict) else None
    if value is not None and value not in EFFORTS:
        problems.append(f"output_config.effort: Input should be {', '.join(map(repr, EFFORTS))}")
    tool_choice = body.get("tool_choice")
    forced = isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool")
    if forced and key in FORCED_TOOL_CHOICE_REFUSED:
        problems.append(FORCED_TOOL_CHOICE)
    if not thinks_by_default(key):
        return problems
    for name, default in _SAMPLING_DEFAULTS.items():
        if name in body and body[name] != default:
            problems.append(f"{name}: only the default value {default} is supported for this model")
    if "top_k" in body:
        problems.append("top_k: is not supported for this model")
    if not count_tokens and "compaction" not in body and _ends_with_prefill(body.get("messages")):
        problems.append(PREFILL)
    return problems


def _thinking_problems(body: Mapping[str, Any], key: str, betas: set[str]) -> list[str]:
    thinking = body.get("thinking")
    if thinking is None:
        return []
    if not isinstance(thinking, dict):
        return ["thinking: must be an object"]
    kind = thinking.get("type")
    if kind not in _FIELDS:
        return [f"thinking.type: Input should be {', '.join(map(repr, _FIELDS))}"]
    problems: list[str] = []
    if "block_binding" in thinking and BINDING_BETA not in betas:
        problems.append("thinking.block_binding: Extra inputs are not permitted")
    extra = sorted(set(thinking) - _FIELDS[kind] - {"block_binding"})
    if kind in ("between_tools", "disabled"):
        extra = sorted(set(thinking) - {"type"})
    problems.extend(f"thinking.{kind}.{name}: Extra inputs are not permitted" for name in extra)
    if not thinking_types(key)[kind]:
        if kind == "disabled" and key == "sonnet-5-5":
            problems.append(SONNET_DISABLED)
        elif kind == "enabled":
            problems.append(ENABLED)
        else:
            problems.append(f'"thinking.type.{kind}" is not supported for this model.')
    if kind == "between_tools" and effort(body) in ("xhigh", "max"):
        problems.append(
            f'"thinking.type.between_tools" is not supported with effort "{effort(body)}": '
            "use low, medium or high."
        )
    display = thinking.get("display")
    allowed = {"omitted", "summarized"} | ({"updates"} if DISPLAY_BETA in betas else set())
    if display is not None and display not in allowed:
        problems.append(
            f"thinking.display: Input should be {', '.join(map(repr, sorted(allowed)))}"
        )
    binding = thinking.get("block_binding")
    if isinstance(binding, dict):
        chosen = binding.get("prefix_mismatch_behavior")
        if chosen is not None and chosen not in ("error", "drop_block"):
            problems.append(
                "thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or "
                "'drop_block'"
            )
    elif binding is not None:
        problems.append("thinking.block_binding: must be an object")
    return problems


def _ends_with_prefill(messages: Any) -> bool:
    if not isinstance(messages, list) or not messages:
        return False
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return False
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    paused = any(isinstance(b, dict) and b.get("type") == "server_tool_use" for b in blocks)
    compacted = any(isinstance(b, dict) and b.get("type") == "compaction" for b in blocks)
    return not paused and not compacted
