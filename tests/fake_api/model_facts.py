"""What the fake API knows about each model family (late 2026): who thinks by default, who
runs the prefix check, who reads whose thinking, which ``thinking.type`` values and companions
each accepts, who has on-demand compaction, and what the Models API says about it.

Model ids are reduced to a family key (``claude-sonnet-5-5-20261001`` -> ``sonnet-5-5``).
Unknown ``claude-*-5-*`` ids behave like the 5.5 models; unknown older ids like Sonnet 4.6.
"""

from __future__ import annotations

import re
from typing import Any

_ID = re.compile(r"^claude-([a-z]+)-(\d+)(?:-(\d{1,2}))?(?:-\d{8})?$")

PREFIX_CHECK = frozenset(
    {"fable-5-2", "mythos-5-2", "fable-5-1", "mythos-5-1", "opus-5-5", "sonnet-5-5", "haiku-5-5"}
)
ALWAYS_ENFORCED = frozenset({"fable-5-2", "mythos-5-2", "mythos-5-1"})
"""Prefix-check models that refuse an invalid block on every account, whatever its age."""
ACCOUNT_BOUND = frozenset({"sonnet-5-5", "haiku-5-5"})
"""Producers whose blocks only the producing account may send back."""
FORCED_TOOL_CHOICE_REFUSED = frozenset({"sonnet-5-5", "opus-5-5", "fable-5-1", "mythos-5-1"})
ONDEMAND_COMPACTION = frozenset(
    {
        "fable-5-1", "mythos-5-1", "fable-5", "mythos-5", "opus-5-5", "opus-5", "opus-4-8",
        "opus-4-7", "opus-4-6", "sonnet-5-5", "sonnet-5", "sonnet-4-6", "haiku-5-5",
    }
)  # fmt: skip
SYSTEM_MESSAGES = frozenset(
    {
        "fable-5-2", "mythos-5-2", "fable-5-1", "mythos-5-1", "fable-5", "mythos-5",
        "opus-5-5", "opus-5", "opus-4-8", "sonnet-5-5", "haiku-5-5",
    }
)  # fmt: skip
"""Models that take mid-conversation ``role: "system"`` messages (not Sonnet 5, not 4.x but
Opus 4.8)."""
_FABLE_LINE = ("fable", "mythos")
EFFORTS = ("low", "medium", "high", "xhigh", "max")


def family(model: Any) -> str:
    """``claude-sonnet-5-5-20261001`` -> ``sonnet-5-5``; ``claude-fable-5`` -> ``fable-5``."""
    match = _ID.match(str(model))
    if match is None:
        return str(model)
    name, major, minor = match.groups()
    return f"{name}-{major}" + (f"-{minor}" if minor else "")


def _version(key: str) -> tuple[str, int, int]:
    parts = key.split("-")
    try:
        return parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
    except (IndexError, ValueError):
        return key, 0, 0


def generation(key: str) -> int:
    return _version(key)[1]


def is_fable(key: str) -> bool:
    return _version(key)[0] in _FABLE_LINE


def thinks_by_default(key: str) -> bool:
    """Every 5.x model (and Fable/Mythos) thinks when the request has no ``thinking``."""
    return generation(key) >= 5 or is_fable(key)


def prefix_checked(key: str) -> bool:
    if key in PREFIX_CHECK:
        return True
    name, major, minor = _version(key)
    if name in _FABLE_LINE:
        return major > 5 or (major == 5 and minor >= 1)
    return major > 5 or (major == 5 and minor > 5)  # a later 5.x: like the 5.5 models


def can_read(reader: str, producer: str) -> bool:
    """Whether ``reader`` may read thinking produced by ``producer`` (notes 1.1)."""
    if reader == producer:
        return True
    if producer in ("fable-5-2", "mythos-5-2"):
        return reader in ("fable-5-2", "mythos-5-2")
    if producer == "sonnet-5-5":
        return reader == "opus-5-5"
    if producer == "haiku-5-5":
        return reader in ("opus-5-5", "sonnet-5-5")
    if reader in ("fable-5-2", "mythos-5-2"):
        return True
    if reader in ("fable-5-1", "mythos-5-1"):
        return producer in ("fable-5-1", "mythos-5-1", "opus-5-5") or not prefix_checked(producer)
    if is_fable(producer):
        return False  # no non-Fable model reads Fable/Mythos blocks
    if reader == "opus-5-5":
        return not prefix_checked(producer) or producer in ("sonnet-5-5", "haiku-5-5")
    if reader == "sonnet-5-5":
        return generation(producer) < 5 or producer == "sonnet-5"
    return generation(producer) <= generation(reader) and not prefix_checked(producer)


def thinking_types(key: str) -> dict[str, bool]:
    """Which ``thinking.type`` values the model accepts (notes section 2)."""
    if key == "sonnet-5-5":
        return {"adaptive": True, "between_tools": True, "disabled": False, "enabled": False}
    if key in ("opus-5-5",) or is_fable(key):
        return {"adaptive": True, "between_tools": False, "disabled": False, "enabled": False}
    if generation(key) >= 5 or key in ("opus-4-8", "opus-4-7"):
        return {"adaptive": True, "between_tools": False, "disabled": True, "enabled": False}
    return {"adaptive": True, "between_tools": False, "disabled": True, "enabled": True}


def default_effort(key: str) -> str:
    return "high" if key == "sonnet-5-5" else "medium" if generation(key) >= 5 else "high"


def ondemand_compaction(key: str) -> bool:
    return key in ONDEMAND_COMPACTION or (generation(key) >= 5 and prefix_checked(key))


def system_messages(key: str) -> bool:
    if key in SYSTEM_MESSAGES:
        return True
    return prefix_checked(key)


def capabilities(key: str, *, compaction: bool) -> dict[str, Any]:
    """The Models API's ``capabilities`` object of a model."""

    def support(value: bool) -> dict[str, bool]:
        return {"supported": value}

    types = thinking_types(key)
    five = generation(key) >= 5 or is_fable(key)
    return {
        "batch": support(True),
        "citations": support(True),
        "code_execution": support(True),
        "compaction": {"supported": compaction, "summarize": support(compaction)},
        "context_management": support(True),
        "effort": {
            "supported": True,
            **{level: support(level != "xhigh" or five) for level in EFFORTS},
        },
        "image_input": support(True),
        "pdf_input": support(True),
        "server_tools": {
            "supported": True,
            "code_execution": support(True),
            "web_search": support(True),
        },
        "structured_outputs": support(True),
        "thinking": {
            "supported": True,
            "types": {name: support(value) for name, value in types.items()},
        },
    }
