"""Context window and output limits of Claude models.

Resolution order: an explicit override, the on-disk cache of earlier Models API answers, the
Models API itself (through a ``fetch`` callable, so this module does not import ``anthropic``),
the model's profile in the shipped table (``profile_table``), and finally a conservative
default. A model that only reaches the default carries a one-line ``warning`` on its
:class:`ModelLimits` for the caller to show (returned rather than emitted with
``warnings.warn``, so it is shown every time it matters and never swallowed by a warnings
filter).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeAlias

from agentloop._core.values.profile_table import BUILTIN_WINDOWS, base_model_id, builtin_profile
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS, positive_int, validate_window
from agentloop._errors import ConfigurationError

LimitsSource: TypeAlias = Literal[
    "override", "session", "models_api", "cache", "builtin", "default"
]
"""Where limits came from; ``session``: the ``--context-window`` a resumed session started with."""
Fetch: TypeAlias = Callable[[str], tuple[int | None, int | None]]
"""Asks the Models API for ``(max_input_tokens, max_tokens)`` of a model; may raise."""

DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_MAX_OUTPUT_TOKENS = DEFAULT_MAX_TOKENS
CACHE_TTL = timedelta(days=7)
_CACHE_VERSION = 1


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What a model can take in and give back, and where those numbers came from."""

    context_window: int
    max_output_tokens: int
    source: LimitsSource
    warning: str | None = None
    """A one-line message for the user when the limits are a guess (unknown model)."""


BUILTIN_LIMITS: Mapping[str, tuple[int, int]] = BUILTIN_WINDOWS
"""``model id -> (context window, max output tokens)`` for current Claude models (the
profile table's)."""


def builtin_limits(model: str) -> ModelLimits | None:
    """Limits from the model's profile in the shipped table (dated ids by their base id)."""
    profile = builtin_profile(model)
    if profile.context_window is None or profile.max_output_tokens is None:
        return None
    return ModelLimits(profile.context_window, profile.max_output_tokens, "builtin")


def default_limits(model: str) -> ModelLimits:
    """The conservative guess for a model nobody knows, with the warning to show."""
    return ModelLimits(
        DEFAULT_CONTEXT_WINDOW,
        DEFAULT_MAX_OUTPUT_TOKENS,
        "default",
        warning=(
            f"unknown model {model!r}: assuming a {DEFAULT_CONTEXT_WINDOW:,}-token context window "
            f"and {DEFAULT_MAX_OUTPUT_TOKENS:,} output tokens (set the context window explicitly "
            "to change this)"
        ),
    )


def _positive_int(value: object) -> int | None:
    """``value`` if it is a positive int (the one rule, :func:`positive_int`), else None:
    for data read from the API or the cache, where a bad value only means "unknown"."""
    try:
        return positive_int(value, what="value")
    except ConfigurationError:
        return None


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _CacheEntry:
    context_window: int
    max_output_tokens: int | None
    fetched_at: datetime


class ContextWindowResolver:
    """Resolves :class:`ModelLimits` for model ids; see the module docstring for the order.

    ``fetch`` is asked at most once per model over the resolver's life; a successful answer is
    written to ``cache_path`` (JSON, mode 0600, atomic replace) and reused for 7 days by any
    resolver. Cache problems (corrupt file, unwritable directory) never raise: the cache is only
    an optimization. ``overrides`` maps model ids (exact or base id) to context windows.
    """

    def __init__(
        self,
        *,
        fetch: Fetch | None,
        cache_path: Path | None,
        overrides: Mapping[str, int] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._fetch = fetch
        self._cache_path = cache_path
        self._overrides = {
            model: validate_window(window, what=f"context window for {model}")
            for model, window in (overrides or {}).items()
        }
        self._clock = clock or _utc_now
        self._resolved: dict[str, ModelLimits] = {}
        self._local_output: dict[str, int] = {}
        self._lock = threading.Lock()

    def resolve(self, model: str, override: int | None = None) -> ModelLimits:
        """Limits of ``model``; ``override`` (or a configured override) sets the window."""
        if override is None:
            override = self._overrides.get(model, self._overrides.get(base_model_id(model)))
        if override is not None:
            window = validate_window(override)
            # Only the window is overridden; the output limit comes from what is known locally
            # (never a network call), capped so that it fits in the window.
            return ModelLimits(window, min(self._local_max_output(model), window), "override")
        with self._lock:
            limits = self._resolved.get(model)
            if limits is None:
                limits = self._resolve_uncached(model)
                self._resolved[model] = limits
            return limits

    def _resolve_uncached(self, model: str) -> ModelLimits:
        entries = self._read_cache()
        entry = entries.get(model)
        now = self._now()
        # An entry dated in the future (clock change, hand edit) is treated as stale.
        if entry is not None and timedelta(days=-1) <= now - entry.fetched_at <= CACHE_TTL:
            return self._from_entry(model, entry, "cache")
        fetched = self._ask_api(model)
        if fetched is not None:
            window, output = fetched
            entries[model] = _CacheEntry(window, output, now)
            self._write_cache(entries)
            return self._from_entry(model, entries[model], "models_api")
        if entry is not None:
            # A stale answer from the API about this very model beats a table entry.
            return self._from_entry(model, entry, "cache")
        return builtin_limits(model) or default_limits(model)

    def _now(self) -> datetime:
        now = self._clock()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def _ask_api(self, model: str) -> tuple[int, int | None] | None:
        if self._fetch is None:
            return None
        try:
            window, output = self._fetch(model)
        except Exception:
            # No key, no network, model unknown to the API...: any failure means "unavailable".
            return None
        window = _positive_int(window)
        if window is None:
            return None
        return window, _positive_int(output)

    def _from_entry(self, model: str, entry: _CacheEntry, source: LimitsSource) -> ModelLimits:
        output = entry.max_output_tokens
        if output is None:
            known = builtin_limits(model)
            output = known.max_output_tokens if known else DEFAULT_MAX_OUTPUT_TOKENS
        return ModelLimits(entry.context_window, min(output, entry.context_window), source)

    def _local_max_output(self, model: str) -> int:
        with self._lock:
            output = self._local_output.get(model)
            if output is None:
                known = (
                    self._resolved.get(model)
                    or self._cached_limits(model)
                    or builtin_limits(model)
                    or default_limits(model)
                )
                output = self._local_output[model] = known.max_output_tokens
            return output

    def _cached_limits(self, model: str) -> ModelLimits | None:
        entry = self._read_cache().get(model)
        return self._from_entry(model, entry, "cache") if entry else None

    def _read_cache(self) -> dict[str, _CacheEntry]:
        if self._cache_path is None:
            return {}
        try:
            data = json.loads(self._cache_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
            return {}
        models = data.get("models")
        if not isinstance(models, dict):
            return {}
        entries: dict[str, _CacheEntry] = {}
        for model, raw in models.items():
            entry = _parse_entry(raw)
            if entry is not None:
                entries[str(model)] = entry
        return entries

    def _write_cache(self, entries: Mapping[str, _CacheEntry]) -> None:
        if self._cache_path is None:
            return
        data = {
            "version": _CACHE_VERSION,
            "models": {
                model: {
                    "context_window": entry.context_window,
                    "max_output_tokens": entry.max_output_tokens,
                    "fetched_at": entry.fetched_at.isoformat(),
                }
                for model, entry in sorted(entries.items())
            },
        }
        # Unwritable cache: the next resolver asks the API again; nothing breaks.
        with contextlib.suppress(OSError):
            _write_atomic(self._cache_path, json.dumps(data, indent=2) + "\n")


def _parse_entry(raw: Any) -> _CacheEntry | None:
    if not isinstance(raw, dict):
        return None
    window = _positive_int(raw.get("context_window"))
    output = raw.get("max_output_tokens")
    try:
        fetched_at = datetime.fromisoformat(str(raw.get("fetched_at")))
    except ValueError:
        return None
    if window is None or (output is not None and _positive_int(output) is None):
        return None
    if fetched_at.tzinfo is None:
        fetched_at = fetched_at.replace(tzinfo=UTC)
    return _CacheEntry(window, _positive_int(output), fetched_at)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp creates it 0600
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = [
    "BUILTIN_LIMITS",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "ContextWindowResolver",
    "Fetch",
    "LimitsSource",
    "ModelLimits",
    "base_model_id",
    "builtin_limits",
    "default_limits",
]
