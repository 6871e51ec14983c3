"""Checks for settings and the project's defaults; light enough for the CLI to import at start-up.

Every default that more than one room uses is defined here once.
"""

from __future__ import annotations

from agentloop._errors import ConfigurationError

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The model the coding agent and the demo use unless told otherwise."""
DEFAULT_THRESHOLD = 0.85
"""Compaction triggers at this fraction of the context window."""
DEFAULT_MAX_TOKENS = 8192
"""The reply size asked for (``max_tokens``) unless told otherwise."""
EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""The values of ``output_config.effort`` (``model.Thinking.effort``)."""


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


def positive_int(value: object, *, what: str, unit: str = "") -> int:
    """``value`` if it is a positive int, else a one-line :class:`ConfigurationError`.

    ``what`` names the setting in the message; ``unit`` (e.g. "tokens") follows "number of".
    Text is refused here; the command line parses it with :func:`parse_positive_int`.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        kind = f"positive number of {unit}" if unit else "positive whole number"
        raise ConfigurationError(f"{what} must be a {kind}, not {value!r}")
    return value


def parse_positive_int(text: str, *, what: str, unit: str = "") -> int:
    """A command-line value as a positive int (the same rule as :func:`positive_int`)."""
    try:
        value: object = int(text.strip())
    except ValueError:
        value = text
    return positive_int(value, what=what, unit=unit)


def validate_window(value: object, *, what: str = "context window") -> int:
    """A context window: a positive number of tokens."""
    return positive_int(value, what=what, unit="tokens")
