"""``agentloop sessions delete|prune`` (``_cli/sessions_commands``), run in-process against a
temporary store: delete counts every later session, forks included; prune says how many would
go, keeps to this workspace unless told otherwise, asks with the count on a terminal; durations
take seconds and say their units."""

from __future__ import annotations

import io
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.sessions_cli import chain, default_store, here, sessions

from agentloop._cli.sessions_commands import parse_duration
from sessions import open_store

__all__ = ["here"]  # the fixture, used here

# -- delete counts every later session ---------------------------------------------------------


def test_delete_counts_all_descendants_forks_included(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentloop._adapters.records import fork_session

    with open_store() as store:
        ids = chain(store, here, 3)  # root → child → grandchild
        fork = fork_session(store, ids[1])  # and a fork of the child
    done = sessions(capsys, "delete", ids[0], "--yes")
    assert done.code == 2
    assert done.err == (
        f"agentloop: error: session {ids[0][:8]} continues in 3 later sessions; "
        "--lineage deletes the whole conversation (4 sessions)\n"
    )
    middle = sessions(capsys, "delete", ids[1], "--yes")
    assert "continues in 2 later sessions" in middle.err
    assert sessions(capsys, "delete", fork, "--yes").out == "Deleted 1 session.\n"


# -- prune: how many, in the scope of list, durations with their units ------------------------


def test_prune_says_how_many_would_go_and_defaults_to_this_workspace(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = here.parent / "elsewhere"
    elsewhere.mkdir()
    old = datetime.now(UTC) - timedelta(days=45)
    with open_store(default_store(), clock=lambda: old) as store:
        mine = chain(store, here, 3, "mine")
        theirs = chain(store, elsewhere, 2, "theirs")
    with open_store() as store:
        recent = chain(store, here, 1, "recent")

    # Without --yes and without a terminal: the count, then nothing deleted.
    asked = sessions(capsys, "prune", "--older-than", "30d")
    assert asked.code == 2
    assert asked.err == (
        "agentloop: error: not deleting 1 conversation (3 sessions) without confirmation: "
        "add --yes (no terminal to ask)\n"
    )
    nothing = sessions(capsys, "prune", "--older-than", "60d", "--yes")
    assert nothing.out == f"No conversation in {here} is older than 60 days; nothing deleted.\n"

    pruned = sessions(capsys, "prune", "--older-than", "30d", "--yes")
    assert pruned.code == 0, pruned.err
    assert pruned.out == "Deleted 3 sessions.\n"
    with open_store() as store:
        left = {s.id for s in store.list_sessions(limit=None)}
    assert left == set(theirs) | set(recent)  # only this workspace's old conversation went
    assert not left & set(mine)

    everywhere = sessions(capsys, "prune", "--older-than", "4w", "--all", "--yes")
    assert everywhere.out == "Deleted 2 sessions.\n"
    with open_store() as store:
        assert [s.id for s in store.list_sessions(limit=None)] == recent


def test_prune_asks_with_the_count_on_a_terminal(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = datetime.now(UTC) - timedelta(hours=3)
    with open_store(default_store(), clock=lambda: old) as store:
        chain(store, here, 2)
        chain(store, here, 1)

    class Keyboard(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Keyboard("n\n"))
    done = sessions(capsys, "prune", "--older-than", "90m")
    assert done.err == (
        f"Delete 2 conversations (3 sessions) in {here} not active in the last 90 minutes? [y/N] "
    )
    assert done.out == "Nothing deleted.\n"


@pytest.mark.parametrize(
    ("text", "delta", "said"),
    [
        ("45s", timedelta(seconds=45), "45 seconds"),
        ("1s", timedelta(seconds=1), "1 second"),
        ("90m", timedelta(minutes=90), "90 minutes"),
        ("120 seconds", timedelta(minutes=2), "2 minutes"),
        ("12h", timedelta(hours=12), "12 hours"),
        ("30d", timedelta(days=30), "30 days"),
        ("3 days", timedelta(days=3), "3 days"),
        ("2w", timedelta(weeks=2), "2 weeks"),
    ],
)
def test_durations_take_seconds_and_say_their_units(text: str, delta: timedelta, said: str) -> None:
    from agentloop._cli.sessions_commands import age_text

    assert parse_duration(text) == delta
    assert age_text(delta) == said


def test_a_bad_duration_names_the_units(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = sessions(capsys, "prune", "--older-than", "5y")
    assert done.code == 2
    assert "s (seconds), m (minutes), h (hours), d (days), w (weeks)" in done.err
    helped = sessions(capsys, "prune", "--help")
    assert "s (seconds)" in helped.out and "--all" in helped.out
