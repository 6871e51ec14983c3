"""The store contract, part five: 8 processes at once, on every backend.

Each process appends turns (a user message, then the reply: two separate calls) to its own
conversation and compacts it now and then; all of them also take turns on two shared
conversations, holding the session's lease for each turn and compacting those too. Afterwards:
nothing a process reported as committed is missing, nothing is doubled, no turn is split by
another writer's messages, every session's roles alternate, and every process ended (no
deadlock). Processes start together at barriers; a busy shared session is retried after a
short pause, which no assertion depends on. Then a holder that crashes (SIGKILL) blocks the
session until its lease runs out, on a clock the test moves.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import support.store_contract as store_contract
from support.store_contract import StoreFactory

from sessions import (
    NewMessage,
    SessionLeasedError,
    SessionStore,
    StoredMessage,
    default_lease_owner,
    open_store,
)

store_factory = store_contract.store_factory

WORKERS = 8
ROUNDS = 20
COMPACT_EVERY = 5
FORK = multiprocessing.get_context("fork")
HANG_GUARD = 300.0  # only guards against a hang; no assertion depends on it


def say(role: str, text: str, kind: str = "turn") -> NewMessage:
    return NewMessage(
        role="user" if role == "user" else "assistant",
        content=[{"type": "text", "text": text}],
        metadata={"kind": kind},
    )


def restart(tag: str) -> list[NewMessage]:
    """What a compaction carries into the child: a summary and its acknowledgement."""
    return [say("user", f"summary {tag}", "summary"), say("assistant", f"ack {tag}", "summary")]


def take_turn_on_shared(
    store: SessionStore, root: str, worker: int, turn: int, rng: random.Random
) -> str:
    """Hold the conversation's head, append one whole turn, maybe compact; returns the turn."""
    owner = f"worker {worker} (pid {os.getpid()})"
    while True:
        head = store.newest_descendant(root).id
        try:
            lease = store.acquire_lease(head, owner=owner)
        except SessionLeasedError:
            time.sleep(rng.uniform(0.001, 0.005))  # another worker's turn: try again
            continue
        if store.newest_descendant(root).id != head:  # compacted before we got it
            store.release_lease(lease)
            continue
        break
    text = f"w{worker} t{turn}"
    store.append_messages(head, [say("user", text)], lease=lease)
    store.append_messages(head, [say("assistant", f"{text} reply")], lease=lease)
    if turn % COMPACT_EVERY == COMPACT_EVERY - 1:
        store.transition(head, messages=restart(text), strategy="summarize", lease=lease)
    store.release_lease(lease)
    return text


def work(
    location: str, mine: str, shared: list[str], worker: int, barrier: Any, report_fd: int
) -> None:
    """Child process: ROUNDS rounds on its own conversation and on a shared one."""
    rng = random.Random(worker)
    with open_store(location, busy_timeout=HANG_GUARD) as store:
        for turn in range(ROUNDS):
            if turn % 4 == 0:
                barrier.wait(timeout=HANG_GUARD)  # keep every process in the same stretch
            head = store.newest_descendant(mine).id
            text = f"own {turn}"
            store.append_messages(head, [say("user", text)])
            store.append_messages(head, [say("assistant", f"{text} reply")])
            os.write(report_fd, f"own {worker} {turn}\n".encode())
            if turn % COMPACT_EVERY == COMPACT_EVERY - 1:
                store.transition(head, messages=restart(text), strategy="summarize")
            root = shared[(worker + turn) % len(shared)]
            done = take_turn_on_shared(store, root, worker, turn, rng)
            os.write(report_fd, f"shared {root} {done}\n".encode())
    os.write(report_fd, b"done\n")
    os.close(report_fd)


def turns(messages: list[StoredMessage]) -> list[str]:
    """The turns of one session, checking that each is whole and roles alternate."""
    roles = [m.role for m in messages]
    assert roles == ["user", "assistant"] * (len(roles) // 2), roles
    found = []
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        asked, replied = question.content[0]["text"], answer.content[0]["text"]
        if question.metadata["kind"] == "summary":
            assert answer.metadata["kind"] == "summary"
            continue
        assert replied == f"{asked} reply", f"a turn was split: {asked!r} then {replied!r}"
        found.append(asked)
    return found


def lineage_turns(store: SessionStore, root: str) -> list[str]:
    found: list[str] = []
    for session in store.lineage(root):
        found += turns(store.get_messages(session.id))
    return found


@pytest.mark.heavy
@pytest.mark.parametrize("backend", sorted(store_contract.BACKENDS))
def test_eight_processes_lose_nothing_and_never_interleave(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    factory: StoreFactory = store_contract.BACKENDS[backend](tmp_path)
    request.addfinalizer(factory.close)
    store = factory.open()
    own = [store.create_session(model="m", workspace="/w").id for _ in range(WORKERS)]
    shared = [store.create_session(model="m", workspace="/w").id for _ in range(2)]
    barrier = FORK.Barrier(WORKERS)
    children = []
    for worker in range(WORKERS):
        read_end, write_end = os.pipe()
        child = FORK.Process(
            target=work, args=(factory.location, own[worker], shared, worker, barrier, write_end)
        )
        child.start()
        os.close(write_end)
        children.append((child, read_end))
    reports: list[str] = []
    for child, read_end in children:
        with os.fdopen(read_end) as lines:
            got = lines.read().split("\n")
        child.join(timeout=HANG_GUARD)
        assert child.exitcode == 0, f"a worker failed or hung: {child.exitcode}"
        assert "done" in got
        reports += [line for line in got if line and line != "done"]

    for worker, root in enumerate(own):
        # Each worker's own conversation: every turn, in order, across its compactions.
        assert lineage_turns(store, root) == [f"own {turn}" for turn in range(ROUNDS)]
        assert len(store.lineage(root)) == 1 + ROUNDS // COMPACT_EVERY
        assert f"own {worker} {ROUNDS - 1}" in reports
    shared_reports = [line.split(" ", 2)[1:] for line in reports if line.startswith("shared ")]
    assert len(shared_reports) == WORKERS * ROUNDS
    for root in shared:
        found = lineage_turns(store, root)
        assert not [text for text, n in Counter(found).items() if n > 1], "a turn stored twice"
        assert sorted(found) == sorted(text for where, text in shared_reports if where == root)
        assert store.get_compaction_record(root).compaction_count >= 1


def shifted(offset: Any) -> Callable[[], datetime]:
    """The real time moved by ``offset`` seconds (a shared value the test advances)."""
    return lambda: datetime.now(UTC) + timedelta(seconds=offset.value)


def hold_then_park(location: str, session_id: str, offset: Any, report_fd: int) -> None:
    """Child process: take the session's lease, say so with its owner string, then wait to be
    killed (a holder that crashes)."""
    with open_store(location, clock=shifted(offset)) as store:
        lease = store.acquire_lease(session_id, owner=default_lease_owner(), ttl=30)
        store.append_messages(session_id, [say("user", "from the holder")], lease=lease)
        os.write(report_fd, f"{lease.owner}\n".encode())
        while True:
            signal.pause()


@pytest.mark.parametrize("backend", sorted(store_contract.BACKENDS))
def test_a_crashed_holder_blocks_until_its_lease_expires(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    factory: StoreFactory = store_contract.BACKENDS[backend](tmp_path)
    request.addfinalizer(factory.close)
    offset = FORK.Value("d", 0.0)
    store = factory.open(clock=shifted(offset))
    session = store.create_session(model="m", workspace="/w")
    read_end, write_end = os.pipe()
    holder = FORK.Process(
        target=hold_then_park, args=(factory.location, session.id, offset, write_end)
    )
    holder.start()
    os.close(write_end)
    with os.fdopen(read_end) as reports:
        owner = reports.readline().strip()
        assert holder.pid is not None and owner.startswith(f"pid {holder.pid} on ")
        with pytest.raises(SessionLeasedError, match=f"in use by {owner}"):
            store.acquire_lease(session.id, owner="successor")
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
    with pytest.raises(SessionLeasedError):  # crashed, but its lease has not run out yet
        store.append_messages(session.id, [say("assistant", "too early")])
    offset.value = 31.0
    lease = store.acquire_lease(session.id, owner="successor")
    store.append_messages(session.id, [say("assistant", "taken over")], lease=lease)
    assert [m.content[0]["text"] for m in store.get_messages(session.id)] == [
        "from the holder",
        "taken over",
    ]
