"""How and when to compact: the settings, checked when they are made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentloop._core.values.validation import DEFAULT_THRESHOLD, validate_threshold, validate_window
from agentloop._errors import ConfigurationError

StrategyName = Literal["auto", "summarize", "sliding_window", "prune", "server", "none"]
STRATEGIES: tuple[StrategyName, ...] = (
    "auto",
    "summarize",
    "sliding_window",
    "prune",
    "server",
    "none",
)
_NAMES: dict[str, None] = dict.fromkeys(STRATEGIES)
"""Every registered strategy's name (``strategy.register`` adds one)."""


def register_name(name: str) -> None:
    """Accept ``name`` as a strategy from now on (the registry in ``strategy.py`` calls it)."""
    _NAMES[name] = None


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """How and when to compact. Invalid values raise :class:`ConfigurationError` at once."""

    enabled: bool = True
    """Automatic compaction. When False, only an explicit ``force=True`` (``/compact``) runs."""
    threshold: float = DEFAULT_THRESHOLD
    """Fraction of the context window at which compaction triggers (0 < t <= 1)."""
    thresholds: Mapping[str, float] = field(default_factory=dict)
    """Per-model thresholds, up or down from ``threshold``."""
    strategy: StrategyName = "auto"
    """``auto`` prunes old tool outputs first and summarizes only if that is not enough.
    ``server`` lets the Messages API compact at the trigger (its ``compact_20260112`` context
    edit); a compaction asked for (``/compact``, an emergency) still runs locally as ``auto``,
    and a model or endpoint without it falls back to ``auto`` with a warning."""
    tail_fraction: float = 0.10
    """The recent tail kept verbatim, as a fraction of the window."""
    target_ratio: float = 0.25
    """Aim: tokens after / the trigger. Compaction tightens until it gets there, and ``auto``
    accepts pruning alone only if it does."""
    min_savings: float = 0.20
    """A compaction saving less than this fraction opens the circuit breaker."""
    window_messages: int | None = None
    """For ``sliding_window``: keep at most this many messages (else the tail token budget)."""
    summary_max_tokens: int = 4096
    api_summary: bool = True
    """Where the model offers on-demand compaction, ``summarize`` and ``auto`` (and a
    compaction asked for under ``server``) let the API write the summary: its block opens
    the child and the kept turns keep their thinking. Requests then need the beta
    ``compact-2026-09-04`` (the adapter sends it). False: agentloop's own summarizer always."""
    summary_model: str | None = None
    """Another model to write summaries (default: the conversation's own). Its requests cannot
    read the conversation's prompt cache: they summarize a rendered transcript instead."""
    summarizer_window: int | None = None
    """The summarizer's own context window (default: the conversation's window)."""
    tool_output_chars: int = 2000
    """Tool outputs longer than this are shortened (head and tail) for the summarizer."""
    standing_instructions: str = ""
    """Instructions every summary follows (e.g. 'always keep the API design decisions')."""
    request_max_tokens: int | None = None
    """The latest request is carried verbatim up to about this size (head and tail beyond it;
    the summary covers the middle). Default: 5 % of the window, at least 2,000 tokens."""
    prepare_at: float | None = 0.65
    """Past this fraction of the trigger, a loop prepares the summary in the background (a
    request that continues the cached conversation), so the compaction at the trigger needs no
    model call. None: never; every summary is written when the trigger is reached."""
    refresh_at: float = 0.2
    """A prepared summary is brought up to date (in the background, once a compaction) when this
    fraction of the trigger was added after what it covers, so what follows its cut stays small;
    the first is prepared only once this fraction of the room beside the system prompt and tools
    is used."""

    def __post_init__(self) -> None:
        # Store the validated floats: a threshold given as text ("0.7", from a config file)
        # would otherwise pass validation and break the first trigger computation.
        object.__setattr__(self, "threshold", validate_threshold(self.threshold))
        thresholds: dict[str, float] = {}
        for model, value in self.thresholds.items():
            try:
                thresholds[model] = validate_threshold(value)
            except ConfigurationError as error:
                raise ConfigurationError(f"{error} for model {model}") from None
        object.__setattr__(self, "thresholds", thresholds)
        if self.strategy not in _NAMES:
            raise ConfigurationError(
                f"unknown compaction strategy {self.strategy!r} (choose from {', '.join(_NAMES)})"
            )
        for name in ("tail_fraction", "target_ratio", "min_savings"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfigurationError(f"{name} must be between 0 and 1 (got {value!r})")
        if self.prepare_at is not None and not 0.0 < self.prepare_at < 1.0:
            raise ConfigurationError(
                f"prepare_at must be between 0 and 1 (got {self.prepare_at!r})"
            )
        if not 0.0 < self.refresh_at < 1.0:
            raise ConfigurationError(
                f"refresh_at must be between 0 and 1 (got {self.refresh_at!r})"
            )
        if self.window_messages is not None and self.window_messages < 2:
            raise ConfigurationError("window_messages must be at least 2")
        if self.summary_max_tokens < 256:
            raise ConfigurationError("summary_max_tokens must be at least 256")
        if self.summarizer_window is not None:
            validate_window(self.summarizer_window)
        if self.request_max_tokens is not None:
            validate_window(self.request_max_tokens, what="request_max_tokens")

    def threshold_for(self, model: str) -> float:
        return self.thresholds.get(model, self.threshold)
