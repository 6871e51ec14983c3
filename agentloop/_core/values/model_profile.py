"""What one model can do, as one value: :class:`ModelProfile` (and :class:`Price`).

A profile is read by the core and the loop wherever an ability matters (thinking, effort,
on-demand and server compaction, system messages mid-conversation, the window, the output
limit, the price). Profiles come from one place, ``profile_table.profile_of``: a model adapter's
own ``profile(model_name)`` (the anthropic one asks the Models API), else the table shipped
with agentloop.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

__all__ = ["THINKING_TYPES", "ModelProfile", "Price", "ProfileSource"]

ProfileSource: TypeAlias = Literal["models_api", "builtin", "declared"]
"""Where a profile came from: the Models API, the shipped table, or the model adapter's own
declaration (a test double's ``profile=``)."""

THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")
"""The ``thinking.type`` values a model may accept."""


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float


@dataclass(frozen=True, slots=True)
class ModelLifecycle:
    """Where a model is in its life, as the Models API says (``lifecycle``, ``deprecated_at``,
    ``retires_at`` of ``ModelInfo``): ``stage`` is ``active``, ``deprecated`` or ``retired``;
    the dates are days (``YYYY-MM-DD``), None when the API gives none."""

    stage: str
    deprecated_at: str | None = None
    retires_at: str | None = None


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What requests to one model may carry, and what it costs.

    ``thinking_types``: the ``thinking.type`` values it accepts (empty: it does not think);
    ``thinks_by_default``: it thinks unless told not to (the 5.x models: ``adaptive`` with
    summarized display is then asked for); ``signed_thinking``: its thinking blocks are bound
    to everything before them (an edited prefix is refused); ``effort_levels``: the
    ``output_config.effort`` values it accepts; ``on_demand_compaction``: the API summarizes
    on request (``OnDemandCompaction``); ``server_compaction``: the API compacts at a threshold
    (``ServerCompaction``); ``system_messages``: ``role: "system"`` messages are read
    mid-conversation; ``context_window`` and ``max_output_tokens`` (None: unknown: the
    compacter assumes 200,000 tokens, the loop sends its reply reserve); ``price`` and whether it
    is the model's own (``price_known``; else its family's, assumed). Bills are read from the
    shipped table's profile by model name (a stored session has no model object), with
    ``AGENTLOOP_PRICES`` over it.
    """

    model: str
    thinking_types: frozenset[str] = frozenset()
    thinks_by_default: bool = False
    signed_thinking: bool = False
    effort_levels: frozenset[str] = frozenset()
    on_demand_compaction: bool = False
    server_compaction: bool = False
    system_messages: bool = False
    context_window: int | None = None
    max_output_tokens: int | None = None
    price: Price = field(default_factory=lambda: Price(3.0, 15.0))
    price_known: bool = False
    source: ProfileSource = "declared"
    lifecycle: ModelLifecycle | None = None
    """What the Models API says of the model's life (None: it was not asked, or said none)."""

    def named(self, model: str) -> ModelProfile:
        """The same abilities under another model id (a declared profile answers for any)."""
        return self if model == self.model else replace(self, model=model)
