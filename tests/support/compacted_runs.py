"""Conversations made through the real CLI (the ``cli`` fixture) for the tests that look at what
a compaction leaves: one compacted automatically once, one compacted by ``/compact`` whose
compaction was then undone."""

from __future__ import annotations

import re

from fake_api import text_reply

from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import filler

OLDER = ("-m", "claude-haiku-4-5")
"""A model the test server does not compact on demand: the scripted summaries are written (the
compaction is agentloop's own, as the circuit breaker and ``sessions tree`` see it)."""
SMALL = ("--context-window", "16000", "--compaction-threshold", "0.6")
"""A 16k window with a threshold under the reply reserve's edge, so that a pause fits."""


def seed_compacted(cli: CLI, turns: int) -> str:
    """A conversation compacted automatically once, near its end; returns the notice."""
    lines = conversation_lines(turns, 250)
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    seeded = cli.run(*OLDER, *SMALL, stdin="\n".join(lines))
    assert seeded.code == 0, seeded.err
    assert len(seeded.notices) == 1, seeded.err
    return seeded.notices[0].group(0)


def undone(cli: CLI) -> tuple[str, str, str]:
    """A conversation compacted by /compact, then the compaction undone and the branch
    continued: (the parent, the abandoned child, the branch)."""
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact"])
    run = cli.run(*OLDER, "--context-window", WINDOW, stdin=stdin)
    assert run.code == 0, run.err
    (notice,) = run.notices
    with cli.store() as store:
        child = store.get_session(notice["child"]).id
        parent = store.get_session(child).parent_id
    assert parent is not None
    cli.script.add(text_reply("on the branch"))
    run = cli.run(*OLDER, "-c", stdin="/undo-compaction\nkeep going\n")
    assert run.code == 0, run.err
    found = re.search(r"in new session (\w{8})", run.err)
    assert found is not None, run.err
    with cli.store() as store:
        branch = store.get_session(found[1]).id
    return parent, child, branch
