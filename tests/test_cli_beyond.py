"""Issue 12 through the real CLI against our test server: the compaction preview writes
nothing and calls no model, an undone compaction restores the exact parent history, a fork
leaves its source as it was, and the model's own compact_context request is honoured at the
next safe boundary."""

from __future__ import annotations

from pathlib import Path

from fake_api import text_reply, tool_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import (
    PREFIX_START,
    compaction_requests,
    filler,
    first_text,
    opens_with_api_summary,
)


def _store_dump(cli: CLI) -> list[tuple[str, int]]:
    with cli.store() as store:
        return [(s.id, s.message_count) for s in store.list_sessions(limit=None)]


def test_dry_run_shows_the_plan_and_changes_nothing(cli: CLI) -> None:
    lines = conversation_lines(4, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    assert cli.run("--context-window", "100000", stdin="\n".join(lines)).code == 0
    before_store = _store_dump(cli)
    requests = len(cli.fake_api.requests)

    run = cli.run("--context-window", "100000", "-c", stdin="/compact --dry-run\n")

    assert run.code == 0, run.err
    assert "Compaction preview (nothing was compacted, nothing written)" in run.err
    assert "strategy: summarize" in run.err
    assert "summarized:" in run.err and "kept verbatim:" in run.err
    assert "expected after: a range, ~" in run.err  # the summary is not written yet
    assert _store_dump(cli) == before_store  # nothing written
    new = cli.fake_api.requests[requests:]
    assert [r.path for r in new if r.path.startswith("/v1/messages")] == []  # no model call


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


def test_the_model_can_ask_for_a_compaction_at_the_next_safe_boundary(cli: CLI) -> None:
    lines = conversation_lines(3, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    cli.script.add(
        tool_reply(("compact_context", {"instructions": "keep the request numbers"})),
        text_reply("compacted, carrying on"),
    )
    stdin = "\n".join([*lines, "tidy your context"])
    run = cli.run("--context-window", "100000", stdin=stdin)

    assert run.code == 0, run.err
    assert len(run.notices) == 1
    # The API writes the summary (issue 27): the model's instructions reach its request.
    summary_request = compaction_requests(cli.fake_api.message_requests)[-1]
    assert "keep the request numbers" in summary_request["compaction"]["instructions"]
    last = cli.script.conversation[-1]
    assert opens_with_api_summary(last)
    tools = [tool["name"] for tool in last["tools"]]
    assert {"context_status", "compact_context"} <= set(tools)


def test_help_lists_the_agents_own_tools(cli: CLI, tmp_path: Path) -> None:
    run = cli.run("--context-window", WINDOW, stdin="/help\n")
    assert "context_status" in run.err and "compact_context" in run.err
    assert "/undo-compaction" in run.err and "/compact --dry-run" in run.err


def test_standing_summary_instructions_come_from_agentloop_md_and_show_in_context(
    cli: CLI,
) -> None:
    (cli.workspace / "AGENTLOOP.md").write_text(
        "# Project\nUse tabs.\n\n## Compaction\nAlways keep the API decisions.\n\n## Other\nx\n"
    )
    lines = conversation_lines(4, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    run = cli.run("--context-window", WINDOW, stdin="\n".join([*lines, "/context", "/compact"]))

    assert run.code == 0, run.err
    assert "Summary instructions (30 characters): Always keep the API decisions." in run.err
    summaries = compaction_requests(cli.fake_api.message_requests)
    assert summaries
    assert all(
        "Always keep the API decisions." in body["compaction"]["instructions"] for body in summaries
    )


def test_compaction_instructions_file_wins_and_a_missing_one_is_one_line(
    cli: CLI, tmp_path: Path
) -> None:
    missing = cli.run("--compaction-instructions", str(tmp_path / "nope.md"), "-p", "hi")
    assert missing.code == 2
    assert missing.err.startswith("agentloop: error: cannot read the compaction instructions")
    assert len(missing.err.splitlines()) == 1
