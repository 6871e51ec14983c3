"""Fault injection, a store born on a full disk: creating the SQLite store leaves a
complete, ``quick_check``-clean store or none, says so in one line, and a later run with room
works without the user moving anything. The same question for the other writes that are not
one of the store's ordinary transactions: a migration, an import, a copy (both backends where
it is about the store's data; PostgreSQL's full disk is in test_faults_disk_session.py).

The disk is real: a 256 KiB tmpfs (the test skips with the reason where it cannot be mounted),
filled with a file that leaves a chosen number of bytes; and each step of creation is also made
to fail alone (ENOSPC from the OS, SQLITE_FULL from SQLite), so every step is covered.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, text_reply
from support.loop_scripts import Script
from support.processes import AgentProcess, cli_env
from support.small_disk import SmallDisk, postgres_on_small_disk, small_disk
from support.store_contract import conversation, user

from sessions import StoreError, _migrations, _sql_messages, copy_store, open_store

FULL = "the disk is full"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """256 KiB: a new store (112 KiB) and its first writes barely fit."""
    with small_disk(tmp_path / "disk") as mounted:
        yield mounted


@pytest.fixture
def roomy_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """2 MiB: room for a store and some conversations, until it is filled."""
    with small_disk(tmp_path / "disk", size="2m") as mounted:
        yield mounted


def whole(path: Path) -> bool:
    """The store at ``path`` reads back complete: quick_check, every migration, its index."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        applied = {row[0] for row in db.execute("SELECT name FROM _migrations")}
        assert applied == {name for name, _ in _migrations.MIGRATIONS}
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(_migrations.MIGRATIONS)
    return True


def one_line_full(error: BaseException) -> None:
    text = str(error)
    assert "\n" not in text and FULL in text, text


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def open_and_write(path: Path) -> None:
    with open_store(path) as store:
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, conversation(2))


# -- creation on a real full disk ---------------------------------------------------------------


def test_a_store_created_on_a_full_disk_is_whole_or_absent_and_made_once_there_is_room(
    disk: SmallDisk,
) -> None:
    home = disk.root / "home"
    outcomes: list[str] = []
    for leave in range(0, 256 * 1024, 8 * 1024):  # each amount of room a creation may meet
        disk.clear()
        disk.fill(leave)
        path = home / "sessions.db"
        try:
            open_and_write(path)
            outcomes.append("written")
        except StoreError as error:
            one_line_full(error)
            if "cannot create session store" in str(error):
                assert leftovers(home) == [], leave  # nothing at all: no store, no temporary
                outcomes.append("none")
            else:
                assert whole(path)  # made whole; the first write did not fit
                outcomes.append("made")
        if path.exists():
            assert whole(path)
        disk.free()
        open_and_write(path)  # with room: works, nothing moved by hand
        assert whole(path)
    assert "none" in outcomes and "written" in outcomes  # both sides of the edge were met


def test_the_command_on_a_full_disk_says_so_in_one_line_pays_nothing_and_runs_with_room(
    roomy_disk: SmallDisk, tmp_path: Path
) -> None:
    disk = roomy_disk
    script = Script()
    script.add(text_reply("the answer"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    with FakeAnthropicServer(handler=script) as server:
        env = cli_env(disk.root / "home", server.base_url)
        (disk.root / "home").mkdir(mode=0o700)
        disk.fill(16 * 1024)
        first = AgentProcess(["-p", "a question"], cwd=workspace, env=env, forked=True)
        assert first.finish() != 0, first.text_err
        assert "Traceback" not in first.text_err, first.text_err
        (error,) = first.error_lines()
        assert FULL in error and "cannot create session store" in error
        assert server.message_requests == []  # nothing paid for
        assert leftovers(disk.root / "home") == []

        disk.free()
        second = AgentProcess(["-p", "a question"], cwd=workspace, env=env, forked=True)
        assert second.finish() == 0, second.text_err
        assert second.printed_lines() == ["the answer"]
    assert whole(disk.root / "home" / "sessions.db")


# -- each step of creation failing alone --------------------------------------------------------


class Steps:
    """Counts the writes creation makes (OS calls on the new file, SQLite statements on its
    connection) and fails the ``fail_at``-th with a full disk."""

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at
        self.count = 0

    def step(self, what: str) -> None:
        self.count += 1
        if self.count == self.fail_at:
            if what == "sql":
                error = sqlite3.OperationalError("database or disk is full")
                error.sqlite_errorcode = 13  # SQLITE_FULL, as SQLite sets it
                raise error
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def faulty(monkeypatch: pytest.MonkeyPatch, steps: Steps, directory: Path) -> None:
    def ours(target: Any) -> bool:
        return str(target).startswith(str(directory))

    real_connect = sqlite3.connect

    class Connection(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            steps.step("sql")
            return super().execute(sql, *args)

        def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
            steps.step("sql")
            return super().executemany(sql, *args)

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if ".tmp" in str(database) and "mode=ro" not in str(database):  # the store being built
            kwargs["factory"] = Connection
        connection: sqlite3.Connection = real_connect(database, *args, **kwargs)
        return connection

    def wrap(name: str) -> None:
        real: Callable[..., Any] = getattr(os, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if args and ours(args[0]) and (name != "open" or args[1] & os.O_CREAT):
                steps.step(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, call)

    monkeypatch.setattr(sqlite3, "connect", connect)
    for name in ("open", "chmod", "fsync", "link", "replace"):
        wrap(name)
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:  # a descriptor has no path: every fsync is a step
        steps.step("fsync")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)


def test_each_step_of_creation_failing_on_a_full_disk_leaves_a_whole_store_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Steps(None)
    with monkeypatch.context() as patch:
        faulty(patch, counted, tmp_path / "counted")
        (tmp_path / "counted").mkdir(mode=0o700)
        open_store(tmp_path / "counted" / "sessions.db").close()
    assert counted.count > 10  # the statements of the schema, the file's calls

    for fail_at in range(1, counted.count + 1):
        home = tmp_path / f"step-{fail_at}"
        home.mkdir(mode=0o700)
        path = home / "sessions.db"
        steps = Steps(fail_at)
        with monkeypatch.context() as patch:
            faulty(patch, steps, home)
            try:
                open_store(path).close()
            except StoreError as error:
                one_line_full(error)
        if path.exists():
            assert whole(path), fail_at
        else:
            assert leftovers(home) == [], fail_at
        open_and_write(path)  # the next run, with room
        assert whole(path)


# -- the other writes: a migration, an import, a copy ------------------------------------------


def old_store(path: Path, monkeypatch: pytest.MonkeyPatch, messages: int) -> None:
    """A store of before the search index (two migrations), with ``messages`` messages."""
    with monkeypatch.context() as patch:
        patch.setattr(_sql_messages, "index_messages", lambda *args, **kwargs: None)
        patch.setattr(_migrations, "MIGRATIONS", _migrations.MIGRATIONS[:2])
        with open_store(path) as store:
            session = store.create_session(model="m", workspace="/w")
            for n in range(messages):
                store.append_messages(session.id, [user(f"message {n} " + "words " * 200)])


def test_a_migration_on_a_full_disk_leaves_the_old_store_and_runs_with_room(
    roomy_disk: SmallDisk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = roomy_disk
    built = tmp_path / "old.db"
    old_store(built, monkeypatch, messages=20)
    path = disk.root / "sessions.db"
    path.write_bytes(built.read_bytes())
    before = path.read_bytes()
    disk.fill(8 * 1024)

    with pytest.raises(StoreError) as caught:
        open_store(path).close()
    one_line_full(caught.value)
    assert path.read_bytes() == before
    disk.free()
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2  # not half upgraded
    with open_store(path) as store:  # with room: upgraded, the index built
        assert len(store.search_messages("message")) > 0
    assert whole(path)


@dataclass
class Target:
    """A store on a small disk, either backend: ``location`` to open, ``disk`` to fill."""

    location: str
    disk: SmallDisk

    def check(self) -> None:
        if not self.location.startswith("postgres"):
            assert whole(Path(self.location))


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "sqlite":
        with small_disk(tmp_path / "disk", size="2m") as disk:
            yield Target(str(disk.root / "sessions.db"), disk)
    else:
        with postgres_on_small_disk() as (disk, location):
            yield Target(location, disk)


def bulky(n: int) -> str:
    """Text that needs its room on either backend (PostgreSQL compresses what repeats)."""
    return f"output {n}: " + os.urandom(3_000).hex()


def test_an_import_on_a_full_disk_changes_nothing_and_works_with_room(
    target: Target, tmp_path: Path
) -> None:
    with open_store(tmp_path / "source.db") as source:
        for n in range(3):
            session = source.create_session(model="m", workspace="/w")
            source.append_messages(session.id, [user(bulky(n)) for _ in range(6)])
        exported = source.export_lineages(limit=10)
    with open_store(target.location) as store:
        kept = store.create_session(model="m", workspace="/w")
        target.disk.fill(0)
        with pytest.raises(StoreError) as caught:
            store.import_lineages(exported)
        one_line_full(caught.value)
        assert [s.id for s in store.list_sessions(limit=None)] == [kept.id]  # all or nothing
    target.disk.free()
    with open_store(target.location) as store:
        report = store.import_lineages(exported)
        assert report.sessions_copied == 3
    target.check()


def test_a_copy_onto_a_full_disk_stops_whole_and_resumes_with_room(
    target: Target, tmp_path: Path
) -> None:
    with open_store(tmp_path / "source.db") as source:
        for n in range(6):
            session = source.create_session(model="m", workspace="/w")
            source.append_messages(session.id, [user(bulky(n)) for _ in range(4)])
        with open_store(target.location) as store:
            store.list_sessions()
            target.disk.fill(0)
            with pytest.raises(StoreError) as caught:
                copy_store(source, store, batch=1)
            one_line_full(caught.value)
            copied = len(store.list_sessions(limit=None))
            assert copied < 6  # whole lineages only (checked below), the rest not yet
        target.check()
        target.disk.free()
        with open_store(target.location) as store:
            report = copy_store(source, store, batch=1)
            assert report.sessions_copied == 6 - copied  # resumed where it stopped
            for session in store.list_sessions(limit=None):
                assert len(store.get_messages(session.id)) == 4
    target.check()
