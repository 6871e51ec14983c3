"""Issue 19, "commands that do what they say", through the real CLI against the fake Messages
API: a preview never writes, an undone compaction keeps the answered turn and is not redone at
once, a fork is called a fork, the reply reserve follows one policy at every window size, a
compaction that cannot help is not retried on every turn, and ``--context-window`` is kept
for ``-c``/``-r``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fake_api import text_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import PREFIX_START, filler, first_text

from agentloop._core.measuring.context import (
    MIN_REPLY_TOKENS,
    decide,
    reply_reserve,
    trigger_tokens,
)
from agentloop._core.measuring.context import ContextUsage as Usage
from agentloop._core.values.validation import DEFAULT_THRESHOLD


def _store_dump(cli: CLI) -> list[tuple[str, int, str | None]]:
    with cli.store() as store:
        return [(s.id, s.message_count, s.parent_id) for s in store.list_sessions(limit=None)]


def _converse(cli: CLI, turns: int, words: int = 200, *args: str) -> None:
    lines = conversation_lines(turns, words)
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", words)))
    run = cli.run(*args, stdin="\n".join(lines))
    assert run.code == 0, run.err


def _request_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


# -- /compact --dry-run ------------------------------------------------------------------------


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


# -- /undo-compaction --------------------------------------------------------------------------


def test_undo_after_an_automatic_compaction_keeps_the_answered_turn(cli: CLI) -> None:
    cli.fake_api.context_window = 12_000  # the API refuses what does not fit
    lines = conversation_lines(14, 200)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    cli.script.add(text_reply("after the undo"))
    stdin = "\n".join([*lines, "/undo-compaction", "one more"])

    # A threshold under the reply reserve's edge, so that a pause fits above the trigger (at
    # 85 % none does, issue 30); a model the test server does not compact on demand.
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


# -- --fork-session ----------------------------------------------------------------------------


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


# -- the reply reserve -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "reserve", "trigger"),
    [
        (200_000, 8_192, 170_000),  # a real window: the reply's own limit, under its share
        (12_000, 1_800, 10_200),  # was 8,192 reserved and the trigger at 32 %
        (9_000, 1_350, 7_650),  # was a trigger of 808 tokens
        (5_000, 750, 4_250),  # was no reserve at all
    ],
)
def test_the_reply_reserve_scales_with_the_window(window: int, reserve: int, trigger: int) -> None:
    assert reply_reserve(window, 8_192) == reserve
    assert trigger_tokens(window, DEFAULT_THRESHOLD, 8_192)[0] == trigger


def test_the_reserve_still_moves_a_raised_threshold() -> None:
    trigger, why = trigger_tokens(10_000, 0.95, 4_000)
    assert trigger == 8_500  # 15 % of the window reserved, not 40 %
    assert "so a reply of up to 1,500 tokens still fits" in why


@pytest.mark.parametrize("window", ["12000", "9000", "5000"])
def test_a_small_window_compacts_under_it_and_replies_fit(cli: CLI, window: str) -> None:
    size = int(window)
    cli.fake_api.context_window = size
    lines = conversation_lines(14, 300)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))

    run = cli.run("--context-window", window, stdin="\n".join([*lines, "/context"]))

    assert run.code == 0, run.err
    assert run.notices and "Compaction skipped" not in run.err
    reserve = reply_reserve(size, 8_192)
    assert f"triggers at {int(size * DEFAULT_THRESHOLD):,} tokens (85%" in run.err
    assert f"replies up to {reserve:,} tokens" in run.err
    # A model that says its output limit gets it within the room the window leaves (issue 27's
    # stop reasons): never less than the reserve, and the reply always fits.
    for body in cli.script.conversation:
        assert body["max_tokens"] >= reserve
        assert cli.fake_api.count_input_tokens(body) + body["max_tokens"] <= size


def test_a_window_too_small_is_refused_in_one_line_and_the_least_one_works(cli: CLI) -> None:
    run = cli.run("--context-window", "3000", "-p", "hi")

    assert run.code == 2 and len(run.err.splitlines()) == 1
    found = re.search(r"give at least ([\d,]+)$", run.err.strip())
    assert found is not None, run.err
    assert f"a reply needs at least {MIN_REPLY_TOKENS:,}" in run.err
    least = int(found.group(1).replace(",", ""))
    assert cli.fake_api.message_requests == []
    assert cli.run("--context-window", str(least - 1), "-p", "hi").code == 2
    cli.script.add(text_reply("fits"))
    assert cli.run("--context-window", str(least), "-p", "hi").code == 0


# -- the circuit breaker -----------------------------------------------------------------------


def _attempts(err: str) -> list[int]:
    """The context size at each skipped compaction."""
    return [
        int(m.group(1).replace(",", ""))
        for m in re.finditer(r"Compaction skipped: .*?\(([\d,]+) → ", err)
    ]


def test_a_compaction_that_cannot_help_is_not_retried_every_turn(cli: CLI) -> None:
    cli.script.summary = filler("summary", 7_000)  # longer than what it replaces
    lines = conversation_lines(14, 250)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))

    # A threshold under the reply reserve's edge (85 % here), so that a pause fits above it; a
    # model the test server does not compact on demand, so the scripted summary is the one.
    run = cli.run(
        *("-m", "claude-haiku-4-5", "--compaction-threshold", "0.6", "--context-window", "9000"),
        stdin="\n".join([*lines, "/context"]),
    )

    assert run.code == 0, run.err
    limit = 9_000 - reply_reserve(9_000, 8_192)
    # Each attempt that did not help (skipped, or saved too little) is followed by a pause: the
    # next attempt waits a tenth of the window, but never into the reply reserve.
    events = re.findall(
        r"(?:skipped: .*?\(([\d,]+) → )|(?:pauses until ([\d,]+) tokens)|"
        r"(?:compacted: .*?\(~?([\d,]+) → )",
        run.err,
    )
    pauses = [int(p.replace(",", "")) for _, p, _ in events if p]
    assert pauses and all(p <= limit for p in pauses), run.err
    waited = None
    for skipped, pause, compacted in events:
        attempt = skipped or compacted
        if attempt and waited is not None:
            assert int(attempt.replace(",", "")) >= waited, run.err
            waited = None
        if skipped:
            waited = min(int(skipped.replace(",", "")) + 900, limit)
        if pause:
            waited = int(pause.replace(",", ""))


def test_the_status_line_says_why_it_does_not_compact_past_the_trigger() -> None:
    from agentloop._cli.ui import indicator

    usage = Usage(tokens=8_000, window=9_000, source="api", reported_tokens=8_000)
    decision = decide(
        usage,
        threshold=DEFAULT_THRESHOLD,
        max_output_tokens=8_192,
        message_count=10,
        safe_boundary=True,
        breaker_until=8_900,
    )
    assert not decision.compact and decision.held_until == 8_900
    line = indicator(decision, enabled=True)
    assert line == (
        "context 89% · compacts at 99% (raised from 85%: the last compaction saved too little)"
    )


# -- --context-window is kept ------------------------------------------------------------------


def test_the_context_window_given_at_the_start_is_kept_on_continue_and_resume(cli: CLI) -> None:
    cli.script.add(text_reply("first answer"))
    assert cli.run("--context-window", "12000", "-p", "first question").code == 0
    with cli.store() as store:
        sid = store.list_sessions(limit=1)[0].id

    continued = cli.run("-c", stdin="/context\n")
    resumed = cli.run("-r", sid[:8], stdin="/context\n")
    cli.script.add(text_reply("bigger now"))
    changed = cli.run("--context-window", "20000", "-c", "-p", "more room")
    after = cli.run("-c", stdin="/context\n")

    for run in (continued, resumed):
        assert run.code == 0, run.err
        assert "/ 12,000 tokens" in run.err
        assert "Window: 12,000 tokens (source: session)" in run.err
    assert changed.code == 0, changed.err
    assert "Window: 20,000 tokens (source: session)" in after.err


def test_a_preview_of_an_empty_conversation_writes_nothing_either(cli: CLI) -> None:
    run = cli.run("--context-window", WINDOW, stdin="/compact --dry-run keep the hello\n")

    assert run.code == 0, run.err
    assert "Traceback" not in run.err and "error" not in run.err, run.err
    assert _store_dump(cli) == [] and cli.fake_api.message_requests == []
