"""Where a run starts, through the real CLI against the fake Messages API: ``--fork-session``
with ``-c``/``-r`` continues in a new branch called a branch (not a compaction), and it and
``sessions fork`` leave the source session as it was."""

from __future__ import annotations

import re

from fake_api import text_reply
from support.cli import CLI, WINDOW


def test_fork_session_and_sessions_fork_leave_the_source_as_it_was(cli: CLI) -> None:
    cli.script.add(text_reply("first answer"))
    assert cli.run("--context-window", WINDOW, "-p", "first question").code == 0
    with cli.store() as store:
        source = store.list_sessions(workspace=str(cli.workspace), limit=1)[0]
    cli.script.add(text_reply("on the branch"))

    run = cli.run("--context-window", WINDOW, "-c", "--fork-session", "-p", "branch off")

    assert run.code == 0, run.err
    assert "Continuing in a new branch" in run.err
    with cli.store() as store:
        assert store.get_session(source.id).message_count == 2  # untouched
        (branch,) = store.children(source.id)
        assert store.get_session(branch.id).message_count == 4

    forked = cli.run("sessions", "fork", source.id[:8])
    assert forked.code == 0, forked.err
    assert forked.out.startswith(f"Forked {source.id[:8]} (2 messages) into ")
    with cli.store() as store:
        assert len(store.children(source.id)) == 2


def test_resume_with_fork_session_calls_it_a_branch_not_a_compaction(cli: CLI) -> None:
    cli.script.add(text_reply("first answer"))
    assert cli.run("--context-window", WINDOW, "-p", "first question").code == 0
    with cli.store() as store:
        source = store.list_sessions(limit=1)[0].id
    cli.script.add(text_reply("on the branch"))

    run = cli.run("--context-window", WINDOW, "-r", source[:8], "--fork-session", "-p", "go")

    assert run.code == 0, run.err
    assert "compacted" not in run.err
    assert re.search(
        rf"Continuing in a new branch: session [0-9a-z]{{8}} \(2 messages\) from session "
        rf"{source[:8]}, which stays as it was",
        run.err,
    )
