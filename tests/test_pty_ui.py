"""The terminal face of a running agent (``_cli/ui``) in a real pseudo-terminal: the start line,
a reply drawn as Markdown (plain when piped), the spinner's time and hint, the file tools' diff
under the tool line, and the status line while automatic compaction waits."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply, tool_reply
from support.cli import CLI
from support.compacted_runs import OLDER, SMALL, seed_compacted
from support.pty import TIMEOUT, Model, Terminal, launch, model, pipe_run, workspace

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch", "model", "workspace"]  # the pty fixtures, used here

pytest.importorskip("prompt_toolkit")

COLUMNS = 80
REPLY = (
    "Here is the **plan**:\n\n- first step\n- second step\n\n"
    "```python\nprint('hi')\n```\n\nThat is all."
)


def test_the_start_line_and_a_reply_drawn_as_markdown(
    launch: Callable[..., Terminal], model: Model
) -> None:
    model.replies.append(text_reply(REPLY))
    term = launch("--context-window", "50000")
    # (wrapped at a word where the workspace's path makes it wider than the terminal)
    term.expect(r"agentloop · claude-[\w.-]+ · 50,000-token window \(--context-window\) ·\s")
    term.prompt()
    term.send("plan it\r")
    term.expect("• first step")
    term.expect("That is all.")
    term.prompt()
    assert "\x1b[1mplan" in term.raw  # bold, not asterisks
    assert "**plan**" not in term.screen and "```" not in term.screen
    term.send("\x04")
    assert term.wait() == 0


def test_a_piped_reply_stays_plain(
    fake_api: FakeAnthropicServer, model: Model, workspace: Path
) -> None:
    model.replies.append(text_reply(REPLY))
    done = pipe_run(fake_api, workspace, "plan it\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == REPLY + "\n"


def test_the_spinner_shows_the_time_and_how_to_interrupt(
    launch: Callable[..., Terminal], model: Model
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def held() -> ReplySpec:
        arrived.set()
        release.wait(10 * TIMEOUT)  # held until the test has seen the spinner, however slow
        return text_reply("finally")

    model.replies.append(held)
    term = launch()
    try:
        term.prompt()
        term.send("take your time\r")
        # The turn's own start (imports, counting) may take long on a loaded machine: wait for
        # the request itself; the spinner turns from before it was sent, and the reply is held
        # for as long as the test needs to see a second pass on it.
        assert arrived.wait(10 * TIMEOUT), "the request never reached the server"
        term.expect(r"Thinking… \([1-9]\d*s · Ctrl-C to interrupt\)")  # a second has passed
    finally:
        release.set()
    term.expect("finally")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def test_an_edit_shows_a_compact_diff(
    launch: Callable[..., Terminal], model: Model, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    edit = {"path": "notes.txt", "old_string": "line 12\n", "new_string": "twelve\n"}
    model.replies += [tool_reply(("edit_file", edit)), text_reply("edited")]
    term = launch()
    term.prompt()
    term.send("change line 12\r")
    term.expect("⎿ 1 line added, 1 removed")
    term.expect(r"12 - line 12\s+12 \+ twelve")
    term.expect("edited")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0


def test_while_compaction_waits_the_status_line_shows_the_threshold_in_force(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    seed_compacted(cli, 17)
    cli.script.add(text_reply("still answering"))

    term = launch(*OLDER, *SMALL, "-c", columns=COLUMNS)
    term.expect("Resuming session")
    term.prompt()
    term.send("/undo-compaction\r")
    term.expect("Compaction undone")
    held = term.expect(r"automatic compaction waits until it\s+passes\s+[\d,]+\s+tokens")
    term.prompt()
    term.send("go on\r")
    term.expect("still answering")
    line = term.expect(r"context \d+% · compacts at \d+%[^\n]*")
    # One threshold, the one in force, and why: never "compacts at 60%" beside "paused until".
    found = re.fullmatch(
        r"context (\d+)% · compacts at (\d+)% \(raised from 60%: a compaction was just undone\)",
        line,
    )
    assert found is not None, line
    used, raised = int(found[1]), int(found[2])
    waits = int(held.split()[-2].replace(",", ""))
    assert used < raised == round(100 * waits / 16_000)
    assert raised <= 85  # never into the reply reserve
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
