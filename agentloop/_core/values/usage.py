"""The token usage the API reports for a response (what a reply occupied, what a request cost)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentloop._errors import MessageValidationError


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage the API reported for one response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    estimated: bool = False
    """True when no API counted these figures: a local estimate (a test double's, the demo's).
    Such usage is measured, recorded and shown as an estimate (``~``), never as the API's."""

    @property
    def prompt_tokens(self) -> int:
        """The whole request as the API counted it: input plus cache writes and cache reads."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def context_tokens(self) -> int:
        """Everything the response occupied in the context window: the request plus the reply."""
        return self.prompt_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            ),
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            estimated=self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Usage | None:
        if data is None:
            return None
        if not isinstance(data, Mapping):
            raise MessageValidationError(f"usage must be a mapping, not {type(data).__name__}")
        figures: dict[str, Any] = {}  # ints, for the fields before ``estimated``
        for name in _USAGE_FIELDS:
            value = data.get(name) or 0
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise MessageValidationError(f"usage {name} must be a count, not {value!r}")
            figures[name] = int(value)
        return cls(**figures)

    @classmethod
    def of(cls, value: Any) -> Usage | None:
        """The usage in a message dict's ``usage`` (a mapping) or on an SDK response (its
        ``Usage`` object); None when there is none."""
        if value is None or isinstance(value, Usage):
            return value
        if isinstance(value, Mapping):
            return cls.from_mapping(value)
        if hasattr(value, "model_dump"):  # the SDK's Usage object
            return cls.from_mapping(value.model_dump())
        raise MessageValidationError(f"usage must be a mapping, not {type(value).__name__}")


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
