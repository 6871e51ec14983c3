"""Checks for user-supplied settings; light enough for the CLI to import at start-up."""

from __future__ import annotations

from agentloop._errors import ConfigurationError


def validate_threshold(value: float | str) -> float:
    """A threshold is a fraction of the window with 0 < t <= 1."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"compaction threshold must be a number between 0 and 1, not {value!r}"
        ) from None
    if not 0.0 < number <= 1.0 or number != number:
        raise ConfigurationError(
            f"compaction threshold must be greater than 0 and at most 1 (got {value!r})"
        )
    return number


def validate_window(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(
            f"context window must be a positive number of tokens, not {value!r}"
        )
    return value
