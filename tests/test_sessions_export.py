"""Issue 30's sessions commands against the fake Messages API: ``sessions tree`` at 80 columns
(5), ``sessions export`` of the whole conversation (6), ``sessions search`` showing the match
(7)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from fake_api import text_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import filler

from agentloop._cli import list_commands
from agentloop._cli.cells import cells
from agentloop._cli.search_command import search_command
from sessions import CompactionStrategy, NewMessage, open_store

ANSI = re.compile(r"\x1b\[[0-9;]*m")

COLUMNS = 80
OLDER = ("-m", "claude-haiku-4-5")
"""A model the test server does not compact on demand (the compaction is ours, as `tree` shows
it)."""


class Screen(io.StringIO):
    """An output stream that says it is a terminal (its width comes from ``COLUMNS``)."""

    def isatty(self) -> bool:
        return True


def _undone(cli: CLI) -> tuple[str, str, str]:
    """A conversation compacted by /compact, then the compaction undone and the branch
    continued: (the parent, the abandoned child, the branch)."""
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact"])
    run = cli.run(*OLDER, "--context-window", WINDOW, stdin=stdin)
    assert run.code == 0, run.err
    (notice,) = run.notices
    with cli.store() as store:
        child = store.get_session(notice["child"]).id
        parent = store.get_session(child).parent_id
    assert parent is not None
    cli.script.add(text_reply("on the branch"))
    run = cli.run(*OLDER, "-c", stdin="/undo-compaction\nkeep going\n")
    assert run.code == 0, run.err
    found = re.search(r"in new session (\w{8})", run.err)
    assert found is not None, run.err
    with cli.store() as store:
        branch = store.get_session(found[1]).id
    return parent, child, branch


def test_the_tree_fits_80_columns_aligned_with_figures_whole_and_the_undo_labelled(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, child, branch = _undone(cli)
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    out = Screen()
    with cli.store() as store:
        list_commands.tree_command(store, out, parent)
        entry = next(e for e in store.compaction_history(child) if e.child_id == child)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= COLUMNS for line in lines), lines
    rows = {line.strip("│├└─ ")[:8]: line for line in lines if re.match(r"^[│├└─ ]*\w{8}  ", line)}
    assert set(rows) == {parent[:8], child[:8], branch[:8]}
    # Columns aligned: every status starts at the same cell, every size ends at the same one.
    starts = {_at(r"\w{8} +(\w)", line, start=True) for line in rows.values()}
    ends = {_at(r"\d+ msgs?", line) for line in rows.values()}
    assert len(starts) == 1 and len(ends) == 1, lines
    # One session is active: the branch the undo made; the child it left is abandoned.
    assert "active" in rows[branch[:8]] and "abandoned" in rows[child[:8]]
    assert sum(" active " in line for line in lines) == 1
    text = "\n".join(lines)
    assert f"← /undo-compaction of {child[:8]} (from {parent[:8]})" in text
    figures = rf"\(~?{entry.tokens_before:,} → ~?{entry.tokens_after:,} tokens\)"
    assert re.search(rf"← compacted \d+ → \d+ msgs {figures} by {entry.strategy}\n", text + "\n")


def _at(pattern: str, line: str, *, start: bool = False) -> int:
    found = re.search(pattern, line)
    assert found is not None, line
    return found.start(1) if start else found.end()


# -- 6. export ---------------------------------------------------------------------------------


def test_export_writes_every_session_of_the_conversation_once_in_order(cli: CLI) -> None:
    parent, _, branch = _undone(cli)

    markdown = cli.run("sessions", "export", parent[:8])
    as_json = cli.run("sessions", "export", parent[:8], "--json")
    as_format = cli.run("sessions", "export", parent[:8], "--format", "json")

    assert markdown.code == as_json.code == as_format.code == 0, markdown.err + as_json.err
    # From the first session to where resuming continues (the branch the undo made).
    sessions = [s["id"] for s in json.loads(as_json.out)["sessions"]]
    assert sessions == [parent, branch] and json.loads(as_format.out) == json.loads(as_json.out)
    text = markdown.out
    for n in range(4):  # every request said, once, in order
        assert text.count(f"\n\nrequest {n}: alpha") == 1, n  # a message, not the title
    assert (
        text.index("request 0: alpha") < text.index("request 3: alpha") < text.index("keep going")
    )
    assert f"A branch of `{parent[:8]}`" in text
    said = json.loads(as_json.out)["messages"]
    assert said == sum(len(s["messages"]) for s in json.loads(as_json.out)["sessions"]) == 10


def test_export_of_a_compacted_conversation_shows_the_summary_once(cli: CLI) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact", "after the compaction"])
    assert cli.run(*OLDER, "--context-window", WINDOW, stdin=stdin).code == 0
    with cli.store() as store:
        (newest,) = store.list_sessions(limit=1)
        total = len(store.get_messages(newest.parent_id or "")) + 2

    run = cli.run("sessions", "export", newest.id[:8])

    assert run.code == 0, run.err
    assert run.out.count("### #") == total  # the parent's 8, then the 2 said after it
    assert "The conversation was compacted 8 →" in run.out
    assert "(the compacted context)" in run.out and "carried over as said above" in run.out
    assert run.out.count("after the compaction") == 1
    for n in range(4):  # the verbatim tail is not written twice
        assert run.out.count(f"\n\nrequest {n}: alpha") == 1, n


def test_every_sessions_subcommand_has_its_own_usage_line(cli: CLI) -> None:
    run = cli.run("sessions", "export", "--help")

    assert run.code == 0
    assert run.out.splitlines()[0].startswith("usage: agentloop sessions export [-h]")
    assert "{sessions,demo}" not in run.out and "--json" in run.out


# -- 7. search ---------------------------------------------------------------------------------


def test_search_shows_the_match_highlighted_and_the_users_own_words_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    title = "Please refactor the tokenizer module and keep the public names stable for callers"
    said = " ".join(f"word{n}" for n in range(300)) + " the zanzibar key is rotated weekly"
    with open_store(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace="/w", title=title)
        store.append_messages(
            session.id,
            [
                NewMessage(role="user", content=[{"type": "text", "text": said}]),
                NewMessage(role="assistant", content=[{"type": "text", "text": "noted"}]),
            ],
        )
        summary = "## Goal\n- the user said the zanzibar key is rotated weekly"
        child = store.compact(session.id, CompactionStrategy.SUMMARIZE, summary).session_id
        assert child is not None
        out = Screen()
        search_command(store, out, "zanzibar", workspace="/w")
    lines = out.getvalue().splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    # The user's own message first, the summary quoting it after.
    assert [h[:8] for h in heads if h] == [session.id[:8], child[:8]]
    assert all(cells(ANSI.sub("", line)) <= COLUMNS for line in lines)
    # The match shows (not the message's start), highlighted; the title is cut at a word.
    first = lines[1:3]
    assert "\x1b[1mzanzibar\x1b[0m" in first[0] + first[1]
    assert "word0 " not in "".join(first)
    assert re.search(r'"Please refactor the tokenizer module and( \w+)*…$', heads[0]), heads[0]
