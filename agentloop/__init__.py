"""agentloop: context compaction for Anthropic tool-use loops, done right.

The public API lives here; modules whose names start with an underscore are private.
Names are imported on first use, so ``import agentloop`` (and the CLI's start-up) stays fast,
and the ``anthropic`` SDK is imported only when a model call needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop._anthropic import AnthropicModel
    from agentloop._compacter import (
        CompactionResult,
        CompactionSettings,
        CompactionSummary,
        CompactionTransition,
        ConversationCompacter,
    )
    from agentloop._context import CompactionDecision, ContextUsage, validate_threshold
    from agentloop._errors import (
        AgentloopError,
        ConfigurationError,
        MessageValidationError,
        ModelError,
        PromptTooLongError,
    )
    from agentloop._hooks import PreservedStateHook
    from agentloop._loop import AgentLoop, ContextFullError, LoopEvents, TurnResult
    from agentloop._messages import (
        Message,
        MessageParam,
        SummaryInfo,
        Usage,
        as_messages,
        is_safe_boundary,
        to_params,
        validate_messages,
    )
    from agentloop._model import AsyncModel, Model, ModelRequest, ModelResponse
    from agentloop._strategies import choose_tail_start, prune_tool_outputs, sliding_window
    from agentloop._tokens import Calibration, TokenEstimator
    from agentloop._tool import FunctionTool, Tool, ToolResult
    from agentloop._windows import ContextWindowResolver, ModelLimits

_EXPORTS: dict[str, str] = {
    "AgentLoop": "agentloop._loop",
    "AgentloopError": "agentloop._errors",
    "AnthropicModel": "agentloop._anthropic",
    "AsyncModel": "agentloop._model",
    "Calibration": "agentloop._tokens",
    "CompactionDecision": "agentloop._context",
    "CompactionResult": "agentloop._compacter",
    "CompactionSettings": "agentloop._compacter",
    "CompactionSummary": "agentloop._compacter",
    "CompactionTransition": "agentloop._compacter",
    "ConfigurationError": "agentloop._errors",
    "ContextFullError": "agentloop._loop",
    "ContextUsage": "agentloop._context",
    "ContextWindowResolver": "agentloop._windows",
    "ConversationCompacter": "agentloop._compacter",
    "FunctionTool": "agentloop._tool",
    "LoopEvents": "agentloop._loop",
    "Message": "agentloop._messages",
    "MessageParam": "agentloop._messages",
    "MessageValidationError": "agentloop._errors",
    "Model": "agentloop._model",
    "ModelError": "agentloop._errors",
    "ModelLimits": "agentloop._windows",
    "ModelRequest": "agentloop._model",
    "ModelResponse": "agentloop._model",
    "PreservedStateHook": "agentloop._hooks",
    "PromptTooLongError": "agentloop._errors",
    "SummaryInfo": "agentloop._messages",
    "TokenEstimator": "agentloop._tokens",
    "Tool": "agentloop._tool",
    "ToolResult": "agentloop._tool",
    "TurnResult": "agentloop._loop",
    "Usage": "agentloop._messages",
    "as_messages": "agentloop._messages",
    "choose_tail_start": "agentloop._strategies",
    "is_safe_boundary": "agentloop._messages",
    "prune_tool_outputs": "agentloop._strategies",
    "sliding_window": "agentloop._strategies",
    "to_params": "agentloop._messages",
    "validate_messages": "agentloop._messages",
    "validate_threshold": "agentloop._context",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloop' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "AgentLoop",
    "AgentloopError",
    "AnthropicModel",
    "AsyncModel",
    "Calibration",
    "CompactionDecision",
    "CompactionResult",
    "CompactionSettings",
    "CompactionSummary",
    "CompactionTransition",
    "ConfigurationError",
    "ContextFullError",
    "ContextUsage",
    "ContextWindowResolver",
    "ConversationCompacter",
    "FunctionTool",
    "LoopEvents",
    "Message",
    "MessageParam",
    "MessageValidationError",
    "Model",
    "ModelError",
    "ModelLimits",
    "ModelRequest",
    "ModelResponse",
    "PreservedStateHook",
    "PromptTooLongError",
    "SummaryInfo",
    "TokenEstimator",
    "Tool",
    "ToolResult",
    "TurnResult",
    "Usage",
    "__version__",
    "as_messages",
    "choose_tail_start",
    "is_safe_boundary",
    "prune_tool_outputs",
    "sliding_window",
    "to_params",
    "validate_messages",
    "validate_threshold",
]
