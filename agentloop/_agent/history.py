"""The most recent tool calls, kept for the preserved-state hook ("what was I just doing")."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentloop._agent.base import ToolStateError
from agentloop._agent.workspace import display_path
from agentloop._core.measuring.figures import plural

__all__ = ["ToolCallRecord", "ToolHistory"]


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call as the history remembers it."""

    name: str
    ok: bool
    summary: str


_SUMMARY_KEYS = ("command", "path", "pattern", "glob")
_SUMMARY_CHARS = 80


def _summarize_input(tool_input: Mapping[str, Any]) -> str:
    parts = [str(tool_input[key]) for key in _SUMMARY_KEYS if isinstance(tool_input.get(key), str)]
    if not parts and isinstance(tool_input.get("todos"), list):
        parts = [plural(len(tool_input["todos"]), "item")]
    if not parts:
        parts = [json.dumps(dict(tool_input), sort_keys=True, ensure_ascii=False, default=str)]
    text = display_path(" ".join(" ".join(parts).split()).replace("`", "'"))
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


class ToolHistory:
    """The most recent tool calls, for a preserved-state hook ("what was I just doing")."""

    def __init__(self, limit: int = 10) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._records: deque[ToolCallRecord] = deque(maxlen=limit)

    @property
    def records(self) -> tuple[ToolCallRecord, ...]:
        return tuple(self._records)

    def record(self, name: str, tool_input: Mapping[str, Any], *, is_error: bool) -> None:
        """Remember one call; the input is reduced to a short one-line summary."""
        self._records.append(ToolCallRecord(name, not is_error, _summarize_input(tool_input)))

    def render_markdown(self) -> str:
        """The recent calls as markdown, or ``No tool calls yet.``."""
        if not self._records:
            return "No tool calls yet."
        lines = [f"## Last {len(self._records)} tool calls (oldest first)"]
        for record in self._records:
            status = "ok" if record.ok else "error"
            lines.append(f"- {record.name} `{record.summary}` → {status}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [{"name": r.name, "ok": r.ok, "summary": r.summary} for r in self._records]
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, limit: int = 10) -> ToolHistory:
        history = cls(limit)
        calls = data.get("calls") if isinstance(data, Mapping) else None
        if not isinstance(calls, list):
            raise ToolStateError("saved tool history must be an object with a 'calls' list")
        for call in calls:
            if not (
                isinstance(call, Mapping)
                and isinstance(call.get("name"), str)
                and isinstance(call.get("ok"), bool)
                and isinstance(call.get("summary"), str)
            ):
                raise ToolStateError(f"malformed saved tool history entry: {call!r}")
            history._records.append(ToolCallRecord(call["name"], call["ok"], call["summary"]))
        return history
