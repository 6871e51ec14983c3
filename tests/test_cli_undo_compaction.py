"""``/undo-compaction`` through the real CLI against the fake Messages API: the conversation
continues from the exact parent history in a new branch, an undone automatic compaction keeps
the turn it answered and is not redone at once, and with nothing to undo it says so."""

from __future__ import annotations

import json
import re
from typing import Any

from fake_api import text_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import PREFIX_START, filler, first_text


def _request_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def test_undo_compaction_continues_from_the_exact_parent_history(cli: CLI) -> None:
    lines = conversation_lines(4, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*lines, "/compact"])
    assert cli.run("--context-window", WINDOW, stdin=stdin).code == 0
    with cli.store() as store:
        child = store.list_sessions(workspace=str(cli.workspace), limit=1)[0]
        assert child.parent_id is not None
        parent_history = [m.to_param() for m in store.get_messages(child.parent_id)]
        child_history = [m.to_param() for m in store.get_messages(child.id)]
    cli.script.add(text_reply("back before the compaction"))

    run = cli.run("--context-window", WINDOW, "-c", stdin="/undo-compaction\nwhere were we?\n")

    assert run.code == 0, run.err
    assert "Compaction undone" in run.err
    request = cli.script.conversation[-1]
    assert request["messages"][:-1] == parent_history  # the exact uncompacted history
    assert not first_text(request).startswith(PREFIX_START)
    with cli.store() as store:
        assert [m.to_param() for m in store.get_messages(child.id)] == child_history
        assert len(store.children(child.parent_id)) == 2  # the compacted child and the branch


def test_undo_after_an_automatic_compaction_keeps_the_answered_turn(cli: CLI) -> None:
    cli.fake_api.context_window = 12_000  # the API refuses what does not fit
    lines = conversation_lines(14, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    cli.script.add(text_reply("after the undo"))
    stdin = "\n".join([*lines, "/undo-compaction", "one more"])

    # A threshold under the reply reserve's edge, so that a pause fits above the trigger (at
    # 85 % none does: the trigger is already where the reply reserve begins); a model the test
    # server does not compact on demand.
    run = cli.run(
        *("-m", "claude-haiku-4-5", "--compaction-threshold", "0.6", "--context-window", "12000"),
        stdin=stdin,
    )

    assert run.code == 0, run.err
    assert len(run.notices) == 1  # one automatic compaction, and none after the undo
    in_child = [b for b in cli.script.conversation if first_text(b).startswith(PREFIX_START)]
    assert in_child  # the turns after the compaction were answered in the child
    kept = re.search(
        r"Compaction undone: continuing from before it, with the (\d+) messages? "
        r"said since it, in new session",
        run.err,
    )
    assert kept is not None, run.err
    assert int(kept.group(1)) == 2 * len(in_child) - 1  # its answers, and the turns between
    assert "automatic compaction waits until it passes" in run.err
    last = cli.script.conversation[-1]
    text = _request_text(last)
    assert not first_text(last).startswith(PREFIX_START)  # the uncompacted history
    for n in range(len(lines)):  # every turn, the one the compaction interrupted too
        assert f"answer {n}:" in text
    assert "interrupted or failed" not in text
    with cli.store() as store:
        branch = store.list_sessions(limit=1)[0]
        parent = store.get_session(branch.parent_id or "")
        kept_messages = store.get_messages(branch.id)
        assert [m.content for m in kept_messages[: parent.message_count]] == [
            m.content for m in store.get_messages(parent.id)
        ]
        assert store.compaction_history(branch.id)[-1].child_id != branch.id  # a branch


def test_undo_with_nothing_to_undo_says_so(cli: CLI) -> None:
    cli.script.add(text_reply("hello"))

    run = cli.run("--context-window", WINDOW, stdin="/undo-compaction\nhi\n/undo-compaction\n")

    assert run.code == 0, run.err  # an answer, not a failure
    assert "Nothing to undo: this conversation was never compacted" in run.err
    assert re.search(
        r"Nothing to undo: session [0-9a-z]{8} did not come from a compaction", run.err
    )
    assert "no session" not in run.err and "error" not in run.err
