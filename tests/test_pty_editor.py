"""Reading the user's messages (``_cli/editor``) in a real pseudo-terminal: a long paste shows
as a label while the message holds the paste itself, and the history file stays small."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_api import text_reply
from support.pty import Model, Terminal, launch, model, workspace

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch", "model", "workspace"]  # the pty fixtures, used here

pytest.importorskip("prompt_toolkit")


def test_a_long_paste_shows_as_a_label_and_the_history_stays_small(
    launch: Callable[..., Terminal], model: Model
) -> None:
    from agentloop._sessions import default_store_path

    history = default_store_path().parent / "history"
    history.parent.mkdir(parents=True, exist_ok=True)
    old = "".join(f"\n# 2026-01-01 00:00:00\n+old message {n} {'x' * 500}\n" for n in range(6000))
    history.write_text(old)  # 3 MB left by an earlier version
    model.replies.append(text_reply("got it"))
    pasted = "\n".join(f"row {n} of the log" for n in range(300))
    term = launch()
    term.prompt()
    term.send(f"\x1b[200~{pasted}\x1b[201~")
    term.expect(r"\[pasted 300 lines\]")
    assert "row 150 of the log" not in term.screen
    term.send("\r")
    term.expect("got it")
    assert model.last_text() == pasted  # the message holds the paste itself
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    kept = history.read_text()
    assert "[pasted 300 lines]" in kept and "row 150" not in kept
    assert history.stat().st_size < 1_000_000
    assert "old message 5999" in kept  # the newest entries stay
