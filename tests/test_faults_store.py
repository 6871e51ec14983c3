"""Fault injection, the store: a disk that fills while a reply streams, a lease lost
while the process was paused, on both backends.

A reply that could not be stored is said to be lost, on the terminal, and no further model call
is made until the store takes writes again (piped and ``-p`` runs stop, exit 1). A lease that
another process took over refuses the next model call before it is made: it is never paid for.

The disk fills for real on SQLite (the process's file-size limit set from outside with
``prlimit``: SQLite's next write past it fails with ``disk I/O error``) and, on PostgreSQL,
through triggers that refuse every write with the server's ``disk_full`` error (SQLSTATE 53100).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

import pytest
import support.store_contract as store_contract
from fake_api import FakeAnthropicServer, ReplySpec, text_reply
from support.faults import fill_sqlite, free_sqlite, texts
from support.loop_scripts import Script
from support.processes import HANG_GUARD, AgentProcess, cli_env
from support.store_contract import StoreFactory

from agentloop import AgentLoop, ConversationCompacter
from agentloop._adapters.records import from_record
from agentloop._errors import StoreWriteError
from agentloop.testing import FunctionModel
from sessions import (
    NewMessage,
    SessionLeasedError,
    SessionStore,
    StoreBusyError,
    StoreError,
    open_store,
)

store_factory = store_contract.store_factory
WINDOW = "6000"


# -- a disk that fills --------------------------------------------------------------------------


class Disk:
    """Fills and frees the disk under one backend's store, for the process ``pid``."""

    def __init__(self, factory: StoreFactory) -> None:
        self.factory = factory

    def fill(self, pid: int) -> None:
        if self.factory.name == "sqlite":
            fill_sqlite(Path(self.factory.location), pid)
        else:
            self._triggers("full")

    def free(self, pid: int) -> None:
        if self.factory.name == "sqlite":
            free_sqlite(pid)
        else:
            self._triggers("free")

    def _triggers(self, state: str) -> None:
        import psycopg
        from psycopg import sql

        schema = getattr(self.factory, "schema")  # noqa: B009 (the PostgreSQL factory's)
        with psycopg.connect(store_contract.postgres_url(), autocommit=True) as conn:
            tables = [
                str(row[0])
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = %s AND table_type = 'BASE TABLE'",
                    (schema,),
                )
            ]
            function = sql.Identifier(schema, "disk_full")
            if state == "full":
                conn.execute(
                    sql.SQL(
                        "CREATE OR REPLACE FUNCTION {} () RETURNS trigger AS $$ BEGIN "
                        "RAISE EXCEPTION 'could not extend file: No space left on device' "
                        "USING ERRCODE = 'disk_full'; END $$ LANGUAGE plpgsql"
                    ).format(function)
                )
            for table in tables:
                target = sql.Identifier(schema, table)
                if state == "full":
                    conn.execute(
                        sql.SQL(
                            "CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE OR DELETE ON {} "
                            "FOR EACH STATEMENT EXECUTE FUNCTION {} ()"
                        ).format(target, function)
                    )
                else:
                    conn.execute(sql.SQL("DROP TRIGGER IF EXISTS disk_full ON {}").format(target))


@pytest.fixture
def disk(store_factory: StoreFactory) -> Disk:
    return Disk(store_factory)


# -- in the loop: no model call while the store refuses writes ---------------------------------


class FillingStore:
    """A store handle whose writes fail while ``full`` (the disk), as the real ones fail."""

    WRITES = frozenset(
        {
            "create_session",
            "append_messages",
            "transition",
            "update_session",
            "acquire_lease",
            "renew_lease",
            "release_lease",
        }
    )

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.full = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if name not in self.WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            if self.full:
                raise StoreError("session store x: database or disk is full")
            return attribute(*args, **kwargs)

        return write


def test_a_reply_the_store_refuses_is_kept_in_memory_and_nothing_is_sent_until_it_is_stored(
    store_factory: StoreFactory,
) -> None:
    store = FillingStore(store_factory.open())
    sent: list[list[str]] = []

    def answer(request: Any) -> str:
        sent.append([str(m.content[0].get("text")) for m in request.messages])
        if len(sent) == 2:
            store.full = True  # the disk fills while the reply streams
        return f"answer {len(sent)}"

    model = FunctionModel(answer)
    compacter = ConversationCompacter(model_name="m", context_window=100_000, model=model)
    loop = AgentLoop(
        model=model, model_name="m", compacter=compacter, store=cast(SessionStore, store)
    )
    loop.lease_owner = "pid 1 on host a"
    loop.run_turn("one")

    with pytest.raises(StoreWriteError, match=r"^the reply was not saved: .*disk is full"):
        loop.run_turn("two")
    assert loop.unsaved
    with pytest.raises(StoreWriteError, match=r"still refuses writes, so this message was not"):
        loop.run_turn("three")
    assert len(sent) == 2  # no model call while the store refuses writes

    store.full = False
    loop.run_turn("four")
    assert not loop.unsaved
    assert sent[-1] == ["one", "answer 1", "two", "answer 2", "four"]
    stored = [from_record(r) for r in store.get_messages(loop.session_id)]
    assert texts(stored) == [*sent[-1], "answer 3"]
    loop.close()
    store_factory.close()


def test_a_lease_taken_over_refuses_the_model_call_before_it_is_made(
    store_factory: StoreFactory,
) -> None:
    first_store = store_factory.open()
    model = FunctionModel(lambda request: f"answer {len(model.requests) + 1}")
    loop = AgentLoop(model=model, model_name="m", store=first_store)
    loop.lease_owner = "pid 1 on host a"
    loop.run_turn("one")
    # Paused past its lease (a clock an hour on): another process takes the session over.
    later = datetime.now(UTC) + timedelta(hours=1)
    other = store_factory.open(clock=lambda: later)
    other.acquire_lease(loop.session_id, owner="pid 2 on host b")

    with pytest.raises(SessionLeasedError, match="in use by pid 2 on host b"):
        loop.run_turn("two")
    assert len(model.requests) == 1  # never sent, never paid for
    assert loop.unsaved  # what it said is not in the store: said, and kept in memory
    assert len(first_store.get_messages(loop.session_id)) == 2
    store_factory.close()


# -- through the console script ------------------------------------------------------------------


@dataclass
class Run:
    """The console script on ``factory``'s store against a scripted fake API."""

    root: Path
    server: FakeAnthropicServer
    factory: StoreFactory
    script: Script = field(default_factory=Script)

    @property
    def workspace(self) -> Path:
        return self.root / "project"

    def env(self) -> dict[str, str]:
        return cli_env(self.root / "home", self.server.base_url, AGENTLOOP_STORE=self.location)

    @property
    def location(self) -> str:
        return self.factory.location

    def start(self, *args: str) -> AgentProcess:
        return AgentProcess(
            ["--context-window", WINDOW, *args], cwd=self.workspace, env=self.env(), forked=True
        )

    def stored(self) -> list[str]:
        with open_store(self.location) as store:
            (session,) = store.list_sessions(limit=None)
            return texts([from_record(m) for m in store.get_messages(session.id)])

    def check(self) -> None:
        if self.factory.name == "sqlite":
            with contextlib.closing(sqlite3.connect(self.location)) as db:
                assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.fixture
def run(tmp_path: Path, store_factory: StoreFactory) -> Iterator[Run]:
    script = Script()
    with FakeAnthropicServer(handler=script) as server:
        made = Run(tmp_path, server, store_factory, script)
        made.workspace.mkdir()
        yield made
        assert server.violations == []


class OnRequest:
    """The fake model: ``replies`` in order; ``before(n)`` runs as the n-th request arrives
    (before its reply leaves), e.g. to fill the disk while the reply is on its way."""

    def __init__(
        self, replies: Sequence[ReplySpec], before: Mapping[int, Callable[[], None]]
    ) -> None:
        self.replies = list(replies)
        self.before = dict(before)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        self.bodies.append(body)
        action = self.before.get(len(self.bodies))
        if action is not None:
            action()
        return self.replies[len(self.bodies) - 1]


def test_piped_a_reply_the_full_disk_refuses_is_said_lost_and_no_more_is_sent(
    run: Run, disk: Disk
) -> None:
    process: list[AgentProcess] = []
    model = OnRequest(
        [text_reply("first answer"), text_reply("second answer"), text_reply("never")],
        {2: lambda: disk.fill(process[0].popen.pid)},
    )
    run.server.handler = model
    process.append(run.start())
    agent = process[0]
    try:
        agent.send(b"first question\nsecond question\nthird question\n")
        code = agent.finish()
    finally:
        disk.free(agent.popen.pid)

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code == 1
    assert agent.printed_lines() == ["first answer", "second answer"]  # shown...
    (error,) = agent.error_lines()
    assert error.startswith("agentloop: error: the reply was not saved: session store ")
    assert "(not saved: the store refuses writes" in agent.text_err  # ...and said to be lost
    assert "stopping" in agent.text_err
    assert len(model.bodies) == 2  # the third question was never sent
    assert run.stored() == ["first question", "first answer"]
    run.check()


def test_print_mode_prints_no_answer_it_could_not_store_and_fails(run: Run, disk: Disk) -> None:
    process: list[AgentProcess] = []
    model = OnRequest([text_reply("the answer")], {1: lambda: disk.fill(process[0].popen.pid)})
    run.server.handler = model
    process.append(run.start("-p", "a question"))
    agent = process[0]
    try:
        code = agent.finish()
    finally:
        disk.free(agent.popen.pid)

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code == 1
    assert agent.text_out == ""  # printed only once stored: it was not
    (error,) = agent.error_lines()
    assert "the reply was not saved" in error
    assert "is saved" not in agent.text_err


def test_a_process_paused_past_its_lease_makes_no_paid_call_when_it_wakes(
    run: Run, store_factory: StoreFactory
) -> None:
    run.server.handler = OnRequest([text_reply("first answer"), text_reply("never")], {})
    agent = run.start()
    try:
        agent.send(b"first question\n")
        assert agent.wait_for(lambda: agent.printed_lines() == ["first answer"])
        # Paused (its lease runs out meanwhile: a clock an hour on), another process takes the
        # session over. (Paused inside one of its writes, it holds the store: let it finish.)
        later = datetime.now(UTC) + timedelta(hours=1)
        other = open_store(run.location, clock=lambda: later, busy_timeout=0)
        (session,) = other.list_sessions(limit=None)
        deadline = time.monotonic() + HANG_GUARD
        while "todos" not in other.get_session(session.id).metadata:  # the turn's last write
            assert time.monotonic() < deadline
            time.sleep(0.02)
        while True:
            agent.popen.send_signal(signal.SIGSTOP)
            try:
                other.acquire_lease(session.id, owner="pid 2 on host b")
                break
            except StoreBusyError:
                agent.popen.send_signal(signal.SIGCONT)
                assert time.monotonic() < deadline
                time.sleep(0.05)
        other.close()
        agent.popen.send_signal(signal.SIGCONT)
        agent.send(b"second question\n")
        code = agent.finish()
    finally:
        with contextlib.suppress(ProcessLookupError):
            agent.popen.send_signal(signal.SIGCONT)

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code == 1
    (error,) = agent.error_lines()
    assert "in use by pid 2 on host b" in error and "nothing was sent to the model" in error
    assert len(run.server.message_requests) == 1  # the woken process paid for nothing
    assert run.stored() == ["first question", "first answer"]
    store_factory.close()


# -- a workspace whose path is not UTF-8 -------------------------------------------------------


def test_a_workspace_whose_path_is_not_utf8_starts_continues_and_lists(run: Run) -> None:
    workspace = Path(os.fsdecode(os.fsencode(run.root) + b"/caf\xe9 project"))
    workspace.mkdir()
    run.server.handler = OnRequest([text_reply("one"), text_reply("two")], {})

    def agentloop(*args: str) -> AgentProcess:
        process = AgentProcess(list(args), cwd=workspace, env=run.env(), forked=True)
        assert process.finish() == 0, process.text_err
        assert "Traceback" not in process.text_err, process.text_err
        return process

    assert agentloop("-p", "hello there").printed_lines() == ["one"]
    resumed = agentloop("-c", "-p", "and again")
    assert resumed.printed_lines() == ["two"]
    listed = agentloop("sessions", "list")
    assert "hello there" in listed.text_out
    assert run.stored() == ["hello there", "one", "and again", "two"]
    with open_store(run.location) as store:
        (session,) = store.list_sessions(limit=None)
    assert session.workspace.endswith("/caf\\xe9 project")  # the byte, written \xNN


# -- NUL characters ------------------------------------------------------------------------------


def test_a_nul_in_the_first_message_is_stored_as_sent_on_both_backends(run: Run) -> None:
    model = OnRequest([text_reply("answer \x00 with a NUL"), text_reply("again")], {})
    run.server.handler = model
    first = run.start("-p", "look at this")
    first.send(b"a\x00b, the bytes of a binary file\n")
    assert first.finish() == 0, first.text_err
    second = run.start("-c", "-p", "and this: \x01\x02")
    assert second.finish() == 0, second.text_err

    assert first.printed_lines() == ["answer \x00 with a NUL"]
    sent = model.bodies[-1]["messages"]
    assert "a\x00b" in sent[0]["content"][0]["text"]
    with open_store(run.location) as store:
        (session,) = store.list_sessions(limit=None)
        stored = [from_record(m) for m in store.get_messages(session.id)]
    # 5.x replies begin with thinking: the first text block of each message.
    assert [next(b["text"] for b in m.content if "text" in b) for m in stored] == [
        *(next(b["text"] for b in m["content"] if "text" in b) for m in sent),
        "again",
    ]  # the NUL characters too, exactly as sent
    assert session.title is not None and "\x00" not in session.title
    assert session.title.startswith("look at this")


# -- a store damaged where opening it does not look -----------------------------------------------


def said(role: Literal["user", "assistant"], text: str) -> NewMessage:
    return NewMessage(role=role, content=[{"type": "text", "text": text}])


def damage_a_page_of(path: Path, session_id: str) -> None:
    """Break the header of the first table page holding ``session_id``'s messages (a page
    that continuing another session never reads)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        first = db.execute(
            "SELECT min(id) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        pages = [
            page
            for (page,) in db.execute(
                "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' "
                "ORDER BY pageno"
            )
        ]
        assert len(pages) > 2 and first is not None
    with open(path, "r+b") as handle:
        handle.seek((pages[0] - 1) * page_size)
        handle.write(b"\x42")  # not a page type


def test_a_store_damaged_in_a_page_not_read_at_open_is_left_untouched(tmp_path: Path) -> None:
    from sessions import workspace_key

    script = Script()
    script.add(text_reply("never stored"))
    with FakeAnthropicServer(handler=script) as server:
        run = Run(tmp_path, server, store_contract.SqliteFactory(tmp_path), script)
        run.workspace.mkdir()
        here = workspace_key(run.workspace)
        with open_store(run.location) as store:
            old = store.create_session(model="m", workspace=here, title="old")
            store.append_messages(
                old.id,
                [
                    said(r, f"{r} {n} " + "x" * 3000)
                    for n in range(40)
                    for r in ("user", "assistant")
                ],
            )
            new = store.create_session(model="m", workspace=here, title="new")
            store.append_messages(
                new.id,
                [
                    said("user", "hello"),
                    said("assistant", "hi"),
                ],
            )
        damage_a_page_of(Path(run.location), old.id)
        before = Path(run.location).read_bytes()

        agent = run.start("-c")
        agent.send(b"go on\n")
        code = agent.finish()

    assert "Traceback" not in agent.text_err, agent.text_err
    assert code != 0
    assert "is damaged" in agent.text_err and "left untouched" in agent.text_err
    assert len(server.message_requests) <= 1  # refused at start, or its reply not stored
    # Nothing of the conversation was written: the new session reads as it was.
    with contextlib.closing(sqlite3.connect(f"file:{run.location}?mode=ro", uri=True)) as db:
        count = db.execute("SELECT count(*) FROM messages WHERE session_id = ?", (new.id,))
        assert count.fetchone()[0] == 2
    after = Path(run.location).read_bytes()
    changed = [
        n for n in range(0, len(before), 4096) if before[n : n + 4096] != after[n : n + 4096]
    ]
    assert len(changed) <= 2, changed  # at most the lease (its table, the file header)


def test_a_write_of_data_waits_for_the_check_and_a_lease_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessions import StoreCorruptError
    from sessions._sqlite_check import IntegrityCheck

    path = tmp_path / "sessions.db"
    with open_store(path) as store:
        old = store.create_session(model="m", workspace="/w")
        rows = [said("user", "x" * 3000) for _ in range(40)]
        store.append_messages(old.id, rows)
        new = store.create_session(model="m", workspace="/w")
    damage_a_page_of(path, old.id)
    verdict = threading.Event()
    check = IntegrityCheck._run

    def slow_check(self: IntegrityCheck) -> None:
        verdict.wait(HANG_GUARD)  # the check of a large file: still running
        check(self)

    monkeypatch.setattr(IntegrityCheck, "_run", slow_check)
    store = open_store(path)
    try:
        lease = store.acquire_lease(new.id, owner="me")  # goes before the verdict
        failures: list[BaseException] = []

        def append() -> None:
            try:
                store.append_messages(new.id, [said("user", "hi")], lease=lease)
            except BaseException as error:
                failures.append(error)

        writer = threading.Thread(target=append)
        writer.start()
        writer.join(0.2)
        assert writer.is_alive()  # waiting for the verdict, not written
        verdict.set()
        writer.join(HANG_GUARD)
        (failure,) = failures
        assert isinstance(failure, StoreCorruptError)
        with pytest.raises(StoreCorruptError):  # and now every write, a lease's too
            store.renew_lease(lease)
    finally:
        verdict.set()
        store.close()
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        count = db.execute("SELECT count(*) FROM messages WHERE session_id = ?", (new.id,))
        assert count.fetchone()[0] == 0
