"""A big paste through the real CLI against the test server, at a 16,000-token window: one that
lands between the early mark and the trigger is prepared for (the summary requested in the
background with the room the window leaves, so the compaction at the trigger needs no model
call), and one that crosses the trigger is kept verbatim as the latest request, which the
compaction notice says when it is most of what is left."""

from __future__ import annotations

import re

import pytest
from fake_api import text_reply
from support.cli import CLI
from support.loop_scripts import filler, is_summary_request

WINDOW = 16_000
TRIGGER = int(WINDOW * 0.85)  # the default threshold
HAIKU = "claude-haiku-4-5"
"""A model the test server does not compact on demand: the summaries are agentloop's."""


def _run(cli: CLI, model: str, before: int, paste: str, after: int) -> str:
    lines = [filler(f"request {n}", 250) for n in range(before)]
    lines += [paste, *(filler(f"after {n}", 150) for n in range(after))]
    for n in range(before + after + 1):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    run = cli.run("-m", model, "--context-window", str(WINDOW), stdin="\n".join(lines))
    assert run.code == 0, run.err
    assert len(run.notices) == 1, run.err
    return run.err


def _last_text(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    content = messages[-1]["content"]
    return str(content if isinstance(content, str) else content[0].get("text", ""))


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", HAIKU])
def test_a_paste_that_lands_just_below_the_trigger_is_summarized_ahead(
    cli: CLI, model: str
) -> None:
    # Six turns (~35 %), then a paste of 40 % of the window: ~12,700 tokens, past the early
    # mark and below the trigger, with less room left beside it than a summary's full
    # max_tokens (4,000). The summary is requested in the background with the room there is.
    paste = filler("PASTE", int(WINDOW * 0.4))
    err = _run(cli, model, 6, paste, 3)

    def summarizing(body: dict[str, object]) -> bool:
        return body.get("compaction") is not None or is_summary_request(body)

    background = [bill.body for bill in cli.fake_api.bills if summarizing(bill.body)]
    assert len(background) == 1, "one summary request, sent ahead; none at the trigger"
    (prepared,) = background
    # Sent with the paste's turn (it covers the paste, not the answer to it), with the room the
    # window leaves beside it rather than the full ask (4,000).
    assert "PASTE" in str(prepared["messages"]) and "answer 6" not in str(prepared["messages"])
    assert prepared["max_tokens"] < 4_000
    (pasted,) = [
        bill
        for bill in cli.fake_api.bills
        if not summarizing(bill.body) and _last_text(bill.body).startswith("PASTE")
    ]
    assert TRIGGER * 0.65 <= pasted.uncached_input < TRIGGER  # below the trigger, past the mark
    assert "prepared in the background" in err
    (notice,) = re.findall(r"\(~?([\d,]+) → ~?([\d,]+) tokens\)", err)
    assert int(notice[1].replace(",", "")) < TRIGGER // 2


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", HAIKU])
def test_a_paste_over_the_trigger_is_kept_verbatim_and_the_notice_says_why(
    cli: CLI, model: str
) -> None:
    # Twelve turns (just below the early mark: nothing prepared), then a paste of 40 % of the
    # window: the compaction runs before the paste is sent, and keeps it whole.
    paste = filler("PASTE", int(WINDOW * 0.4))
    err = _run(cli, model, 12, paste, 0)
    child = cli.script.conversation[-1]
    assert paste in str(child["messages"])  # verbatim
    (notice,) = re.findall(r"\(~?([\d,]+) → ~?([\d,]+) tokens\)", err)
    after = int(notice[1].replace(",", ""))
    assert TRIGGER // 2 < after < TRIGGER  # well above the aim: the paste is most of it
    said = re.search(
        r"note: your latest request \(~([\d,]+) tokens\) is kept verbatim, as the latest\s+"
        r"request always is: it is most of what is left",
        err,
    )
    assert said is not None, err
    assert after // 2 <= int(said[1].replace(",", "")) <= after


def test_a_small_latest_request_gets_no_such_note(cli: CLI) -> None:
    err = _run(cli, HAIKU, 22, filler("short", 40), 0)
    assert "kept verbatim" not in err
