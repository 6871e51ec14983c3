"""``/compact`` through the real CLI against the fake Messages API: a preview (``--dry-run``)
shows the plan, writes nothing and calls no model, with or without instructions, on an empty
conversation too; a mistyped option is refused, not taken as instructions; the summary follows
the standing instructions (``AGENTLOOP.md``'s Compaction section, ``--compaction-instructions``);
and the model's own ``compact_context`` request is honoured at the next safe boundary."""

from __future__ import annotations

from pathlib import Path

from fake_api import text_reply, tool_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import compaction_requests, filler, opens_with_api_summary


def _store_dump(cli: CLI) -> list[tuple[str, int, str | None]]:
    with cli.store() as store:
        return [(s.id, s.message_count, s.parent_id) for s in store.list_sessions(limit=None)]


def _converse(cli: CLI, turns: int, words: int = 200, *args: str) -> None:
    lines = conversation_lines(turns, words)
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", words)))
    run = cli.run(*args, stdin="\n".join(lines))
    assert run.code == 0, run.err


# -- /compact --dry-run ------------------------------------------------------------------------


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


def test_dry_run_with_instructions_previews_and_writes_nothing(cli: CLI) -> None:
    _converse(cli, 4, 200, "--context-window", "100000")
    before = _store_dump(cli)
    requests = len(cli.fake_api.requests)

    run = cli.run(
        "--context-window",
        "100000",
        "-c",
        stdin="/compact --dry-run keep the hello\n/compact keep it --dry-run\n",
    )

    assert run.code == 0, run.err
    assert run.err.count("Compaction preview (nothing was compacted, nothing written)") == 2
    assert "instructions: 'keep the hello' (the summary would follow them" in run.err
    assert "instructions: 'keep it'" in run.err
    assert not run.notices and "Compaction skipped" not in run.err
    assert _store_dump(cli) == before  # no child, no message
    new = cli.fake_api.requests[requests:]
    assert [r.path for r in new if r.path.startswith("/v1/messages")] == []  # no model call


def test_a_mistyped_compact_option_is_refused_not_taken_as_instructions(cli: CLI) -> None:
    _converse(cli, 4, 200, "--context-window", "100000")
    before = _store_dump(cli)

    run = cli.run("--context-window", "100000", "-c", stdin="/compact --dryrun keep it\n")

    assert run.code == 0, run.err
    usage = "(usage: /compact [--dry-run | --review] [instructions])"
    assert f"unknown option --dryrun {usage}" in run.err
    assert cli.script.summaries == [] and _store_dump(cli) == before


def test_a_preview_of_an_empty_conversation_writes_nothing_either(cli: CLI) -> None:
    run = cli.run("--context-window", WINDOW, stdin="/compact --dry-run keep the hello\n")

    assert run.code == 0, run.err
    assert "Traceback" not in run.err and "error" not in run.err, run.err
    assert _store_dump(cli) == [] and cli.fake_api.message_requests == []


# -- what the summary follows ------------------------------------------------------------------


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


# -- the model asks ----------------------------------------------------------------------------


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
    # The API writes the summary (on-demand compaction): the model's instructions reach its
    # request.
    summary_request = compaction_requests(cli.fake_api.message_requests)[-1]
    assert "keep the request numbers" in summary_request["compaction"]["instructions"]
    last = cli.script.conversation[-1]
    assert opens_with_api_summary(last)
    tools = [tool["name"] for tool in last["tools"]]
    assert {"context_status", "compact_context"} <= set(tools)
