"""The one lookup of what a model can do (:func:`profile_of`) and the table shipped with it.

Every model table agentloop keeps is here, read by model id once normalised (a dated snapshot
``claude-sonnet-4-5-20250929`` or ``...@20250929`` is its base id; a platform prefix such as
``anthropic.`` or ``us.anthropic.`` does not hide the family): thinking types and effort levels,
which models read ``role: "system"`` messages mid-conversation, windows and output limits,
prices. What the Models API says of a model replaces the table's answers (the anthropic
adapter's ``profile``); a model adapter with no profile of its own gets the table's, with the
abilities only an adapter can vouch for (compaction on the API, its output limit) taken from
the older capability methods it may still have.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from agentloop._core.values.model import (
    OnDemandCompactingModel,
    OutputLimitedModel,
    ServerCompactingModel,
)
from agentloop._core.values.model_profile import ModelProfile, Price
from agentloop._core.values.validation import EFFORT_LEVELS

__all__ = [
    "BUILTIN_WINDOWS",
    "PRICES",
    "accepts_system_messages",
    "base_model_id",
    "builtin_profile",
    "profile_of",
    "unprofiled",
]

# A dated snapshot id: "claude-sonnet-4-5-20250929" (API/Bedrock style) or "...@20250929" (Vertex).
_DATED = re.compile(r"^(?P<base>.+?)[-@]\d{8}$")
# The 5.x families think by default (adaptive) and sign their thinking; 4.x only when asked.
_FIVE = re.compile(
    r"^claude-(?:sonnet|opus|haiku|fable|mythos)-5(?:-\d+)?$|^claude-mythos-preview$"
)
# A family and its version anywhere in an id, on any platform.
_FAMILY_VERSION = re.compile(r"(fable|mythos|opus|sonnet|haiku)-(\d{1,2})(?!\d)(?:[-.](\d)(?!\d))?")

_ADAPTIVE_ONLY = frozenset({"adaptive"})
_ALL_EFFORT = frozenset(EFFORT_LEVELS)
_NO_XHIGH = frozenset({"low", "medium", "high", "max"})

# model id -> (thinking types, effort levels) the API accepts.
_THINKING: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "claude-sonnet-5-5": (frozenset({"adaptive", "between_tools"}), _ALL_EFFORT),
    "claude-opus-5-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5-2": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5-2": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5-1": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5-1": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-preview": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-haiku-5-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-sonnet-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-8": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-7": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-6": (frozenset({"adaptive", "enabled", "disabled"}), _NO_XHIGH),
    "claude-sonnet-4-6": (frozenset({"adaptive", "enabled", "disabled"}), _NO_XHIGH),
    "claude-opus-4-5": (frozenset({"enabled", "disabled"}), _NO_XHIGH),
    "claude-sonnet-4-5": (frozenset({"enabled", "disabled"}), frozenset()),
    "claude-haiku-4-5": (frozenset({"enabled", "disabled"}), frozenset()),
}

_1M_128K = (1_000_000, 128_000)
_1M_64K = (1_000_000, 64_000)
_200K_64K = (200_000, 64_000)

BUILTIN_WINDOWS: Mapping[str, tuple[int, int]] = {
    "claude-fable-5-2": _1M_128K,
    "claude-fable-5-1": _1M_128K,
    "claude-fable-5": _1M_128K,
    "claude-mythos-5-2": _1M_128K,
    "claude-mythos-5-1": _1M_128K,
    "claude-mythos-5": _1M_128K,
    "claude-mythos-preview": _1M_128K,
    "claude-opus-5-5": _1M_128K,
    "claude-opus-5": _1M_128K,
    "claude-sonnet-5-5": _1M_128K,
    "claude-sonnet-5": _1M_128K,
    "claude-opus-4-8": _1M_128K,
    "claude-opus-4-7": _1M_128K,
    "claude-opus-4-6": _1M_128K,
    "claude-sonnet-4-6": _1M_64K,
    # Not confirmed: the conservative figures of the previous Haiku.
    "claude-haiku-5-5": _200K_64K,
    "claude-haiku-4-5": _200K_64K,
    "claude-sonnet-4-5": _200K_64K,
    "claude-opus-4-5": _200K_64K,
}
"""``model id -> (context window, max output tokens)`` for current Claude models."""

# The models that read mid-conversation ``role: "system"`` messages (the docs list Fable and
# Mythos 5 and later, Opus 4.8 and later, Sonnet 5.5 and Haiku 5.5 — not Sonnet 5): a family
# and the first version of it that does. Later versions of a family are taken to keep it.
_SYSTEM_MESSAGES_FROM = {
    "fable": (5, 0),
    "mythos": (5, 0),
    "opus": (4, 8),
    "sonnet": (5, 5),
    "haiku": (5, 5),
}

# Longest matching prefix wins; a model matching none is priced by its family, as an estimate.
PRICES: Mapping[str, Price] = {
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4-0": Price(15.0, 75.0),
    "claude-opus-4-2": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
}
_FAMILY_PRICES: Mapping[str, Price] = {
    "opus": Price(5.0, 25.0),
    "sonnet": Price(3.0, 15.0),
    "haiku": Price(1.0, 5.0),
}


def base_model_id(model: str) -> str:
    """``model`` without a trailing snapshot date (``claude-sonnet-4-5-20250929`` ->
    ``claude-sonnet-4-5``); unchanged when it has none."""
    match = _DATED.match(model)
    return match.group("base") if match else model


def accepts_system_messages(model: str) -> bool:
    """Whether ``model`` (an id, on any platform) reads mid-conversation ``role: "system"``
    messages by the table (the Models API does not say)."""
    found = _FAMILY_VERSION.search(model.lower())
    if found is None:
        return False
    family, major, minor = found.group(1), int(found.group(2)), int(found.group(3) or 0)
    return (major, minor) >= _SYSTEM_MESSAGES_FROM[family]


def _price(model: str) -> tuple[Price, bool]:
    matches = [prefix for prefix in PRICES if model.startswith(prefix)]
    if matches:
        return PRICES[max(matches, key=len)], True
    for family, price in _FAMILY_PRICES.items():
        if family in model:
            return price, False
    return _FAMILY_PRICES["sonnet"], False


def thinks_by_default(types: frozenset[str], signed_thinking: bool) -> bool:
    """Whether a model that accepts ``types`` thinks unless told not to: adaptive-only
    models, and those that sign their thinking to its prefix (the 5.x ones) even where they
    may turn it off."""
    return "adaptive" in types and ("disabled" not in types or signed_thinking)


@functools.lru_cache(maxsize=256)
def builtin_profile(model: str) -> ModelProfile:
    """The table's profile of ``model`` (by its base id): what is used when no Models API
    answers. A model nobody knows thinks only if its id is a 5.x one; on-demand compaction is
    never assumed (only the Models API says so)."""
    base = base_model_id(model)
    five = _FIVE.match(base) is not None
    types, efforts = _THINKING.get(
        base, (_ADAPTIVE_ONLY, _ALL_EFFORT) if five else (frozenset(), frozenset())
    )
    window, output = BUILTIN_WINDOWS.get(base, (None, None))
    price, price_known = _price(model)
    thinking = ModelProfile(model, types, thinks_by_default(types, five), five, efforts)
    # The Anthropic API takes a threshold edit for any model (and refuses it where it cannot).
    limits = replace(thinking, server_compaction=True, context_window=window)
    return replace(
        limits,
        system_messages=accepts_system_messages(base),
        max_output_tokens=output,
        price=price,
        price_known=price_known,
        source="builtin",
    )


def unprofiled(model: object, name: str) -> ModelProfile:
    """The profile of ``name`` on a model adapter that declares none: the table's facts of the
    model (thinking, system messages, window, price), and of what only an adapter can vouch
    for (compaction on the API, the output limit it enforces) what its older capability
    methods say, nothing otherwise. A method that fails says no."""
    table = builtin_profile(name)
    server = isinstance(model, ServerCompactingModel) and _says(
        lambda: model.supports_server_compaction(name)
    )
    on_demand = isinstance(model, OnDemandCompactingModel) and _says(
        lambda: model.supports_on_demand_compaction(name)
    )
    cap: int | None = None
    if isinstance(model, OutputLimitedModel):
        try:
            cap = model.max_reply_tokens(name)
        except Exception:  # an output limit unknown: the loop sends its reply reserve
            cap = None
    return replace(
        table,
        server_compaction=server,
        on_demand_compaction=on_demand,
        max_output_tokens=cap,
    )


def _says(ask: Callable[[], object]) -> bool:
    try:
        return bool(ask())
    except Exception:  # an ability unknown is an ability not used
        return False


def profile_of(model: object, name: str) -> ModelProfile:
    """What ``name`` can do when ``model`` (a model adapter, or None) answers it: the
    adapter's own ``profile``, a :class:`ModelProfile` or a method ``profile(name)`` (the
    anthropic adapter's asks the Models API once per model), else :func:`unprofiled`. The one
    place the core and the loop ask."""
    own = getattr(model, "profile", None)
    if isinstance(own, ModelProfile):
        return own.named(name)
    if callable(own):
        try:
            found = own(name)
        except Exception:  # a profile that cannot be read: the table's, with nothing assumed
            found = None
        if isinstance(found, ModelProfile):
            return found
    return unprofiled(model, name)
