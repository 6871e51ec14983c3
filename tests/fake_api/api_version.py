"""What the ``anthropic-version`` header changes (notes 8; docs ``/api/versioning``,
``/api/migration-2026-10-21``).

``2026-10-21`` (what the ``anthropic`` SDK 2.x sends by default) removes ``temperature``,
``top_p`` and ``top_k`` (any value, every model, ``count_tokens`` too), a ``document`` block in
an assistant message, and a ``text`` block with non-empty ``citations`` in a user message (also
inside a ``search_result`` or a ``tool_result``). Under ``2023-06-01`` the older rules hold
(:mod:`fake_api.model_rules`: only non-default sampling values on the 5.x models).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

V2026 = "2026-10-21"
V2023 = "2023-06-01"
SAMPLING = ("temperature", "top_p", "top_k")
MIGRATION = "https://platform.claude.com/docs/en/api/migration-2026-10-21"


def is_2026(version: str | None) -> bool:
    """Whether the request runs under the ``2026-10-21`` rules (that version or a later one)."""
    return bool(version) and str(version) >= V2026


def version_problems(body: Any, version: str | None) -> list[str]:
    """What the request's ``anthropic-version`` refuses in ``body`` (empty: nothing)."""
    if not isinstance(body, dict) or not is_2026(version):
        return []
    problems = [
        f"{name}: this parameter was removed in API version {V2026} (see {MIGRATION})"
        for name in SAMPLING
        if name in body
    ]
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        role = message.get("role")
        for where, block in _blocks(f"messages.{index}", message["content"]):
            kind = block.get("type")
            if role == "assistant" and kind == "document":
                problems.append(
                    f"{where}: `document` blocks are not allowed in assistant messages in API "
                    f"version {V2026}"
                )
            if role == "user" and kind == "text" and block.get("citations"):
                problems.append(
                    f"{where}.citations: citations on user text are not accepted in API version "
                    f"{V2026}"
                )
    return problems


def _blocks(where: str, content: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every block of ``content`` with its path, the blocks inside a ``tool_result`` or a
    ``search_result`` too."""
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        at = f"{where}.content.{position}"
        yield at, block
        inner = block.get("content")
        if block.get("type") in ("tool_result", "search_result") and isinstance(inner, list):
            yield from _blocks(at, inner)
