"""Through the real CLI against the test server: what the user chose (window, model) is kept in
every session, every billed request counted once, a model the API does not know refused at
start-up, options never taken as instructions, a resume where AGENTS.md is absent, the figures
the screen shows, and a window above the model's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fake_api import ModelSpec, ReplySpec, text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler

from agentloop._sessions import default_store_path

SMALL = ("--context-window", "16000", "--compaction-threshold", "0.6")
HAIKU = ("-m", "claude-haiku-4-5")
"""A current model the test server does not compact on demand: the summaries are agentloop's."""


def _sessions(cli: CLI) -> list[tuple[str, str, object, str | None]]:
    """Every session, newest first: id, model, the window kept, parent."""
    with cli.store() as store:
        return [
            (s.id, s.model, s.metadata.get("context_window"), s.parent_id)
            for s in store.list_sessions(limit=None)
        ]


# -- 1. --context-window is kept in every session, written when the session exists ------------


def test_the_window_is_written_into_every_session_as_soon_as_it_exists(cli: CLI) -> None:
    script = cli.script
    written: list[object] = []

    def handler(body: dict[str, Any]) -> ReplySpec:
        if len(script.conversation) == 1 and not written:
            # The second request, the process still running (a crash would lose nothing).
            written.extend(window for _, _, window, _ in _sessions(cli))
        return script(body)

    cli.fake_api.handler = handler
    for n in range(17):
        script.add(text_reply(filler(f"answer {n}", 250)))
    script.add(text_reply("after clear"))
    lines = conversation_lines(17, 250)
    run = cli.run(*HAIKU, *SMALL, stdin="\n".join([*lines, "/clear", "a fresh question"]))
    assert run.code == 0, run.err
    assert run.notices, run.err  # it compacted: the children are sessions too
    assert written == [16_000]
    sessions = _sessions(cli)
    assert len(sessions) >= 3
    assert {window for _, _, window, _ in sessions} == {16_000}

    # -r of the conversation left with /clear, and -c (the fresh one): the window is kept.
    left = next(s for s in sessions[::-1] if s[3] is None)  # the oldest root: before /clear
    assert sum(1 for s in sessions if s[3] is None) == 2
    for args in (("-r", left[0][:8]), ("-c",)):
        shown = cli.run(*args, stdin="/context\n")
        assert shown.code == 0, shown.err
        assert "Window: 16,000 tokens (source: session)" in shown.err, shown.err


# -- 2. /model is kept; the store records the model each session ran on -----------------------


def test_model_switch_is_stored_and_continue_resumes_on_it(cli: CLI) -> None:
    lines = conversation_lines(17, 250)
    for n in range(18):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    run = cli.run(*HAIKU, *SMALL, stdin="\n".join(["hello", "/model claude-opus-4-6", *lines]))
    assert run.code == 0, run.err
    assert run.notices, run.err
    with cli.store() as store:
        head = store.list_sessions(limit=1)[0]
        children = [s for s in store.list_sessions(limit=None) if s.parent_id is not None]
    assert head.model == "claude-opus-4-6"
    assert children and {s.model for s in children} == {"claude-opus-4-6"}

    cli.script.add(text_reply("continued"))
    continued = cli.run("-c", stdin="which model\n")
    assert continued.code == 0, continued.err
    assert cli.script.conversation[-1]["model"] == "claude-opus-4-6"

    # -m chosen on resume: used, and said against the model the session ran on.
    cli.script.add(text_reply("on haiku"))
    chosen = cli.run(*HAIKU, "-c", stdin="again\n")
    assert chosen.code == 0, chosen.err
    assert cli.script.conversation[-1]["model"] == "claude-haiku-4-5"
    assert "the session ran on claude-opus-4-6" in chosen.err
    with cli.store() as store:
        assert store.list_sessions(limit=1)[0].model == "claude-haiku-4-5"


# -- 4. /cost counts every billed request once, under what it was for --------------------------


def test_cost_counts_reviewed_discarded_and_undone_summaries_once_each(cli: CLI) -> None:
    from support.loop_scripts import is_summary_request

    for n in range(6):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    lines = [filler(f"request {n}", 200) for n in range(6)]
    commands = [
        *("/compact --review", "r", "keep the tests", "q"),  # two summaries, neither applied
        *("/compact --review", "a"),  # applied: a child
        "/undo-compaction",  # that child is now another branch
        "/compact",  # applied on this branch
        "/cost",
    ]
    run = cli.run(*HAIKU, "--context-window", "60000", stdin="\n".join([*lines, *commands]))
    assert run.code == 0, run.err
    bills = list(cli.fake_api.bills)
    summaries = [b for b in bills if is_summary_request(b.body)]
    assert len(summaries) == 4
    whole = run.err[run.err.index("The whole conversation") :]
    assert f"{len(bills) - 4} requests, 4 summary requests):" in whole, whole
    assert "4 sessions across compactions, 1 of them on other branches" in whole
    assert (
        "summary requests: 1 for compactions applied; 2 discarded (a review redone or aborted, "
        "a summary prepared ahead gone stale); 1 on other branches (a compaction undone, a fork)"
    ) in " ".join(whole.split())


# -- 5. a deprecated model is said once, with its date ------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's own, on each request
def test_a_model_the_sdk_marks_deprecated_is_said_once_with_its_date(cli: CLI) -> None:
    cli.fake_api.models["claude-sonnet-4-5"] = ModelSpec("claude-sonnet-4-5", 200_000, 64_000)
    cli.script.add(text_reply("one"), text_reply("two"))
    run = cli.run("-m", "claude-sonnet-4-5", stdin="first\nsecond\n")
    assert run.code == 0, run.err
    said = [line for line in run.err.splitlines() if "deprecated" in line]
    assert said == [
        "agentloop: warning: claude-sonnet-4-5 is deprecated: its end of life is November 30th, "
        "2026 (a current model: -m, or /model in a session)"
    ]
    current = cli.run("-m", "claude-haiku-4-5", stdin="third\n")
    assert "deprecated" not in current.err


# -- 6. an unknown model refused at start-up; a blank one refused -------------------------------


def test_a_model_the_api_does_not_know_is_refused_before_the_first_message(cli: CLI) -> None:
    run = cli.run("-m", "claude-nonesuch-9", stdin="hello\n")
    assert run.code == 2
    assert run.err.strip().splitlines() == [
        "agentloop: error: the Models API does not know the model 'claude-nonesuch-9' (404): "
        "choose another with -m (default claude-sonnet-5-5)"
    ]
    assert cli.fake_api.message_requests == []  # found out before anything was sent
    with cli.store() as store:
        assert store.list_sessions() == []


@pytest.mark.parametrize("name", [" ", ""])
def test_a_blank_model_name_is_refused(cli: CLI, name: str) -> None:
    run = cli.run("-m", name, "-p", "hello")
    assert run.code == 2
    assert run.err.strip() == (
        f"agentloop: error: argument -m/--model: needs a model name, not {name!r}"
    )
    assert cli.fake_api.message_requests == []


def test_resuming_a_session_whose_model_the_api_no_longer_knows_says_why_not(cli: CLI) -> None:
    cli.fake_api.models["claude-old-4"] = ModelSpec("claude-old-4", 200_000, 64_000)
    cli.script.add(text_reply("on the old one"), text_reply("on the default"))
    assert cli.run("-m", "claude-old-4", "-p", "hello").code == 0
    del cli.fake_api.models["claude-old-4"]  # retired since (and the week's cache is over)
    (default_store_path().parent / "models.json").unlink()

    run = cli.run("-c", "-p", "still there?")
    assert run.code == 0, run.err
    assert (
        "agentloop: warning: the Models API does not know the model 'claude-old-4' (404): the "
        "session ran on it; continuing on claude-sonnet-5-5"
    ) in " ".join(run.err.split())
    assert cli.script.conversation[-1]["model"] == "claude-sonnet-5-5"


# -- 11. a window above the model's ------------------------------------------------------------


def test_a_window_above_the_models_own_is_refused(cli: CLI) -> None:
    run = cli.run(*HAIKU, "--context-window", "99999999999", "-p", "hello")
    assert run.code == 2
    assert run.err.strip() == (
        "agentloop: error: --context-window of 99,999,999,999 tokens is above claude-haiku-4-5's "
        "own 200,000-token window (models api): the API would refuse what does not fit"
    )
    assert cli.fake_api.message_requests == []


# -- 8. an option is never taken as instructions ------------------------------------------------


def test_an_unknown_option_of_compact_is_refused_wherever_it_stands(cli: CLI) -> None:
    cli.script.add(*(text_reply(filler(f"answer {n}", 100)) for n in range(4)))
    lines = [filler(f"request {n}", 100) for n in range(4)]
    commands = ["/compact --dry-run --foo", "/compact keep tests --bar", "/compact --review --baz"]
    run = cli.run(*HAIKU, stdin="\n".join([*lines, *commands]))
    assert run.code == 0, run.err
    usage = "(usage: /compact [--dry-run | --review] [instructions])"
    for option in ("--foo", "--bar", "--baz"):
        assert f"unknown option {option} {usage}" in " ".join(run.err.split())
    assert "Compaction preview" not in run.err and "instructions:" not in run.err
    assert not run.notices and cli.script.summaries == []


# -- 9. resumed where the instruction file is not -----------------------------------------------


def test_resuming_where_agents_md_is_absent_says_it_is_not_here(cli: CLI, tmp_path: Path) -> None:
    (cli.workspace / "AGENTS.md").write_text("Always run the tests with -q.\n")
    cli.script.add(text_reply("noted"), text_reply("still here"))
    assert cli.run("-p", "hello").code == 0
    with cli.store() as store:
        sid = store.list_sessions(limit=1)[0].id
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    run = cli.run("-r", sid[:8], stdin="go on\n", cwd=elsewhere)
    assert run.code == 0, run.err
    said = " ".join(run.err.split())
    assert (
        f"AGENTS.md is not in {elsewhere.resolve()}: its instructions no longer apply (the model "
        "is told so)"
    ) in said
    assert "changed since this session started" not in said


# -- 10. the figures ----------------------------------------------------------------------------


def test_the_status_line_reads_the_trigger_only_when_it_compacts() -> None:
    from agentloop._cli.ui import indicator
    from agentloop._core.measuring.context import ContextUsage, decide

    def line(tokens: int) -> tuple[str, bool]:
        usage = ContextUsage(tokens=tokens, window=10_000, source="api")
        decision = decide(
            usage, threshold=0.85, max_output_tokens=100, message_count=10, safe_boundary=True
        )
        assert decision.trigger_tokens == 8_500
        return indicator(decision, enabled=True), decision.compact

    # 8,460 tokens is 85% rounded, yet under the trigger: it must not read "85% · at 85%".
    assert line(8_460) == ("context 84% · compacts at 85%", False)
    assert line(8_499) == ("context 84% · compacts at 85%", False)
    assert line(8_500) == ("context 85% · compacts at 85%", True)
    assert line(8_100) == ("context 81% · compacts at 85%", False)


def test_trees_and_shows_name_the_apis_summary_and_count_the_path(cli: CLI) -> None:
    lines = conversation_lines(17, 250)
    for n in range(17):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    run = cli.run(*SMALL, stdin="\n".join([*lines, "/undo-compaction", "/compact"]))
    assert run.code == 0, run.err
    with cli.store() as store:
        head = store.list_sessions(limit=1)[0]
        whole = store.get_compaction_record(head.id).compaction_count
    tree = cli.run("sessions", "tree", head.id[:8])
    assert "by api_summary" not in tree.out and "by the API's summary" in tree.out, tree.out
    show = cli.run("sessions", "show", head.id[:8])
    path = len(run.notices) - 1  # one was undone: another branch
    assert whole == len(run.notices) > path
    assert (
        f"{path} compaction{'s' if path != 1 else ''} on the way to this session ({whole} in the "
        "whole lineage)"
    ) in show.out, show.out
    export = cli.run("sessions", "export", head.id[:8], "--format", "markdown")
    assert "server-side" not in export.out and "api_summary" not in export.out


def test_context_marks_the_instruction_files_sizes_as_estimates(cli: CLI) -> None:
    (cli.workspace / "AGENTS.md").write_text("Always run the tests with -q.\n")
    run = cli.run(stdin="/context\n")
    assert run.code == 0, run.err
    assert re.search(r"Instructions: AGENTS\.md \(~\d+ tokens\)", run.err), run.err


def test_a_receipt_of_one_fact_says_so_in_words() -> None:
    from agentloop._core.facts.receipt import Receipt

    receipt = Receipt(facts={"paths": 1})
    assert receipt.lines()[0].endswith("left nothing out of the context: the one fact")


# -- 12. the smaller ones -----------------------------------------------------------------------


def test_sessions_list_json_leaves_the_stored_prompt_and_tools_for_show(cli: CLI) -> None:
    import json

    from agentloop._agent.session_prefix import PREFIX_KEY
    from agentloop._cli.list_commands import NOT_LISTED

    cli.script.add(text_reply("one"), text_reply("two"))
    assert cli.run("-p", "first").code == 0
    assert cli.run("-p", "second").code == 0
    listed = cli.run("sessions", "list", "--json")
    rows = json.loads(listed.out)
    assert len(rows) == 2 and PREFIX_KEY in NOT_LISTED
    assert all(PREFIX_KEY not in row["metadata"] for row in rows)
    assert len(listed.out) < 8_000, len(listed.out)  # was 31 KB for two rows
    shown = json.loads(cli.run("sessions", "show", rows[0]["id"], "--json").out)
    assert shown["metadata"][PREFIX_KEY]["tools"]  # kept for show


def test_sessions_search_leaves_out_agentloops_own_carried_message(cli: CLI) -> None:
    import json

    lines = conversation_lines(17, 250)
    lines = ["zanzibar " + line for line in lines]  # the ledger carries each request's start
    for n in range(17):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    run = cli.run(*SMALL, stdin="\n".join([*lines, "go on", "and on"]))
    assert run.code == 0, run.err
    with cli.store() as store:
        carried = [
            (m.session_id, m.seq)
            for s in store.list_sessions(limit=None)
            for m in store.get_messages(s.id)
            if m.metadata.get("role") == "system" and "zanzibar" in str(m.content)
        ]
    assert carried  # the compaction carried the request in agentloop's own message
    hits = json.loads(cli.run("sessions", "search", "zanzibar", "--json").out)
    assert hits and not {(h["session_id"], h["seq"]) for h in hits} & set(carried)
    assert hits[0]["role"] == "user"


# -- the newcomer's path: 15 turns with /model, review, undo and /clear, then -r -------------


def test_the_newcomers_path_keeps_the_window_and_the_model(cli: CLI) -> None:
    turns = [filler(f"request {n}", 250) for n in range(15)]
    for n in range(15):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    script = [
        *turns[:5],
        "/model claude-opus-4-6",
        *turns[5:10],
        *("/compact --review", "a"),
        "/undo-compaction",
        *turns[10:13],
        "/clear",
        *turns[13:],
    ]
    run = cli.run(*HAIKU, *SMALL, stdin="\n".join(script))
    assert run.code == 0, run.err
    with cli.store() as store:
        everything = store.list_sessions(limit=None)
        roots = [s for s in everything if s.parent_id is None]
        assert len(roots) == 2
        left = min(roots, key=lambda s: s.created_at)  # the conversation left with /clear
        head = store.newest_descendant(left.id)
    assert {s.metadata.get("context_window") for s in everything} == {16_000}
    assert head.model == "claude-opus-4-6"

    cli.script.add(text_reply("resumed"))
    resumed = cli.run("-r", left.id[:8], stdin="/context\nwhere were we\n")
    assert resumed.code == 0, resumed.err
    assert "Window: 16,000 tokens (source: session)" in resumed.err
    assert cli.script.conversation[-1]["model"] == "claude-opus-4-6"


def test_the_first_request_keeps_its_reply_within_the_window_before_calibration(
    cli: CLI,
) -> None:
    # The API counts twice what the local estimate says: before any request was counted, the
    # reply asked for must still fit beside the context.
    cli.fake_api.token_factor = 2.0
    cli.script.add(text_reply("hi"), text_reply("again"))
    run = cli.run("--context-window", "16000", stdin="hello\nmore\n")
    assert run.code == 0, run.err
    for bill in cli.fake_api.bills:
        assert bill.uncached_input + bill.body["max_tokens"] <= 16_000, (
            bill.uncached_input,
            bill.body["max_tokens"],
        )
