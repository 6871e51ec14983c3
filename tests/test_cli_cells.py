"""Text measured in terminal cells (``_cli/cells``): a wide character takes two, a cut or a
wrap never splits one, and a table fits its width in cells."""

from __future__ import annotations

from agentloop._cli.cells import cells, cut_cells, wrap_cells
from agentloop._cli.render import Column, fit_table


def test_widths_are_display_cells() -> None:
    assert cells("abc") == 3 and cells("日本語") == 6 and cells("👍") == 2 and cells("é") == 1
    assert cut_cells("日本語のタイトル", 7) == "日本語…"
    assert all(cells(line) <= 10 for line in wrap_cells("日本語の 文章は とても 長いです", 10))
    rows = [["a1", "日本語のタイトル"], ["b2", "plain title"]]
    lines = fit_table([Column("ID"), Column("TITLE", flex=True, min_width=5)], rows, 14)
    assert [cells(line) <= 14 for line in lines] == [True] * 3
    assert lines[1] == "a1  日本語の…"  # 9 cells: a wide character does not split
