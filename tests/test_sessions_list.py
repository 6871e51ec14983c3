"""``agentloop sessions list`` and ``tree`` with ``--json`` (``_cli/list_commands``) print JSON
always: an empty array on a missing store, an empty one, or one with conversations elsewhere
only; for people, words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.sessions_cli import chain, here, location, sessions

from sessions import open_store

__all__ = ["here", "location"]  # the fixtures, used here


def test_list_and_tree_json_print_an_empty_array_on_a_missing_or_an_empty_store(
    here: Path, location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = [
        ["list", "--json"],
        ["list", "--all", "--json"],
        ["list", "--all-generations", "--json"],
        ["tree", "--json"],
    ]
    for args in commands:  # no store
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out), done.err) == (0, [], ""), args
    open_store(location).close()  # an empty store
    for args in commands:
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out), done.err) == (0, [], ""), args
    # A store with conversations elsewhere only: this workspace has none.
    with open_store(location) as store:
        chain(store, here.parent, 2)
    for args in (["list", "--json"], ["tree", "--json"]):
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out)) == (0, []), args
    # For people, words.
    assert sessions(capsys, "tree", "--store", location).out.startswith("No sessions in ")
