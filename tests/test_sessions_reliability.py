"""Crashes, concurrent writers, locked and damaged stores: nothing is lost, torn or overwritten.

Every concurrency test synchronizes through pipes and barriers: a process is killed at a point
it reported (or parked at), never after a sleep that assumes a speed.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.context
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessions import (
    NewMessage,
    SessionError,
    SqliteSessionStore,
    StoreBusyError,
    StoreCorruptError,
    _migrations,
    open_store,
)

REPO = Path(__file__).resolve().parents[1]
BATCH = 3
# fork: the writer starts in a millisecond with everything imported, so dozens of kills are cheap.
FORK = multiprocessing.get_context("fork")
# Only guards against a hang; no assertion depends on it.
HANG_GUARD = 120.0


def payload(seq: int) -> str:
    # Sizes vary up to ~20 kB so that appends span several pages and take measurable time.
    return f"message {seq} " + "x" * (seq * 7919 % 20000)


def batch(first_seq: int) -> list[NewMessage]:
    return [
        NewMessage(
            role="user" if (first_seq + k) % 2 == 0 else "assistant",
            content=[{"type": "text", "text": payload(first_seq + k)}],
            metadata={"seq": first_seq + k},
        )
        for k in range(BATCH)
    ]


class Reports:
    """The reading end of a pipe a child writes one line per event to."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def line(self) -> str:
        """The next line; raises if the child died without writing it."""
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise AssertionError(f"the child ended without reporting; got {self.buffer!r}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def rest(self) -> list[str]:
        """Every line still to come, until the child's end of the pipe closes."""
        while chunk := os.read(self.fd, 65536):
            self.buffer += chunk
        os.close(self.fd)
        return [line.decode() for line in self.buffer.split()]


def report(fd: int, text: str) -> None:
    os.write(fd, f"{text}\n".encode())


def park(fd: int, text: str) -> None:
    """Child process: report ``text`` and wait, right here, for the SIGKILL."""
    report(fd, text)
    while True:
        signal.pause()


def spawn(
    target: Callable[..., None], *args: Any
) -> tuple[multiprocessing.context.ForkProcess, Reports]:
    read_end, write_end = os.pipe()
    child = FORK.Process(target=target, args=(*args, write_end))
    child.start()
    os.close(write_end)
    return child, Reports(read_end)


def kill(child: multiprocessing.context.ForkProcess) -> None:
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    assert child.exitcode == -signal.SIGKILL, "the child died on its own"


def append_forever(path: str, session_id: str, report_fd: int) -> None:
    """Child process: append batches and report each commit until killed."""
    with open_store(path) as store:
        count = store.get_session(session_id).message_count
        while True:
            store.append_messages(session_id, batch(count))
            count += BATCH
            report(report_fd, str(count))


def integrity(path: Path) -> str:
    raw = sqlite3.connect(path)
    try:
        return str(raw.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        raw.close()


def check_session(path: Path, session_id: str, at_least: int, verified: int) -> int:
    """Assert the session is intact; return its message count."""
    with open_store(path) as store:
        session = store.get_session(session_id)
        messages = store.get_messages(session_id)
    count = len(messages)
    assert count >= at_least, f"lost committed messages: {count} < {at_least}"
    assert count % BATCH == 0, f"a torn batch: {count} messages"
    assert session.message_count == count
    assert [m.seq for m in messages] == list(range(count))
    for message in messages[verified:]:
        assert message.content == [{"type": "text", "text": payload(message.seq)}]
        assert message.metadata == {"seq": message.seq}
    return count


def new_store_with_session(path: Path) -> str:
    with open_store(path) as store:
        return store.create_session(model="m", workspace="/w").id


@pytest.mark.heavy
def test_kill_9_while_appending_loses_nothing_committed(tmp_path: Path) -> None:
    """The writer dies wherever it is in the append after its k-th reported commit."""
    rng = random.Random(1122)
    path = tmp_path / "sessions.db"
    session_id = new_store_with_session(path)
    count = 0
    for _ in range(30):
        writer, reports = spawn(append_forever, str(path), session_id)
        committed = [int(reports.line()) for _ in range(rng.randint(1, 4))]
        kill(writer)
        reported = max(committed + [int(line) for line in reports.rest()])
        assert reported > count
        count = check_session(path, session_id, at_least=reported, verified=count)
        assert integrity(path) == "ok"


def append_then_park_at(path: str, session_id: str, statement: str, report_fd: int) -> None:
    """Child process: commit one batch, then park inside the next append's transaction just
    before SQLite runs ``statement``."""
    with SqliteSessionStore(path) as store:
        store.append_messages(session_id, batch(0))
        assert store._conn is not None

        def trace(sql: str) -> None:
            if sql.lstrip().upper().startswith(statement):
                park(report_fd, "parked")

        store._conn.set_trace_callback(trace)
        store.append_messages(session_id, batch(BATCH))
        report(report_fd, "the append finished: the statement was never run")


@pytest.mark.parametrize("statement", ["UPDATE SESSIONS", "COMMIT"])
def test_kill_9_inside_an_append_leaves_no_trace_of_it(tmp_path: Path, statement: str) -> None:
    """Killed after its rows were inserted (UPDATE) or just before COMMIT: the batch is absent,
    the committed one intact, and the next writer gets the lock."""
    path = tmp_path / "sessions.db"
    session_id = new_store_with_session(path)
    writer, reports = spawn(append_then_park_at, str(path), session_id, statement)
    assert reports.line() == "parked"
    kill(writer)
    assert reports.rest() == []
    assert check_session(path, session_id, at_least=BATCH, verified=0) == BATCH
    assert integrity(path) == "ok"
    with open_store(path, busy_timeout=0) as store:
        store.append_messages(session_id, batch(BATCH))
    assert check_session(path, session_id, at_least=2 * BATCH, verified=0) == 2 * BATCH


def create_and_park(path: str, stage: str, report_fd: int) -> None:
    """Child process: create the store and park at ``stage`` of it."""
    if stage == "schema written, not committed":
        apply_pending = _migrations.apply_pending

        def apply_then_park(conn: sqlite3.Connection) -> list[str]:
            apply_pending(conn)
            park(report_fd, "parked")
            return []

        _migrations.apply_pending = apply_then_park
    elif stage == "complete, not linked into place":
        os.link = lambda *args, **kwargs: park(report_fd, "parked")
    with SqliteSessionStore(path) as store:
        session = store.create_session(model="m", workspace="/w")
        assert store._conn is not None
        store._conn.set_trace_callback(
            lambda sql: park(report_fd, "parked") if sql.startswith("COMMIT") else None
        )
        store.append_messages(session.id, batch(0))


STAGES = [
    "schema written, not committed",
    "complete, not linked into place",
    "created, first append not committed",
]


@pytest.mark.parametrize("stage", STAGES)
def test_kill_9_while_creating_the_store_leaves_an_openable_store(
    tmp_path: Path, stage: str
) -> None:
    path = tmp_path / "home" / "sessions.db"
    creator, reports = spawn(create_and_park, str(path), stage)
    assert reports.line() == "parked"
    kill(creator)
    leftovers = [p.name for p in path.parent.iterdir() if ".tmp" in p.name]
    if stage == STAGES[2]:
        assert path.is_file() and leftovers == []
    else:
        # The store appears only once complete; what the creator had built stays aside.
        assert not path.exists() and leftovers
    with open_store(path) as store:
        sessions = store.list_sessions(limit=None)
        assert [s.message_count for s in sessions] == ([0] if stage == STAGES[2] else [])
        store.append_messages(store.create_session(model="m", workspace="/w").id, batch(0))
    assert integrity(path) == "ok"
    # Whatever the killed creator left half-made is gone once the store is opened.
    assert [p.name for p in path.parent.iterdir() if ".tmp" in p.name] == []


WRITER_SCRIPT = """
import sys
from sessions import NewMessage, open_store
path, session_id = sys.argv[1], sys.argv[2]
with open_store(path) as store:
    count = store.get_session(session_id).message_count
    print("ready", flush=True)
    while True:
        batch = [
            NewMessage(role="user", content=[{"type": "text", "text": f"fresh {count + k}"}])
            for k in range(3)
        ]
        store.append_messages(session_id, batch)
        count += 3
        print(count, flush=True)
"""


def test_kill_9_of_a_fresh_interpreter(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "sessions.db"
    session_id = new_store_with_session(path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _ in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(path), session_id],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        reported = [int(writer.stdout.readline()) for _ in range(rng.randint(1, 4))]
        writer.send_signal(signal.SIGKILL)
        reported += [int(line) for line in writer.stdout.read().split()]
        writer.wait()
        with open_store(path) as store:
            messages = store.get_messages(session_id)
        assert len(messages) >= max(reported)
        assert len(messages) % 3 == 0
        assert [m.content[0]["text"] for m in messages] == [
            f"fresh {i}" for i in range(len(messages))
        ]
    assert integrity(path) == "ok"


PER_PHASE = 10
PHASES = 15


def append_in_phases(path: str, session_id: str, writer: int, barrier: Any, report_fd: int) -> None:
    """Child process: PHASES x PER_PHASE single-message appends; between phases it waits for the
    other writer, so the two really overlap whatever the scheduler does."""
    # The lock is only ever held for one short append, so waiting is always right here: a busy
    # error would be a bug, not load.
    with open_store(path, busy_timeout=HANG_GUARD) as store:
        for phase in range(PHASES):
            barrier.wait(timeout=HANG_GUARD)
            for k in range(PER_PHASE):
                n = phase * PER_PHASE + k
                store.append_messages(
                    session_id,
                    [
                        NewMessage(
                            role="user",
                            content=[{"type": "text", "text": f"w{writer} #{n}"}],
                            metadata={"writer": writer, "n": n},
                        )
                    ],
                )
    report(report_fd, "done")


def test_two_processes_appending_to_one_session(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    session_id = new_store_with_session(path)
    barrier = FORK.Barrier(2)
    writers = [spawn(append_in_phases, str(path), session_id, w, barrier) for w in (0, 1)]
    for writer, reports in writers:
        assert reports.line() == "done"
        writer.join(timeout=HANG_GUARD)
        assert writer.exitcode == 0
    with open_store(path) as store:
        messages = store.get_messages(session_id)
        session = store.get_session(session_id)
    total = PHASES * PER_PHASE
    assert len(messages) == 2 * total
    assert [m.seq for m in messages] == list(range(2 * total))
    assert session.message_count == 2 * total
    for number in (0, 1):
        numbers = [m.metadata["n"] for m in messages if m.metadata["writer"] == number]
        # Each writer's messages appear in its own order, none lost, none doubled.
        assert numbers == list(range(total))
    # The barrier makes every phase hold both writers' appends: they did interleave.
    owners = [m.metadata["writer"] for m in messages]
    switches = sum(a != b for a, b in itertools.pairwise(owners))
    assert switches >= PHASES
    assert integrity(path) == "ok"


def hold_the_write_lock(path: str, release: Any, report_fd: int) -> None:
    """Child process: take the write lock, report it, keep it until told to release it."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    report(report_fd, "held")
    release.wait(timeout=HANG_GUARD)
    holder.execute("COMMIT")
    holder.close()
    report(report_fd, "released")


@pytest.mark.parametrize(
    ("busy_timeout", "wording"),
    [
        (0, "another process holds its write lock"),
        (0.05, "another process kept it locked for more than 0.05s"),
    ],
)
def test_a_held_write_lock_gives_a_clear_busy_error(
    tmp_path: Path, busy_timeout: float, wording: str
) -> None:
    """The lock is held by another process for the whole attempt, so the outcome does not
    depend on how long the store waits."""
    path = tmp_path / "sessions.db"
    session_id = new_store_with_session(path)
    release = FORK.Event()
    holder, reports = spawn(hold_the_write_lock, str(path), release)
    try:
        assert reports.line() == "held"
        with open_store(path, busy_timeout=busy_timeout) as store:
            with pytest.raises(StoreBusyError) as caught:
                store.append_messages(session_id, batch(0))
            message = str(caught.value)
            assert f"session store {path} is busy: {wording}; try again" == message
            # Readers are not blocked by a writer (WAL).
            assert store.get_session(session_id).message_count == 0
            release.set()
            assert reports.line() == "released"
            store.append_messages(session_id, batch(0))
            assert store.get_session(session_id).message_count == BATCH
    finally:
        release.set()
        holder.join(timeout=HANG_GUARD)
    assert holder.exitcode == 0


# ------------------------------------------------------------------ damaged files


def real_store_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "real" / "sessions.db"
    with open_store(path) as store:
        session = store.create_session(model="m", workspace="/w")
        for n in range(10):
            store.append_messages(session.id, batch(n * BATCH))
    return path.read_bytes()


def damaged(kind: str, tmp_path: Path) -> bytes:
    rng = random.Random(kind)
    if kind == "text":
        return b"this is not a database\n" * 50
    if kind == "random":
        return rng.randbytes(8192)
    if kind == "empty":
        return b""
    if kind == "header-then-garbage":
        return b"SQLite format 3\x00" + rng.randbytes(4080)
    real = real_store_bytes(tmp_path)
    if kind == "truncated":
        return real[: len(real) // 2 + 100]
    assert kind == "damaged-pages"
    page = int.from_bytes(real[16:18], "big")
    return real[:page] + rng.randbytes(len(real) - page)


KINDS = ["text", "random", "empty", "header-then-garbage", "truncated", "damaged-pages"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_store_is_refused_and_left_untouched(kind: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = home / "sessions.db"
    path.write_bytes(damaged(kind, tmp_path))
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_size)

    with pytest.raises(StoreCorruptError) as caught, open_store(path) as store:
        # Damage deep inside may only show on the first read.
        store.list_sessions(limit=None)
        for session in store.list_sessions(limit=None):
            store.get_messages(session.id)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)

    env = dict(os.environ, AGENTLOOP_HOME=str(home), PYTHONPATH=str(REPO))
    for args in (["list"], ["show", "abcd"]):
        result = subprocess.run(
            [sys.executable, "-m", "agentloop", "sessions", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("agentloop: error: ")
        assert result.stderr.count("\n") == 1
        assert str(path) in result.stderr
        assert "Traceback" not in result.stderr
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_size) == before
    assert sorted(p.name for p in home.iterdir()) == ["sessions.db"]


def test_errors_are_session_errors_with_one_line() -> None:
    for error in (StoreBusyError("x", path="/p"), StoreCorruptError("y", path="/p")):
        assert isinstance(error, SessionError)
