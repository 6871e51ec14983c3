"""What a compaction carries (the ledger, the preserved state, pins) when its child ends with a
reply — ``/compact`` between turns — goes with the next message. Until then it waits: the
receipt counts it as in the context, and an exit before the next message loses none of it."""

from __future__ import annotations

from typing import Any

from fake_api import text_reply, tool_reply
from support.cli import CLI
from support.loop_scripts import filler

from agentloop._agent.agent import CARRIED_KEY
from agentloop._core.compaction.api_compaction import CARRIED_OPEN

WIDE = ("--context-window", "100000")
REQUESTS = [f"request {n}: rename KEY-{n}" for n in range(4)]


def _carried(body: dict[str, Any]) -> list[int]:
    """Where the messages of ``body`` hold the carried context (a system message)."""
    return [
        index
        for index, message in enumerate(body["messages"])
        if message["role"] == "system" and CARRIED_OPEN in str(message["content"])
    ]


def _metadata(cli: CLI, session_prefix: str) -> dict[str, Any]:
    with cli.store() as store:
        (session,) = [s for s in store.list_sessions(limit=None) if s.id.startswith(session_prefix)]
        return dict(session.metadata)


def test_an_exit_right_after_compact_keeps_what_it_carries_for_the_next_message(
    cli: CLI,
) -> None:
    (cli.workspace / "settings.py").write_text("KEY_0 = 1\n")
    cli.script.add(tool_reply(("read_file", {"path": "settings.py"})))
    for n in range(len(REQUESTS)):
        cli.script.add(text_reply(filler(f"answer {n}", 120)))
    first = cli.run(*WIDE, stdin="\n".join(REQUESTS))
    assert first.code == 0, first.err

    compacted = cli.run(*WIDE, "-c", stdin="/compact\n/context\n")

    assert compacted.code == 0, compacted.err
    (notice,) = compacted.notices
    # The receipt counts what waits for the next message: the ledger holds the file read in
    # the compacted span, which the API's summary (the user's requests) does not name.
    assert "paths touched: 1 of 1 in context" in compacted.err, compacted.err
    assert "The last compaction left nothing out of the context" in compacted.err
    waiting = _metadata(cli, notice["child"])[CARRIED_KEY]
    assert CARRIED_OPEN in waiting[0]["text"] and "KEY-3" in waiting[0]["text"]

    cli.script.add(text_reply("KEY-3 is renamed."))
    resumed = cli.run(*WIDE, "-c", stdin="and now?\n")

    assert resumed.code == 0, resumed.err
    body = cli.fake_api.message_requests[-1]
    assert body["messages"][0]["content"][0]["type"] == "compaction"
    # Right after the new message, as it would have gone without the exit; placed once.
    user_at = max(i for i, m in enumerate(body["messages"]) if m["role"] == "user")
    assert _carried(body) == [user_at + 1]
    assert "KEY-3" in str(body["messages"][user_at + 1]["content"])
    assert CARRIED_KEY not in _metadata(cli, notice["child"])


def test_a_carried_context_the_store_holds_in_another_shape_is_ignored(cli: CLI) -> None:
    """A metadata value that is not text blocks (an edited store) is no carried context."""
    for n in range(2):
        cli.script.add(text_reply(filler(f"answer {n}", 60)))
    assert cli.run(*WIDE, stdin="\n".join(REQUESTS[:2])).code == 0
    with cli.store() as store:
        (session,) = store.list_sessions(limit=None)
        store.update_session(session.id, metadata={CARRIED_KEY: [{"type": "image"}, 3]})

    cli.script.add(text_reply("fine"))
    run = cli.run(*WIDE, "-c", stdin="and now?\n")

    assert run.code == 0, run.err
    assert _carried(cli.fake_api.message_requests[-1]) == []


def test_undo_and_clear_drop_what_the_compaction_they_leave_behind_carried(cli: CLI) -> None:
    """After ``/undo-compaction`` the uncompacted history holds everything (the carried context
    would repeat it); after ``/clear`` nothing was compacted."""
    for command in ("/undo-compaction", "/clear"):
        for n in range(len(REQUESTS)):
            cli.script.add(text_reply(filler(f"answer {n}", 120)))
        cli.script.add(text_reply("ok"))
        lines = [*REQUESTS, "/compact", command, "and now?"]

        run = cli.run(*WIDE, stdin="\n".join(lines))

        assert run.code == 0, run.err
        assert len(run.notices) == 1
        body = cli.fake_api.message_requests[-1]
        assert body["messages"][-1]["content"][0]["text"] == "and now?", command
        assert _carried(body) == [], command
