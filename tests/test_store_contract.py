"""The store contract: what every ``SessionStore`` backend does, written once against the protocol.

Runs against every backend in ``store_contract.BACKENDS`` through the ``store_factory`` fixture.
The seed's ``compact`` is pinned in ``test_store_contract_compact.py``.
Backend-specific behaviour (files, modes, SQL plans, crashes) lives in ``test_sessions_*.py``.
"""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import support.store_contract as store_contract
from support.store_contract import (
    InjectedFault,
    StoreFactory,
    assistant,
    chain,
    conversation,
    snapshot,
    user,
)

from sessions import (
    AmbiguousSessionIdError,
    CompactionStrategy,
    InvalidSessionIdError,
    NewMessage,
    SessionCompactedError,
    SessionError,
    SessionNotFoundError,
    SessionStore,
    StoreError,
    new_session_id,
)

SLIDING = CompactionStrategy.sliding_window


# The fixtures are defined once, beside the backends; binding them here registers them.
store_factory = store_contract.store_factory
store = store_contract.store


# ------------------------------------------------------------------ sessions and ids


def test_create_and_get(store: SessionStore) -> None:
    created = store.create_session(
        model="claude-sonnet-5-5", workspace="/work/app", title="fix the parser", metadata={"a": 1}
    )
    got = store.get_session(created.id)
    assert got == created
    assert got.parent_id is None
    assert got.status == "active"
    assert got.message_count == 0
    assert got.metadata == {"a": 1}
    assert got.created_at.tzinfo is not None
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.updated_at == got.created_at


def test_create_with_an_id_allocated_first(store: SessionStore) -> None:
    wanted = new_session_id()
    created = store.create_session(model="m", workspace="/w", session_id=wanted.upper())
    assert created.id == wanted
    assert store.get_session(wanted) == created
    before = store.list_sessions(limit=None)
    with pytest.raises(InvalidSessionIdError, match="taken") as caught:
        store.create_session(model="other", workspace="/x", session_id=wanted)
    assert "\n" not in str(caught.value)
    for bad in ("../evil", wanted[:10], ""):
        with pytest.raises(InvalidSessionIdError):
            store.create_session(model="m", workspace="/w", session_id=bad)
    assert store.list_sessions(limit=None) == before
    assert store.get_session(wanted).model == "m"


def test_append_round_trips_content_exactly(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": 'héllo ✓ \u0000 "quoted"', "cache_control": {"type": "ephemeral"}},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "edit",
            "input": {"path": "a.py", "n": [1, 2.5, None, True]},
        },
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
    ]
    written = store.append_messages(
        session.id,
        [
            user("hi", token_estimate=3, metadata={"pinned": True}),
            NewMessage(
                role="assistant",
                content=blocks,
                usage={"input_tokens": 10, "output_tokens": 5},
                token_estimate=40,
            ),
        ],
    )
    assert [m.seq for m in written] == [0, 1]
    read = store.get_messages(session.id)
    assert read == written
    assert read[1].content == blocks
    assert read[1].usage == {"input_tokens": 10, "output_tokens": 5}
    assert read[0].metadata == {"pinned": True}
    assert read[0].token_estimate == 3
    assert read[1].to_param() == {"role": "assistant", "content": blocks}


def test_a_bare_string_becomes_one_text_block(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    message = NewMessage.model_validate({"role": "user", "content": "hello"})
    store.append_messages(session.id, [message])
    assert store.get_messages(session.id)[0].content == [{"type": "text", "text": "hello"}]


def test_append_keeps_count_and_updated_at_on_the_session(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, [user("a"), assistant("b")])
    store.append_messages(session.id, [user("c")])
    after = store.get_session(session.id)
    assert after.message_count == 3
    assert after.updated_at > session.updated_at
    assert [m.seq for m in store.get_messages(session.id)] == [0, 1, 2]
    assert [m.content[0]["text"] for m in store.get_messages(session.id)] == ["a", "b", "c"]


def test_append_keeps_given_created_at(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    when = datetime(2024, 12, 24, 18, 0, tzinfo=UTC)
    store.append_messages(session.id, [user("a", created_at=when)])
    assert store.get_messages(session.id)[0].created_at == when


def test_append_to_unknown_or_invalid_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError):
        store.append_messages(new_session_id(), [user("a")])
    with pytest.raises(InvalidSessionIdError):
        store.append_messages("../x", [user("a")])


def test_update_session_changes_only_what_is_given(store: SessionStore) -> None:
    session = store.create_session(
        model="m", workspace="/w", title="old", metadata={"a": 1, "b": 2}
    )
    updated = store.update_session(session.id, metadata={"b": None, "c": 3})
    assert updated.metadata == {"a": 1, "c": 3}
    assert updated.title == "old"
    assert store.update_session(session.id, title="new").title == "new"
    assert store.update_session(session.id, title=None).title is None
    assert store.update_session(session.id, status="compacted").status == "compacted"
    with pytest.raises(ValueError):
        store.update_session(session.id, status="deleted")  # type: ignore[arg-type]
    assert store.get_session(session.id).metadata == {"a": 1, "c": 3}


def test_list_is_newest_first_and_filters_by_workspace(store: SessionStore) -> None:
    first = store.create_session(model="m", workspace="/a")
    second = store.create_session(model="m", workspace="/b")
    third = store.create_session(model="m", workspace="/a")
    assert [s.id for s in store.list_sessions()] == [third.id, second.id, first.id]
    assert [s.id for s in store.list_sessions(workspace="/a")] == [third.id, first.id]
    # Activity moves a session to the top.
    store.append_messages(first.id, [user("back again")])
    assert [s.id for s in store.list_sessions(workspace="/a")] == [first.id, third.id]
    assert [s.id for s in store.list_sessions(limit=1, offset=1)] == [third.id]
    assert store.list_sessions(limit=0) == []
    assert len(store.list_sessions(limit=None)) == 3
    assert store.list_sessions(workspace="/nowhere") == []
    assert store.count_sessions() == 3
    assert store.count_sessions(workspace="/a") == 2
    for bad in (-1, True):
        with pytest.raises(ValueError):
            store.list_sessions(limit=bad)
        with pytest.raises(ValueError):
            store.list_sessions(offset=bad)


def test_prefixes_resolve_and_ambiguity_lists_candidates(store: SessionStore) -> None:
    shared = new_session_id()[:6]
    ids = [
        store.create_session(model="m", workspace="/w", session_id=shared + new_session_id()[6:]).id
        for _ in range(3)
    ]
    with pytest.raises(AmbiguousSessionIdError) as caught:
        store.get_session(shared)
    message = str(caught.value)
    assert "\n" not in message
    assert all(i[:8] in message for i in ids)
    assert sorted(caught.value.candidates) == sorted(ids)
    for session_id in ids:
        assert store.resolve_id(session_id) == session_id
        assert store.get_session(session_id.upper()).id == session_id
        # A unique prefix (long enough to tell the three apart) resolves.
        assert store.resolve_id(session_id[:20]) == session_id


def test_new_ids_made_in_the_same_second_list_by_creation_time(store_factory: StoreFactory) -> None:
    frozen = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    ticks = iter(range(1000))
    store = store_factory.open(clock=lambda: frozen + timedelta(microseconds=next(ticks)))
    made = [store.create_session(model="m", workspace="/w").id for _ in range(20)]
    assert [s.id for s in store.list_sessions(limit=None)] == made[::-1]
    # What the UI shows is random, so ids made together differ in their first characters.
    assert len({i[:4] for i in made}) >= 18


def test_unknown_and_bad_ids_raise_one_line_errors(store: SessionStore) -> None:
    for ref, error in (
        (new_session_id(), SessionNotFoundError),
        ("zzzz", SessionNotFoundError),
        ("../x", InvalidSessionIdError),
        ("", InvalidSessionIdError),
        ("a b c d", InvalidSessionIdError),
        ("abc", InvalidSessionIdError),
    ):
        with pytest.raises(error) as caught:
            store.get_session(ref)
        assert "\n" not in str(caught.value)
        assert isinstance(caught.value, SessionError)


def test_closed_store_refuses_work(store_factory: StoreFactory) -> None:
    with store_factory.open() as store:
        session = store.create_session(model="m", workspace="/w")
    with pytest.raises(StoreError, match="closed"):
        store.get_session(session.id)
    store.close()  # idempotent


def test_threads_share_one_store(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    start = threading.Barrier(4)

    def work(worker: int) -> None:
        start.wait()
        for n in range(25):
            store.append_messages(session.id, [user(f"{worker}:{n}")])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = store.get_messages(session.id)
    assert [m.seq for m in messages] == list(range(100))
    for worker in range(4):
        mine = [
            m.content[0]["text"] for m in messages if m.content[0]["text"].startswith(f"{worker}:")
        ]
        assert mine == [f"{worker}:{n}" for n in range(25)]


# ------------------------------------------------------------------ lineage and transitions


def test_transition_creates_the_child_and_keeps_the_parent(store: SessionStore) -> None:
    parent = store.create_session(
        model="claude-x", workspace="/repo", title="refactor", metadata={"system": "abc", "n": 1}
    )
    store.append_messages(parent.id, conversation(6))
    before = store.get_messages(parent.id)
    kept = [user("summary of the work"), assistant("ok")]
    child = store.transition(
        parent.id,
        messages=kept,
        strategy="summarize",
        tokens_before=152_310,
        tokens_after=18_204,
        summary="summary of the work",
        metadata={"n": 2, "system": None},
    )
    assert child.parent_id == parent.id
    assert (child.model, child.workspace, child.title) == ("claude-x", "/repo", "refactor")
    assert child.status == "active"
    assert child.message_count == 2
    assert child.metadata == {"n": 2}
    assert [m.to_param() for m in store.get_messages(child.id)] == [m.to_param() for m in kept]
    after_parent = store.get_session(parent.id)
    assert after_parent.status == "compacted"
    assert after_parent.message_count == 6
    assert store.get_messages(parent.id) == before
    [entry] = store.compaction_history(child.id)
    assert (entry.parent_id, entry.child_id, entry.strategy) == (parent.id, child.id, "summarize")
    assert (entry.messages_before, entry.messages_after) == (6, 2)
    assert (entry.tokens_before, entry.tokens_after) == (152_310, 18_204)
    assert entry.summary == "summary of the work"


def test_a_transition_that_fails_midway_leaves_no_trace(
    store_factory: StoreFactory, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = store.create_session(model="m", workspace="/w")
    store.append_messages(parent.id, conversation(6))
    before = snapshot(store, parent.id)
    store_factory.fail_inside_transitions(monkeypatch)
    with pytest.raises(InjectedFault):
        store.transition(parent.id, messages=conversation(2), strategy="x")
    # The seed layer goes through the same primitive, so it is just as atomic.
    for strategy in (SLIDING(2), CompactionStrategy.NONE):
        with pytest.raises(InjectedFault):
            store.compact(parent.id, strategy)
    with pytest.raises(InjectedFault):
        store.compact(parent.id, CompactionStrategy.SUMMARIZE, summary="s")
    monkeypatch.undo()
    assert snapshot(store, parent.id) == before
    assert store.get_session(parent.id).status == "active"
    store.append_messages(parent.id, [user("still writable")])


def test_transition_with_a_chosen_child_id(store: SessionStore) -> None:
    parent = store.create_session(model="m", workspace="/w")
    wanted = new_session_id()
    child = store.transition(parent.id, messages=[], strategy="x", child_id=wanted.upper())
    assert child.id == wanted
    with pytest.raises(InvalidSessionIdError, match="taken"):
        store.transition(child.id, messages=[], strategy="x", child_id=wanted)
    with pytest.raises(InvalidSessionIdError):
        store.transition(child.id, messages=[], strategy="x", child_id="../evil")
    assert store.children(child.id) == []


def test_messages_before_defaults_to_the_parent_count(store: SessionStore) -> None:
    parent = store.create_session(model="m", workspace="/w")
    store.append_messages(parent.id, conversation(7))
    child = store.transition(parent.id, messages=conversation(1), strategy="x", messages_before=5)
    grandchild = store.transition(child.id, messages=conversation(1), strategy="x")
    history = store.compaction_history(grandchild.id)
    assert [e.messages_before for e in history] == [5, 1]


def test_appending_to_a_compacted_session_names_where_it_continues(store: SessionStore) -> None:
    sessions = chain(store, 3)
    with pytest.raises(SessionCompactedError) as caught:
        store.append_messages(sessions[0].id, conversation(1))
    assert caught.value.continue_in == sessions[-1].id
    assert sessions[-1].id[:8] in str(caught.value)
    assert store.get_session(sessions[0].id).message_count == 4


def test_children_and_ancestors(store: SessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    fork = store.create_session(model="m", workspace="/w", parent_id=root.id[:10])
    assert fork.parent_id == root.id
    assert store.get_session(root.id).status == "compacted"  # the fork does not change it
    assert [s.id for s in store.children(root.id)] == [child.id, fork.id]
    assert [s.id for s in store.ancestors(grandchild.id)] == [child.id, root.id]
    assert store.ancestors(root.id) == []


def test_newest_descendant_of_a_chain_is_its_last_child(store: SessionStore) -> None:
    sessions = chain(store, 10)
    for session in sessions:
        assert store.newest_descendant(session.id).id == sessions[-1].id


def test_newest_descendant_of_a_lone_session_is_itself(store: SessionStore) -> None:
    lone = store.create_session(model="m", workspace="/w")
    assert store.newest_descendant(lone.id).id == lone.id


def test_newest_descendant_follows_the_most_recently_updated_leaf(store: SessionStore) -> None:
    root = store.create_session(model="m", workspace="/w")
    first = store.transition(root.id, messages=conversation(1), strategy="x")
    second = store.transition(root.id, messages=conversation(1), strategy="x")  # a fork
    assert store.newest_descendant(root.id).id == second.id
    store.append_messages(first.id, [assistant("more")])
    assert store.newest_descendant(root.id).id == first.id
    # Compacting the older branch moves resume to its new leaf.
    deeper = store.transition(second.id, messages=conversation(1), strategy="x")
    assert store.newest_descendant(root.id).id == deeper.id
    assert store.newest_descendant(first.id).id == first.id


def test_lineage_from_any_member(store: SessionStore) -> None:
    root, child, grandchild = chain(store, 3)
    fork = store.transition(root.id, messages=conversation(1), strategy="x")
    other = store.create_session(model="m", workspace="/w")
    expected = [root.id, child.id, grandchild.id, fork.id]
    for member in (root, child, grandchild, fork):
        assert [s.id for s in store.lineage(member.id)] == expected
    assert [s.id for s in store.lineage(other.id)] == [other.id]


def test_history_covers_the_lineage_oldest_first(store: SessionStore) -> None:
    sessions = chain(store, 4)
    unrelated = chain(store, 2)
    for member in sessions:
        history = store.compaction_history(member.id)
        assert [(e.parent_id, e.child_id) for e in history] == [
            (a.id, b.id) for a, b in itertools.pairwise(sessions)
        ]
    assert len(store.compaction_history(unrelated[0].id)) == 1
    record = store.get_compaction_record(sessions[1].id)
    assert record.compaction_count == 3
    assert record.session_id == sessions[-1].id
    assert record.last_compacted_at == store.compaction_history(sessions[0].id)[-1].created_at
