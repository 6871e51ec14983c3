"""agentloop: context compaction for Anthropic tool-use loops, done right."""

from agentloop._errors import (
    AgentloopError,
    ConfigurationError,
    MessageValidationError,
    ModelError,
    PromptTooLongError,
)
from agentloop._messages import (
    Message,
    MessageParam,
    Usage,
    as_messages,
    is_safe_boundary,
    to_params,
    validate_messages,
)
from agentloop._model import AsyncModel, Model, ModelRequest, ModelResponse
from agentloop._tool import FunctionTool, Tool, ToolResult

__version__ = "0.1.0"

__all__ = [
    "AgentloopError",
    "AsyncModel",
    "ConfigurationError",
    "FunctionTool",
    "Message",
    "MessageParam",
    "MessageValidationError",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PromptTooLongError",
    "Tool",
    "ToolResult",
    "Usage",
    "__version__",
    "as_messages",
    "is_safe_boundary",
    "to_params",
    "validate_messages",
]
