"""agentloop: context compaction for Anthropic tool-use loops, done right.

The public API lives here; modules whose names start with an underscore are private.
Names are imported on first use, so ``import agentloop`` (and the CLI's start-up) stays fast,
and the ``anthropic`` SDK is imported only when a model call needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop._adapters.anthropic import AnthropicModel, message_from_response
    from agentloop._adapters.anthropic_params import history_betas
    from agentloop._adapters.tokens import Calibration, TokenEstimator
    from agentloop._adapters.tool_recognizers import default_tool_facts
    from agentloop._adapters.windows import ContextWindowResolver, ModelLimits
    from agentloop._agent.mcp_tools import McpServers, aopen_mcp, open_mcp
    from agentloop._agent.recent_files import RecentFiles, recent_files_hook
    from agentloop._agent.search_history import search_history_tool
    from agentloop._core.compaction.results import (
        CompactionOutcome,
        CompactionPlan,
        CompactionSummary,
        CompactionTransition,
    )
    from agentloop._core.compaction_core import CompactionSettings
    from agentloop._core.cutting.cut_and_prune import choose_tail_start, prune_tool_outputs
    from agentloop._core.cutting.prefix import as_messages
    from agentloop._core.facts.preserved_state import PreservedStateHook
    from agentloop._core.measuring.cache import with_cache_breakpoints
    from agentloop._core.measuring.context import CompactionDecision, ContextUsage
    from agentloop._core.values.messages import (
        Message,
        MessageParam,
        SummaryInfo,
        Usage,
        is_safe_boundary,
        to_params,
        validate_messages,
    )
    from agentloop._core.values.model import (
        ON_DEMAND_COMPACTION_BETA,
        AsyncModel,
        Model,
        ModelRequest,
        ModelResponse,
    )
    from agentloop._core.values.model_profile import ModelProfile
    from agentloop._core.values.tool import FunctionTool, Tool, ToolResult
    from agentloop._core.values.tool_facts import (
        CommandRan,
        FileTouched,
        TodoState,
        ToolCall,
        ToolFacts,
    )
    from agentloop._core.values.validation import validate_threshold
    from agentloop._errors import (
        AgentloopError,
        ConfigurationError,
        MessageValidationError,
        ModelError,
        PromptTooLongError,
    )
    from agentloop._loop.agent_loop import AgentLoop, ContextFullError, LoopEvents, TurnResult
    from agentloop._loop.conversation_compacter import ConversationCompacter

_EXPORTS: dict[str, str] = {
    "AgentLoop": "agentloop._loop.agent_loop",
    "AgentloopError": "agentloop._errors",
    "AnthropicModel": "agentloop._adapters.anthropic",
    "AsyncModel": "agentloop._core.values.model",
    "Calibration": "agentloop._adapters.tokens",
    "CommandRan": "agentloop._core.values.tool_facts",
    "CompactionDecision": "agentloop._core.measuring.context",
    "CompactionOutcome": "agentloop._core.compaction.results",
    "CompactionPlan": "agentloop._core.compaction.results",
    "CompactionSettings": "agentloop._core.compaction_core",
    "CompactionSummary": "agentloop._core.compaction.results",
    "CompactionTransition": "agentloop._core.compaction.results",
    "ConfigurationError": "agentloop._errors",
    "ContextFullError": "agentloop._loop.agent_loop",
    "ContextUsage": "agentloop._core.measuring.context",
    "ContextWindowResolver": "agentloop._adapters.windows",
    "ConversationCompacter": "agentloop._loop.conversation_compacter",
    "FileTouched": "agentloop._core.values.tool_facts",
    "FunctionTool": "agentloop._core.values.tool",
    "LoopEvents": "agentloop._loop.agent_loop",
    "Message": "agentloop._core.values.messages",
    "MessageParam": "agentloop._core.values.messages",
    "ON_DEMAND_COMPACTION_BETA": "agentloop._core.values.model",
    "MessageValidationError": "agentloop._errors",
    "Model": "agentloop._core.values.model",
    "ModelError": "agentloop._errors",
    "ModelLimits": "agentloop._adapters.windows",
    "ModelProfile": "agentloop._core.values.model_profile",
    "ModelRequest": "agentloop._core.values.model",
    "ModelResponse": "agentloop._core.values.model",
    "PreservedStateHook": "agentloop._core.facts.preserved_state",
    "PromptTooLongError": "agentloop._errors",
    "McpServers": "agentloop._agent.mcp_tools",
    "RecentFiles": "agentloop._agent.recent_files",
    "SummaryInfo": "agentloop._core.values.messages",
    "TodoState": "agentloop._core.values.tool_facts",
    "TokenEstimator": "agentloop._adapters.tokens",
    "Tool": "agentloop._core.values.tool",
    "ToolCall": "agentloop._core.values.tool_facts",
    "ToolFacts": "agentloop._core.values.tool_facts",
    "ToolResult": "agentloop._core.values.tool",
    "TurnResult": "agentloop._loop.agent_loop",
    "Usage": "agentloop._core.values.messages",
    "as_messages": "agentloop._core.cutting.prefix",
    "message_from_response": "agentloop._adapters.anthropic",
    "history_betas": "agentloop._adapters.anthropic_params",
    "choose_tail_start": "agentloop._core.cutting.cut_and_prune",
    "default_tool_facts": "agentloop._adapters.tool_recognizers",
    "is_safe_boundary": "agentloop._core.values.messages",
    "prune_tool_outputs": "agentloop._core.cutting.cut_and_prune",
    "aopen_mcp": "agentloop._agent.mcp_tools",
    "open_mcp": "agentloop._agent.mcp_tools",
    "recent_files_hook": "agentloop._agent.recent_files",
    "search_history_tool": "agentloop._agent.search_history",
    "to_params": "agentloop._core.values.messages",
    "validate_messages": "agentloop._core.values.messages",
    "validate_threshold": "agentloop._core.values.validation",
    "with_cache_breakpoints": "agentloop._core.measuring.cache",
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
    "ON_DEMAND_COMPACTION_BETA",
    "AgentLoop",
    "AgentloopError",
    "AnthropicModel",
    "AsyncModel",
    "Calibration",
    "CommandRan",
    "CompactionDecision",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionSettings",
    "CompactionSummary",
    "CompactionTransition",
    "ConfigurationError",
    "ContextFullError",
    "ContextUsage",
    "ContextWindowResolver",
    "ConversationCompacter",
    "FileTouched",
    "FunctionTool",
    "LoopEvents",
    "McpServers",
    "Message",
    "MessageParam",
    "MessageValidationError",
    "Model",
    "ModelError",
    "ModelLimits",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "PreservedStateHook",
    "PromptTooLongError",
    "RecentFiles",
    "SummaryInfo",
    "TodoState",
    "TokenEstimator",
    "Tool",
    "ToolCall",
    "ToolFacts",
    "ToolResult",
    "TurnResult",
    "Usage",
    "__version__",
    "aopen_mcp",
    "as_messages",
    "choose_tail_start",
    "default_tool_facts",
    "history_betas",
    "is_safe_boundary",
    "message_from_response",
    "open_mcp",
    "prune_tool_outputs",
    "recent_files_hook",
    "search_history_tool",
    "to_params",
    "validate_messages",
    "validate_threshold",
    "with_cache_breakpoints",
]
