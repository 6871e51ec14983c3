"""The circuit breaker through the real CLI against the fake Messages API: a compaction that
cannot help is not retried on every turn (each attempt that saved too little is followed by a
pause that never reaches into the reply reserve), and a compaction the user asked for never
pauses the automatic one."""

from __future__ import annotations

import re
from typing import Any

from fake_api import ReplySpec, text_reply
from support.cli import CLI, conversation_lines
from support.compacted_runs import OLDER
from support.loop_scripts import SUMMARY, filler

from agentloop._core.measuring.context import reply_reserve, trigger_tokens

WINDOW = 16_000
"""A 16k window, as a new user tried it."""


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


def test_a_manual_compact_that_saves_little_never_pauses_automatic_compaction(cli: CLI) -> None:
    script = cli.script
    script.summary = filler("summary", 1_400)  # the summary is nearly what it replaces

    def summaries_then_short(body: dict[str, Any]) -> ReplySpec:
        if len(script.conversation) > 4:  # after /compact's: summaries that help
            script.summary = SUMMARY
        return script(body)

    cli.fake_api.handler = summaries_then_short
    first, more = conversation_lines(4, 250), conversation_lines(26, 250)
    for n in range(len(first) + len(more)):
        script.add(text_reply(filler(f"answer {n}", 250)))

    stdin = "\n".join([*first, "/compact", *more, "/context"])
    run = cli.run(*OLDER, "--context-window", str(WINDOW), stdin=stdin)

    assert run.code == 0, run.err
    # /compact ran at 27 % and kept (or saved next to) nothing: no pause, no warning of one.
    first_line = re.search(r"(?:skipped: .*?\(|compacted: .*?\()~?([\d,]+) → ~?([\d,]+)", run.err)
    assert first_line is not None
    before, after = (int(first_line[n].replace(",", "")) for n in (1, 2))
    assert before < 0.3 * WINDOW and after > 0.8 * before, run.err
    assert "pauses" not in run.err and "circuit breaker" not in run.err
    # The next automatic compaction came at the trigger (85 %), not at 95 % as a pause would
    # have it: one exchange past 13,600 at most, while a reply may still take 2,400.
    automatic = [int(n["before"].strip("~").replace(",", "")) for n in run.notices]
    trigger = trigger_tokens(WINDOW, 0.85, 8_192)[0]
    assert trigger == WINDOW - reply_reserve(WINDOW, 8_192)
    assert next(before for before in automatic if before > 0.5 * WINDOW) < trigger + 1_000
