"""``/compact --review [instructions]`` through the real CLI and SDK against the test
server: the summary the child gets is shown first, with the ledger; then apply (no second
summary request), ask again with other instructions, or abort (nothing written). On a 5.x model
the API writes (and signs) the summary; on one without on-demand compaction agentloop does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from fake_api import text_reply, tool_reply
from support.cli import CLI, Run, conversation_lines
from support.loop_scripts import SUMMARY, compaction_requests, filler, is_summary_request

from agentloop._cli.compact_review import ABORTED, AGAIN, QUESTION, SIGNED
from agentloop._cli.repl import COMPACT_USAGE
from agentloop._core.compaction.api_compaction import CARRIED_OPEN
from sessions import Session

CLIENT = ("-m", "claude-haiku-4-5")
"""A model without on-demand compaction: agentloop writes the summary (the script's)."""
WIDE = ("--context-window", "100000")
REVIEW_HEAD = "Compaction review (nothing is written until you apply)"


def _converse(cli: CLI, *args: str, turns: int = 4, words: int = 200) -> None:
    lines = conversation_lines(turns, words)
    for n in range(turns):
        cli.script.add(text_reply(filler(f"answer {n}", words)))
    run = cli.run(*args, stdin="\n".join(lines))
    assert run.code == 0, run.err


def _sessions(cli: CLI) -> list[Session]:
    with cli.store() as store:
        return store.list_sessions(limit=None)


def _summary_requests(cli: CLI) -> list[Mapping[str, Any]]:
    """Every summary request the server saw: agentloop's own and the API's on-demand ones."""
    return [*cli.script.summaries, *compaction_requests(cli.fake_api.message_requests)]


def _shown_summary(run: Run, index: int = -1) -> list[str]:
    """The summary lines of the ``index``-th review (indented under their heading)."""
    reviews = run.err.split(REVIEW_HEAD)[1:]
    body = reviews[index].split("Ledger carried into the compacted context:")[0]
    return [line.strip() for line in body.splitlines()[2:] if line.strip()]


def _child_summary(cli: CLI) -> tuple[Session, str]:
    (child,) = [s for s in _sessions(cli) if s.parent_id is not None]
    with cli.store() as store:
        (entry,) = store.compaction_history(child.id)
        first = store.get_messages(child.id)[0]
    assert entry.child_id == child.id and entry.summary is not None
    blocks = [b for b in first.content if b.get("type") == "compaction"]
    if blocks:  # the API's block, byte for byte what it wrote
        assert blocks[0]["content"] == entry.summary
    return child, entry.summary


# -- agentloop's own summary (a model without on-demand compaction) --------------------------


def test_review_then_apply_makes_one_summary_request_and_the_child_has_the_summary_shown(
    cli: CLI,
) -> None:
    _converse(cli, *CLIENT, *WIDE)
    (parent,) = _sessions(cli)

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review keep the hello\na\n")

    assert run.code == 0, run.err
    assert REVIEW_HEAD in run.err
    assert (
        "Summary by agentloop, written now with 1 request, following 'keep the hello':" in run.err
    )
    assert _shown_summary(run) == [line for line in SUMMARY.splitlines() if line.strip()]
    assert "Ledger carried into the compacted context:" in run.err
    assert f"{QUESTION}a" in run.err
    assert SIGNED not in run.err  # ours: no signature
    # One summary request, with the instructions; applying made none more.
    (request,) = _summary_requests(cli)
    assert "keep the hello" in str(request["messages"])
    assert len(run.notices) == 1
    child, stored = _child_summary(cli)
    assert child.parent_id == parent.id and run.notices[0]["child"] == child.id[:8]
    assert stored.strip() == SUMMARY.strip()  # the summary shown is the child's


def test_asking_again_sends_the_new_instructions_and_the_new_summary_is_applied(
    cli: CLI,
) -> None:
    _converse(cli, *CLIENT, *WIDE)
    written = iter(["## Goal\nthe first summary", "## Goal\nthe second summary, shorter"])

    def summaries(body: dict[str, Any]) -> Any:
        if is_summary_request(body):
            cli.script.summary = next(written)
        return cli.script(body)

    cli.fake_api.handler = summaries

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review\nr\nmake it shorter\na\n")

    assert run.code == 0, run.err
    assert _shown_summary(run, 0) == ["## Goal", "the first summary"]
    assert _shown_summary(run, 1) == ["## Goal", "the second summary, shorter"]
    first, second = cli.script.summaries
    assert "make it shorter" not in str(first["messages"])
    assert "make it shorter" in str(second["messages"])
    assert len(run.notices) == 1
    _, stored = _child_summary(cli)
    assert stored.strip() == "## Goal\nthe second summary, shorter"


def test_review_then_abort_writes_nothing(cli: CLI) -> None:
    _converse(cli, *CLIENT, *WIDE)
    before = [(s.id, s.message_count, s.status) for s in _sessions(cli)]

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review\nq\nhi again\n")

    assert run.code == 0, run.err
    assert REVIEW_HEAD in run.err and ABORTED in run.err
    assert not run.notices and len(cli.script.summaries) == 1  # shown, never applied
    after = _sessions(cli)
    assert [s.parent_id for s in after] == [None]  # no child
    (session,) = after
    assert session.id == before[0][0] and session.status == before[0][2]
    # The conversation went on in the same session, from the same history.
    assert session.message_count == before[0][1] + 2
    assert "hi again" in str(cli.script.conversation[-1]["messages"][-1])


def test_an_aborted_review_counts_its_request_as_discarded(cli: CLI) -> None:
    _converse(cli, *CLIENT, *WIDE)

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review\nq\n/context\n")

    assert run.code == 0, run.err
    # Not one of the background's: counted apart, so that the counts add up.
    assert (
        "this run: 0 requested, 0 applied, 0 discarded, 1 written for a review and not applied"
    ) in run.err
    assert "last: the reviewed compaction was not applied" in run.err


def test_an_aborted_signed_review_carries_nothing_into_the_next_message(cli: CLI) -> None:
    # Between turns, the API's child ends with a reply: what it carries would wait for the
    # next message. Aborted, nothing waits: the next request is the history as it was.
    _converse(cli, *WIDE)
    (before,) = _sessions(cli)

    run = cli.run(*WIDE, "-c", stdin="/compact --review\nq\nhi again\n")

    assert run.code == 0, run.err
    assert SIGNED in run.err and ABORTED in run.err and not run.notices
    last = cli.script.conversation[-1]
    assert CARRIED_OPEN not in str(last["messages"]) and "hi again" in str(last["messages"])
    assert not any(
        block.get("type") == "compaction"
        for message in last["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    )
    (after,) = _sessions(cli)
    assert after.id == before.id and after.message_count == before.message_count + 2


def test_nothing_to_review_says_why(cli: CLI) -> None:
    run = cli.run(*CLIENT, *WIDE, stdin="/compact --review\n")

    assert run.code == 0, run.err
    assert "Nothing compacted: no messages yet: nothing to compact" in run.err
    assert REVIEW_HEAD not in run.err and _sessions(cli) == []


def test_end_of_input_at_the_question_aborts(cli: CLI) -> None:
    _converse(cli, *CLIENT, *WIDE)
    before = [(s.id, s.message_count) for s in _sessions(cli)]

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review\n")

    assert run.code == 0, run.err
    assert ABORTED in run.err and not run.notices
    assert [(s.id, s.message_count) for s in _sessions(cli)] == before


def test_a_prepared_summary_is_reviewed_and_applied_without_any_request(cli: CLI) -> None:
    # Past the early mark of a small window: the summary is prepared in the background while
    # the last turn runs; the review shows it and applying it asks for nothing more.
    args = (*CLIENT, "--context-window", "16000", "--compaction-threshold", "0.6")
    lines = conversation_lines(9, 250)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))

    stdin = [*lines, "/compact --review", "q", "/compact --review", "a"]
    run = cli.run(*args, stdin="\n".join(stdin))

    assert run.code == 0, run.err
    assert not run.notices[:-1], run.err  # no compaction before the review
    # Shown, aborted (it stays ready), shown again and applied.
    shown = "Summary by agentloop, prepared in the background, no request now:"
    assert run.err.count(shown) == 2 and ABORTED in run.err
    assert len(cli.script.summaries) == 1  # the background one, and none at the reviews
    assert len(run.notices) == 1
    _, stored = _child_summary(cli)
    assert stored.strip() == SUMMARY.strip()
    assert _shown_summary(run) == [line for line in SUMMARY.splitlines() if line.strip()]


# -- the API's summary (on-demand compaction, a 5.x model) ------------------------------------


def test_a_signed_summary_is_shown_asked_for_again_with_instructions_and_applied(
    cli: CLI,
) -> None:
    _converse(cli, *WIDE)
    (parent,) = _sessions(cli)

    run = cli.run(*WIDE, "-c", stdin="/compact --review\nr\nkeep the request numbers\na\n")

    assert run.code == 0, run.err
    assert run.err.count(REVIEW_HEAD) == 2
    assert run.err.count(SIGNED) == 2  # shown, never offered for editing
    assert f"{QUESTION}r" in run.err and f"{AGAIN}keep the request numbers" in run.err
    assert "Summary by the API, written now with 1 request:" in run.err
    assert "Summary by the API, written now with 1 request, following 'keep the request" in run.err
    first, second = compaction_requests(cli.fake_api.message_requests)
    assert "keep the request numbers" not in first["compaction"]["instructions"]
    assert "keep the request numbers" in second["compaction"]["instructions"]
    assert cli.script.summaries == []
    # The second summary (the one asked for with the instructions) is the child's, as shown.
    assert len(run.notices) == 1
    child, stored = _child_summary(cli)
    assert child.parent_id == parent.id
    shown = _shown_summary(run)
    assert [line.strip() for line in stored.splitlines() if line.strip()] == shown


def test_a_signed_summary_prepared_in_the_background_is_applied_without_any_request(
    cli: CLI,
) -> None:
    args = ("--context-window", "16000", "--compaction-threshold", "0.6")
    lines = conversation_lines(9, 250)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))

    run = cli.run(*args, stdin="\n".join([*lines, "/compact --review", "a"]))

    assert run.code == 0, run.err
    assert "Summary by the API, prepared in the background, no request now:" in run.err
    assert SIGNED in run.err
    # One compaction request, the one sent in the background; none at the review or after.
    assert len(compaction_requests(cli.fake_api.message_requests)) == 1
    assert len(run.notices) == 1
    _, stored = _child_summary(cli)
    assert [line.strip() for line in stored.splitlines() if line.strip()] == _shown_summary(run)


def test_review_and_dry_run_together_are_refused_in_one_line(cli: CLI) -> None:
    _converse(cli, *CLIENT, *WIDE)
    before = [(s.id, s.message_count) for s in _sessions(cli)]

    run = cli.run(*CLIENT, *WIDE, "-c", stdin="/compact --review --dry-run keep it\n")

    assert run.code == 0, run.err
    assert f"--dry-run and --review do not go together (usage: {COMPACT_USAGE})" in run.err
    assert REVIEW_HEAD not in run.err and cli.script.summaries == []
    assert [(s.id, s.message_count) for s in _sessions(cli)] == before


def test_the_ledger_shown_is_the_one_the_child_carries(cli: CLI) -> None:
    """What the review shows as carried is what the compacted context holds, line for line
    (not a ledger derived apart from the compaction, which would list what the kept turns
    hold verbatim)."""
    _converse(cli, *WIDE)
    run = cli.run(*WIDE, "-c", stdin="/compact --review\na\nand now?\n")
    assert run.code == 0, run.err
    shown = run.err.split("Ledger carried into the compacted context:")[1]
    shown_lines = [line.strip() for line in shown.split("</ledger>")[0].splitlines()]
    shown_lines = [line for line in shown_lines if line and line != "<ledger>"]
    (child,) = [s for s in _sessions(cli) if s.parent_id is not None]
    with cli.store() as store:
        texts = [str(b.get("text", "")) for m in store.get_messages(child.id) for b in m.content]
    (carried,) = [text for text in texts if "<ledger>" in text]  # after the next message
    ledger = carried.split("<ledger>")[1].split("</ledger>")[0]
    assert [line.strip() for line in ledger.splitlines() if line.strip()] == shown_lines
    assert "request 0" in ledger


def _reviewed_ledgers(err: str) -> list[list[str]]:
    """The ledger of each review, line by line."""
    ledgers = []
    for review in err.split(REVIEW_HEAD)[1:]:
        body = review.split("Ledger carried into the compacted context:")[1].split(QUESTION)[0]
        ledgers.append([line.strip() for line in body.splitlines() if line.strip()])
    return ledgers


@pytest.mark.parametrize(
    ("model", "window", "turns", "prepare"),
    [
        ("claude-sonnet-5-5", 16_000, 11, "on"),  # after a compaction, a summary in flight
        ("claude-sonnet-5-5", 32_000, 16, "on"),  # the API's summary prepared in the background
        ("claude-sonnet-5-5", 32_000, 16, "off"),  # none prepared: each review asks the API
        ("claude-haiku-4-5", 16_000, 8, "on"),  # agentloop's summary prepared in the background
    ],
)
def test_asking_again_with_other_instructions_shows_the_same_ledger(
    cli: CLI, model: str, window: int, turns: int, prepare: str
) -> None:
    """Many files read (a ledger cut by its budget at this window); a review, then ``r`` with
    instructions: the ledger is a function of the conversation, not of the instructions, so
    the second review shows the first one's, line for line, and the child carries it. (The
    first draft's token counts once re-sized the second's: an entry came and went.)"""
    cli.monkeypatch.setenv("AGENTLOOP_PREPARE_SUMMARIES", prepare)
    src = cli.workspace / "src"
    src.mkdir()
    name = "src/module_with_a_rather_long_name_number_{:02d}.py"
    for n in range(5 * turns):
        (cli.workspace / name.format(n)).write_text(f"x = {n}\n" * 20)
    for turn in range(turns):
        reads = [("read_file", {"path": name.format(5 * turn + k)}) for k in range(5)]
        cli.script.add(tool_reply(*reads), text_reply(filler(f"answer {turn}", 120)))
    lines = [filler(f"request {turn} about topic {turn}", 100) for turn in range(turns)]
    review = ["/compact --review", "r", "keep the decisions about the modules", "a", "go on"]
    run = cli.run("-m", model, "--context-window", str(window), stdin="\n".join(lines + review))
    assert run.code == 0, run.err
    first, again = _reviewed_ledgers(run.err)
    assert any("left out: search_history" in line for line in first)  # cut by its budget
    assert again == first
    child = max(_sessions(cli), key=lambda s: s.created_at)
    with cli.store() as store:
        texts = [str(b.get("text", "")) for m in store.get_messages(child.id) for b in m.content]
    # What the child carries (placed with the message after it).
    assert any(first[1] in text and first[-2] in text for text in texts)
