"""The context window a run uses, through the real CLI against the fake Messages API: a small
window compacts under it and every reply fits, a window too small is refused in one line (and
the least one it names works), and the window given at the start is kept for ``-c``/``-r``."""

from __future__ import annotations

import re

import pytest
from fake_api import text_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler

from agentloop._core.measuring.context import MIN_REPLY_TOKENS, reply_reserve
from agentloop._core.values.validation import DEFAULT_THRESHOLD


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
    # A model that says its output limit gets it within the room the window leaves (the stop
    # reason of a reply cut at max_tokens never comes): never less than the reserve, and the
    # reply always fits.
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
