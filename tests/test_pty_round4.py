"""Issue 38 in a real terminal of 80 columns against the test server: ``NO_COLOR`` (3) and what
the screen shows wrapped at word boundaries (7)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_api import text_reply, tool_reply
from support.pty import Model, Terminal, launch, model, workspace

__all__ = ["launch", "model", "workspace"]  # the pty fixtures

pytest.importorskip("prompt_toolkit")

COLUMNS = 80
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
REPLY = "Here is the **plan**:\n\n```python\nprint('hi')  # a comment\n```\n\nDone."


def _colors(raw: str) -> list[str]:
    """The color sequences in ``raw`` (foreground, background, 256 and true colors)."""
    found = []
    for match in SGR.finditer(raw):
        codes = [int(c) for c in re.split(r"[;:]", match.group(1)) if c.isdigit()]
        if any(30 <= c <= 49 or 90 <= c <= 107 for c in codes):
            found.append(match.group(0))
    return found


@pytest.fixture
def no_color(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``NO_COLOR=1`` in the environment the terminal's program gets (set before ``launch``)."""
    monkeypatch.setenv("NO_COLOR", "1")
    yield


def test_no_color_draws_no_color_in_the_agent_nor_in_sessions_search(
    no_color: None, launch: Callable[..., Terminal], model: Model, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    edit = {"path": "notes.txt", "old_string": "line 12\n", "new_string": "twelve zanzibar\n"}
    model.replies += [tool_reply(("edit_file", edit)), text_reply(REPLY)]
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send("change line 12 to twelve zanzibar\r")
    term.expect(r"12 - line 12\s+12 \+ twelve zanzibar")
    term.expect("Done.")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    assert "⎿ 1 line added, 1 removed" in term.screen

    assert _colors(term.raw) == [], _colors(term.raw)[:5]

    search = launch("sessions", "search", "zanzibar", columns=COLUMNS)
    assert search.wait() == 0
    assert "zanzibar" in search.screen
    assert _colors(search.raw) == [] and "\x1b[1m" not in search.raw, search.raw[-500:]
