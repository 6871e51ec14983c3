"""Errors that agentloop raises on purpose; each carries a one-line message for the user."""

from __future__ import annotations


class AgentloopError(Exception):
    """Base class: ``str(error)`` is a complete one-line message fit to show a user."""


class ConfigurationError(AgentloopError, ValueError):
    """An invalid setting: threshold out of range, bad context window, unknown option value."""


class MessageValidationError(AgentloopError, ValueError):
    """A message list breaks the Messages API's conversation rules."""


class ModelError(AgentloopError):
    """The model call failed after the SDK's own retries (network, 5xx, 529, auth...)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class PromptTooLongError(ModelError):
    """The API refused the request because the prompt exceeds the model's context window."""


class CompactionFailed(ModelError):
    """An on-demand compaction returned no summary (``stop_reason`` says why: ``max_tokens``,
    ``refusal``, ``tool_use``...; None when the API could not compact at all, e.g. a 529
    ``compaction_unavailable``). The caller keeps the history and summarizes another way."""

    def __init__(
        self, message: str, *, stop_reason: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.stop_reason = stop_reason


class ThinkingBindingError(ModelError):
    """The API refused a thinking block sent back because it is bound to a different
    conversation (its prefix changed). The loop retries once with ``drop_block``."""


class IncompleteReplyError(ModelError):
    """The reply broke off: the stream ended without ``message_stop``, or the connection
    dropped mid-reply. What was shown is not a whole answer and is never stored as one."""


class StoreWriteError(AgentloopError):
    """The session store refused a write (its disk is full, the lease was lost, the file is
    damaged...). What was said since the last write is kept in memory and written first when
    the store accepts writes again; until then no model call is made. ``__cause__`` is the
    store's own error."""
