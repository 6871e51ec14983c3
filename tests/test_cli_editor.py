"""Reading the user's messages (``_cli/editor``): a long paste folded into a label and expanded
when sent, and a history file past its cap cut to its newest entries."""

from __future__ import annotations

from pathlib import Path

from agentloop._cli import editor
from agentloop._cli.editor import Pastes, trim_history


def test_a_long_paste_is_folded_into_a_label_and_expanded_when_sent() -> None:
    pastes = Pastes()
    text = "".join(f"row {n}\n" for n in range(300))
    label = pastes.fold(text)
    assert label == "[pasted 300 lines]"
    assert pastes.fold("short\npaste") == "short\npaste"
    other = pastes.fold(text.replace("row", "col"))
    assert other == "[pasted 300 lines #2]"
    assert pastes.expand(f"look: {label} and {other}") == (
        f"look: {text} and {text.replace('row', 'col')}"
    )
    assert pastes.fold("x" * 5000) == "[pasted 5,000 characters]"


def test_a_history_file_past_its_cap_is_cut_to_its_newest_entries(tmp_path: Path) -> None:
    path = tmp_path / "history"
    entries = [f"\n# 2026-01-01 00:00:00\n+message {n} {'x' * 400}\n" for n in range(5000)]
    path.write_text("".join(entries) + "\n# 2026\n+" + "y" * 100_000 + "\n\n# 2026\n+last one\n")
    assert path.stat().st_size > editor.HISTORY_MAX_BYTES
    trim_history(path)
    kept = path.read_text()
    assert path.stat().st_size <= editor.HISTORY_MAX_BYTES // 2
    assert kept.endswith("\n# 2026\n+last one\n") and "message 4999" in kept
    assert "y" * 1000 not in kept and "message 0 " not in kept
    assert kept.startswith("\n# ")
