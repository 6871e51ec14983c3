"""Searching what a conversation said, end to end: the agent's ``search_history``
against the fake Messages API after compactions that left a detail out, and
``agentloop sessions search`` for people."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from fake_api import text_reply, tool_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import filler
from support.screen import Screen
from support.store_contract import user

from agentloop._cli.cells import cells
from agentloop._cli.search_command import search_command
from sessions import (
    CompactionStrategy,
    NewMessage,
    _migrations,
    _sql_messages,
    default_store_path,
    open_store,
)

DETAIL = "Remember this: the deploy key is called ORCHID-7."


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def converse_past_compactions(cli: CLI) -> None:
    """A first answer holding :data:`DETAIL`, enough turns after it for several compactions at a
    small window, then the question: the model searches its history and answers. The detail is
    the model's, not the user's: every summary (the API's quotes the user's requests) and the
    ledger (which carries them) leave a model's answer out."""
    lines = conversation_lines(13)
    for n in range(len(lines)):
        detail = f"{DETAIL} " if n == 0 else ""
        cli.script.add(text_reply(detail + filler(f"answer {n}", 300)))
    cli.script.add(
        tool_reply(("search_history", {"query": "deploy key"})),
        text_reply("The deploy key is called ORCHID-7."),
    )
    cli.fake_api.context_window = int(WINDOW)
    run = cli.run(
        "--context-window", WINDOW, stdin="\n".join([*lines, "What is the deploy key called?"])
    )
    assert run.code == 0, run.err
    assert len(run.notices) >= 2


def test_after_compactions_search_history_finds_what_the_summary_left_out(cli: CLI) -> None:
    converse_past_compactions(cli)

    asked, answered = cli.script.conversation[-2], cli.script.conversation[-1]
    # The compacted context the model had when asked no longer held the detail...
    assert "ORCHID" not in json.dumps(asked)
    assert "search_history" in {tool["name"] for tool in asked["tools"]}
    # ...and said that what the summary left out can be looked up: the API's summary opens
    # it, and the context carried after it (a system message) points to the search.
    assert asked["messages"][0]["content"][0]["type"] == "compaction"
    (carried,) = [m for m in asked["messages"] if m["role"] == "system"]
    assert "search_history tool" in json.dumps(carried)
    # ...and the tool's result brought it back, from the conversation's first session.
    (found,) = _tool_results(answered)
    assert not found.get("is_error")
    assert "ORCHID-7" in str(found["content"])
    with cli.store() as store:
        root = store.list_conversations()[0].root_id
        answer = store.get_messages(root)[1]  # its thinking first, then the text
        assert answer.role == "assistant"
        assert any(str(b.get("text", "")).startswith(DETAIL) for b in answer.content)
    assert f"earlier session {root[:8]}, message #2 (assistant)" in str(found["content"])

    # For people: where it was first said, and everything said of it since (the answer, the
    # search's call and result: all of it is stored, all of it searchable).
    run = cli.run("sessions", "search", "ORCHID")
    assert run.code == 0, run.err
    heads = [line for line in run.out.splitlines() if not line.startswith(" ")]
    assert any(line.startswith(f"{root[:8]}  #2  assistant  ") for line in heads), run.out
    assert "    Remember this: the deploy key is called ORCHID-7." in run.out
    assert any("  search_history result  " in line for line in heads)
    hits = json.loads(cli.run("sessions", "search", "ORCHID", "--json").out)
    said = [hit for hit in hits if hit["session_id"] == root]
    assert [hit["message"] for hit in said] == [2]
    assert said[0]["workspace"] == str(cli.workspace) and "ORCHID-7" in said[0]["excerpt"]
    assert {hit["root_id"] for hit in hits} == {root}


def test_sessions_search_scopes_like_sessions_list(cli: CLI, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with cli.store() as store:
        for workspace, text in ((cli.workspace, "ORCHID here"), (elsewhere, "ORCHID there")):
            session = store.create_session(model="m", workspace=str(workspace), title="t")
            store.append_messages(session.id, [user(text)])
    here = cli.run("sessions", "search", "orchid")
    assert "ORCHID here" in here.out and "ORCHID there" not in here.out
    there = cli.run("sessions", "search", "orchid", "--workspace", str(elsewhere))
    assert "ORCHID there" in there.out and "ORCHID here" not in there.out
    both = cli.run("sessions", "search", "orchid", "--all")
    assert "ORCHID here" in both.out and "ORCHID there" in both.out
    assert str(elsewhere) in both.out  # --all names each workspace

    nothing = cli.run("sessions", "search", "zebra")
    assert nothing.code == 0 and nothing.out.startswith("No messages match 'zebra' in ")
    assert cli.run("sessions", "search", "zebra", "--json").out == "[]\n"
    bad = cli.run("sessions", "search", "?!")
    assert bad.code == 2 and bad.out == ""
    assert bad.error_lines() == [bad.err.strip()]
    assert "nothing to search for" in bad.err


def test_sessions_search_without_a_store_creates_none(cli: CLI, tmp_path: Path) -> None:
    missing = tmp_path / "none" / "sessions.db"
    assert cli.run("sessions", "search", "x", "--store", str(missing)).out == "No sessions yet.\n"
    assert cli.run("sessions", "search", "x", "--store", str(missing), "--json").out == "[]\n"
    assert not missing.exists() and not missing.parent.exists()


def test_sessions_search_builds_the_index_of_an_older_store(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before_the_index:
        before_the_index.setattr(_migrations, "MIGRATIONS", _migrations.MIGRATIONS[:2])
        before_the_index.setattr(_sql_messages, "index_messages", lambda *args, **kwargs: None)
        with open_store() as old:
            session = old.create_session(model="m", workspace=str(cli.workspace))
            old.append_messages(session.id, [user("an old ORCHID")])
    assert "m003_search_index" not in applied_migrations()  # the agentloop of before wrote it
    run = cli.run("sessions", "search", "orchid")
    assert run.code == 0, run.err
    assert "an old ORCHID" in run.out
    assert "m003_search_index" in applied_migrations()


def applied_migrations() -> set[str]:
    with closing(sqlite3.connect(default_store_path())) as raw:
        return {row[0] for row in raw.execute("SELECT name FROM _migrations")}


ANSI = re.compile(r"\x1b\[[0-9;]*m")
COLUMNS = 80


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
