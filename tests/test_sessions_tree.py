"""``agentloop sessions tree`` (``_cli/list_commands``) at 80 columns: columns aligned, figures
whole, the one active session marked, and the branch an undo made labelled as such."""

from __future__ import annotations

import re

import pytest
from support.cli import CLI
from support.compacted_runs import undone
from support.screen import Screen

from agentloop._cli import list_commands

COLUMNS = 80


def test_the_tree_fits_80_columns_aligned_with_figures_whole_and_the_undo_labelled(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, child, branch = undone(cli)
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    out = Screen()
    with cli.store() as store:
        list_commands.tree_command(store, out, parent)
        entry = next(e for e in store.compaction_history(child) if e.child_id == child)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= COLUMNS for line in lines), lines
    rows = {line.strip("│├└─ ")[:8]: line for line in lines if re.match(r"^[│├└─ ]*\w{8}  ", line)}
    assert set(rows) == {parent[:8], child[:8], branch[:8]}
    # Columns aligned: every status starts at the same cell, every size ends at the same one.
    starts = {_at(r"\w{8} +(\w)", line, start=True) for line in rows.values()}
    ends = {_at(r"\d+ msgs?", line) for line in rows.values()}
    assert len(starts) == 1 and len(ends) == 1, lines
    # One session is active: the branch the undo made; the child it left is abandoned.
    assert "active" in rows[branch[:8]] and "abandoned" in rows[child[:8]]
    assert sum(" active " in line for line in lines) == 1
    text = "\n".join(lines)
    assert f"← /undo-compaction of {child[:8]} (from {parent[:8]})" in text
    figures = rf"\(~?{entry.tokens_before:,} → ~?{entry.tokens_after:,} tokens\)"
    assert re.search(rf"← compacted \d+ → \d+ msgs {figures} by {entry.strategy}\n", text + "\n")


def _at(pattern: str, line: str, *, start: bool = False) -> int:
    found = re.search(pattern, line)
    assert found is not None, line
    return found.start(1) if start else found.end()
