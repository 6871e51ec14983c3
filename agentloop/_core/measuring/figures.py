"""Token figures as every surface shows them: one rule for the compaction notice, ``sessions
tree``/``show``/``export``, ``/context``, ``/compact --dry-run``, the status line and the JSON.

A figure carries its source: ``api`` (the API counted it: a response's usage or
``count_tokens``), ``api+estimate`` (an API figure plus a local estimate of what came after),
``estimate`` (a calibrated local estimate), or None (not recorded: compactions stored before
the source was kept). Only a figure the API counted is shown bare; every other one carries a
``~``, an unrecorded one included (nothing vouches that it was counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COUNTED = "api"
SOURCES = ("api", "api+estimate", "estimate")

TOKEN_SOURCES = "compaction_token_sources"
"""The child session's metadata key for where its compaction's figures came from:
``{"tokens_before": source, "tokens_after": source}`` (every transition sets it, so a child
never inherits its parent's)."""


def is_counted(source: str | None) -> bool:
    """Whether the API counted the figure (it is shown without ``~``)."""
    return source == COUNTED


def mark(source: str | None) -> str:
    """``""`` for a figure the API counted, else ``"~"``."""
    return "" if is_counted(source) else "~"


def token_figure(tokens: int, source: str | None) -> str:
    """``12,345`` (counted by the API) or ``~12,345`` (estimated, partly or wholly, or not
    recorded)."""
    return f"{mark(source)}{tokens:,}"


def percent_figure(fraction: float, source: str | None) -> str:
    """A share of the window, marked like the token figure it comes from: ``35%`` / ``~35%``."""
    return f"{mark(source)}{fraction:.0%}"


def sources_metadata(before: str, after: str) -> dict[str, Any]:
    """What a compaction's child records about its figures (see :data:`TOKEN_SOURCES`)."""
    return {TOKEN_SOURCES: {"tokens_before": before, "tokens_after": after}}


def recorded_sources(metadata: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The sources of ``tokens_before`` and ``tokens_after`` recorded in a child's metadata;
    None for each one not recorded (or not one of :data:`SOURCES`)."""
    recorded = (metadata or {}).get(TOKEN_SOURCES)
    if not isinstance(recorded, Mapping):
        return None, None
    before, after = recorded.get("tokens_before"), recorded.get("tokens_after")
    return (
        before if before in SOURCES else None,
        after if after in SOURCES else None,
    )


def plural(count: int, word: str) -> str:
    """A count with its noun, as every surface writes one: ``1 sample``, ``2,048 samples``."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"
