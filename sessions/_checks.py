"""Argument checks and value rules every backend shares (written once, used by all)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._types import NewMessage


def require_str(name: str, value: object) -> str:
    """``value`` if it is a string, else TypeError naming the argument."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


def require_int(
    name: str, value: object, *, minimum: int, error: type[ValueError] = ValueError
) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``, else ``error`` naming the argument."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One encoder for every write: json.dumps with options builds a new one per call, which was a
visible share of saving a large compacted child."""


def dumps(value: Any) -> str:
    """Compact JSON text (raises TypeError/ValueError for what JSON cannot hold)."""
    return _ENCODER.encode(value)


def merge_metadata(current: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with ``update`` merged at the top level; a key set to None is removed."""
    merged = dict(current)
    for key, value in update.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    dumps(merged)  # refuse what cannot be stored before any write
    return merged


def as_new_message(message: NewMessage | Mapping[str, Any]) -> NewMessage:
    """A validated :class:`NewMessage` (a Messages API mapping is validated into one)."""
    if isinstance(message, NewMessage):
        return message
    return NewMessage.model_validate(message)
