"""The tool-call history: last calls rendered with their outcome, short summaries, saved state."""

from __future__ import annotations

import json

import pytest

from agentloop._agent.base import ToolStateError
from agentloop._agent.history import ToolHistory

# --------------------------------------------------------------------------------- history


def test_tool_history_renders_last_ten_with_outcome() -> None:
    history = ToolHistory()
    assert history.render_markdown() == "No tool calls yet."
    for i in range(12):
        history.record("read_file", {"path": f"f{i}.py"}, is_error=i == 11)
    text = history.render_markdown()
    lines = text.splitlines()
    assert lines[0] == "## Last 10 tool calls (oldest first)"
    assert lines[1] == "- read_file `f2.py` → ok"
    assert lines[-1] == "- read_file `f11.py` → error"
    assert len(lines) == 11 and "f0.py" not in text and "f1.py" not in text


def test_tool_history_summaries_are_short_single_lines() -> None:
    history = ToolHistory()
    history.record("run_command", {"command": "echo `a`\n" + "x" * 500}, is_error=False)
    history.record("todo_write", {"todos": [{}, {}, {}]}, is_error=False)
    history.record("custom", {"n": 1}, is_error=True)
    summaries = [record.summary for record in history.records]
    assert "\n" not in summaries[0] and "`" not in summaries[0]
    assert len(summaries[0]) <= 80 and summaries[0].endswith("…")
    assert summaries[1:] == ["3 items", '{"n": 1}']


def test_tool_history_round_trips_through_dict() -> None:
    history = ToolHistory()
    history.record("grep", {"pattern": "TODO", "path": "src"}, is_error=False)
    history.record("run_command", {"command": "pytest"}, is_error=True)
    restored = ToolHistory.from_dict(json.loads(json.dumps(history.to_dict())))
    assert restored.records == history.records
    assert restored.render_markdown() == history.render_markdown()
    with pytest.raises(ToolStateError):
        ToolHistory.from_dict({"calls": [{"name": "x"}]})
