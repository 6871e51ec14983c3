"""The store contract, part three: one writer per session (leases).

Written once against the ``SessionStore`` protocol; runs against every backend in
``store_contract.BACKENDS``. Two handles on one store stand for two processes (the 8-process
runs are in ``test_store_contract_concurrency.py``); expiry is driven by an injected clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import support.store_contract as store_contract
from pydantic import ValidationError
from support.store_contract import StoreFactory, conversation, user

from sessions import (
    CompactionStrategy,
    Lease,
    SessionLeasedError,
    SessionNotFoundError,
    SessionStore,
    default_lease_owner,
    new_session_id,
)

store_factory = store_contract.store_factory


class ManualClock:
    """Moves a millisecond per reading (so writes stay ordered) and jumps when told."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def pair(store_factory: StoreFactory, clock: ManualClock) -> tuple[SessionStore, SessionStore]:
    """Two handles on one store (two writers), sharing one clock."""
    return store_factory.open(clock=clock), store_factory.open(clock=clock)


def started(store: SessionStore) -> str:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, conversation(2))
    return session.id


def test_a_lease_is_a_value_naming_its_holder(pair: tuple[SessionStore, SessionStore]) -> None:
    a, b = pair
    sid = started(a)
    lease = a.acquire_lease(sid[:8], owner="pid 1 on host a", ttl=20)
    assert isinstance(lease, Lease)
    assert (lease.session_id, lease.owner, lease.ttl) == (sid, "pid 1 on host a", 20)
    assert lease.expires_at.tzinfo is not None
    assert b.get_lease(sid) == lease
    with pytest.raises(ValidationError, match="frozen"):
        lease.token = "x"
    assert default_lease_owner().startswith("pid ")


def test_a_second_owner_is_refused_with_one_line_naming_the_holder(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    a, b = pair
    sid = started(a)
    lease = a.acquire_lease(sid, owner="pid 1234 on host x")
    with pytest.raises(SessionLeasedError) as caught:
        b.acquire_lease(sid, owner="pid 99 on host y")
    message = str(caught.value)
    assert "\n" not in message
    assert "pid 1234 on host x" in message and "in use" in message and sid[:8] in message
    assert caught.value.owner == "pid 1234 on host x"
    assert caught.value.expires_at == lease.expires_at
    assert b.get_lease(sid) == lease


def test_writes_without_the_lease_are_refused_and_leave_no_trace(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    a, b = pair
    sid = started(a)
    lease = a.acquire_lease(sid, owner="a")
    other = b.create_session(model="m", workspace="/w")
    other_lease = b.acquire_lease(other.id, owner="b")
    attempts: list[Callable[[], object]] = [
        lambda: b.append_messages(sid, [user("sneaked in")]),
        lambda: b.append_messages(sid, [user("wrong lease")], lease=other_lease),
        lambda: b.transition(sid, messages=conversation(1), strategy="x"),
        lambda: b.compact(sid, CompactionStrategy.sliding_window(2)),
        lambda: b.compact(sid, CompactionStrategy.NONE),
    ]
    for attempt in attempts:
        with pytest.raises(SessionLeasedError, match="in use by a"):
            attempt()
    assert b.get_session(sid).message_count == 2
    assert b.children(sid) == []
    assert b.compaction_history(sid) == []
    # The holder writes, from any handle: the lease is its token.
    a.append_messages(sid, [user("mine")], lease=lease)
    b.append_messages(sid, [user("mine too")], lease=lease)
    assert a.get_session(sid).message_count == 4


def test_an_expired_lease_is_taken_over_and_its_holder_is_then_refused(
    pair: tuple[SessionStore, SessionStore], clock: ManualClock
) -> None:
    a, b = pair
    sid = started(a)
    crashed = a.acquire_lease(sid, owner="crashed", ttl=30)
    clock.advance(29)
    with pytest.raises(SessionLeasedError):
        b.acquire_lease(sid, owner="successor")
    clock.advance(2)
    assert b.get_lease(sid) is None  # expired: nobody holds it now
    taken = b.acquire_lease(sid, owner="successor")
    assert taken.token != crashed.token
    with pytest.raises(SessionLeasedError, match="successor"):
        a.append_messages(sid, [user("late")], lease=crashed)
    with pytest.raises(SessionLeasedError, match="successor"):
        a.renew_lease(crashed)
    b.append_messages(sid, [user("continues")], lease=taken)
    assert [m.content[0]["text"] for m in a.get_messages(sid)][-1] == "continues"


def test_a_stale_lease_nobody_took_does_not_block_writes(
    pair: tuple[SessionStore, SessionStore], clock: ManualClock
) -> None:
    a, b = pair
    sid = started(a)
    a.acquire_lease(sid, owner="crashed", ttl=5)
    clock.advance(6)
    b.append_messages(sid, [user("after the crash")])
    assert b.get_session(sid).message_count == 3


def test_renew_extends_and_release_frees(
    pair: tuple[SessionStore, SessionStore], clock: ManualClock
) -> None:
    a, b = pair
    sid = started(a)
    lease = a.acquire_lease(sid, owner="a", ttl=10)
    clock.advance(8)
    renewed = a.renew_lease(lease)
    assert renewed.token == lease.token
    assert renewed.expires_at > lease.expires_at + timedelta(seconds=7)
    clock.advance(8)  # past the first expiry, within the renewed one
    with pytest.raises(SessionLeasedError):
        b.acquire_lease(sid, owner="b")
    a.release_lease(renewed)
    a.release_lease(renewed)  # already released: nothing happens
    assert a.get_lease(sid) is None
    with pytest.raises(SessionLeasedError, match="lost"):
        a.renew_lease(renewed)
    assert b.acquire_lease(sid, owner="b").owner == "b"


def test_the_same_owner_gets_a_fresh_lease(pair: tuple[SessionStore, SessionStore]) -> None:
    a, _ = pair
    sid = started(a)
    first = a.acquire_lease(sid, owner="me")
    second = a.acquire_lease(sid, owner="me")
    assert second.token != first.token
    assert a.get_lease(sid) == second


def test_a_transition_moves_the_lease_to_the_child(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    a, b = pair
    sid = started(a)
    lease = a.acquire_lease(sid, owner="a")
    child = a.transition(sid, messages=conversation(2), strategy="summarize", lease=lease)
    held = b.get_lease(child.id)
    assert held is not None and held.token == lease.token and held.owner == "a"
    assert b.get_lease(sid) is None
    assert a.renew_lease(lease).session_id == child.id
    a.append_messages(child.id, [user("next")], lease=lease)
    with pytest.raises(SessionLeasedError):
        b.append_messages(child.id, [user("other")])
    with pytest.raises(SessionLeasedError):
        b.acquire_lease(child.id, owner="b")
    # The seed's compact carries it along too.
    record = a.compact(sid, CompactionStrategy.sliding_window(2), lease=lease)
    assert record.session_id is not None
    assert a.renew_lease(lease).session_id == record.session_id


def test_leases_of_unknown_sessions_and_bad_arguments(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    with pytest.raises(SessionNotFoundError):
        store.acquire_lease(new_session_id(), owner="a")
    sid = started(store)
    for bad_ttl in (0, -1, True, "30"):
        with pytest.raises(ValueError):
            store.acquire_lease(sid, owner="a", ttl=bad_ttl)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.acquire_lease(sid, owner="")
    with pytest.raises(TypeError):
        store.append_messages(sid, [user("x")], lease="token")  # type: ignore[arg-type]
    assert store.get_lease(sid) is None


def test_the_handle_that_holds_a_lease_writes_under_it_by_default(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    a, b = pair
    sid = started(a)
    a.acquire_lease(sid, owner="a")
    a.append_messages(sid, [user("no lease passed")])
    child = a.transition(sid, messages=conversation(2), strategy="x")
    held = a.get_lease(child.id)
    assert held is not None and held.owner == "a"
    a.append_messages(child.id, [user("still mine")])
    record = a.compact(child.id, CompactionStrategy.NONE)
    assert record.compaction_count == 2
    with pytest.raises(SessionLeasedError):
        b.append_messages(child.id, [user("not b's")])
    a.release_lease(held)
    b.append_messages(child.id, [user("now b")])
    assert b.acquire_lease(child.id, owner="b").owner == "b"
    with pytest.raises(SessionLeasedError, match="in use by b"):
        a.append_messages(child.id, [user("a let it go")])
