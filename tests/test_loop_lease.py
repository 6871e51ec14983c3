"""One writer per session through the loop: the lease is taken when the session is created,
carried by every write, moved to the child by a compaction, and refuses a second writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import AgentLoop, CompactionSettings, ConversationCompacter
from agentloop._adapters.records import from_record
from agentloop.testing import ScriptedModel, text_reply
from sessions import SessionLeasedError, open_store


def test_the_lease_follows_the_conversation_and_refuses_a_second_writer(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    first_store, second_store = open_store(path), open_store(path)
    model = ScriptedModel([text_reply("reply " + "words " * 60) for _ in range(8)])
    compacter = ConversationCompacter(
        model_name="m",
        context_window=200_000,
        model=model,
        settings=CompactionSettings(strategy="summarize"),
    )
    first = AgentLoop(model=model, model_name="m", compacter=compacter, store=first_store)
    first.lease_owner = "pid 1 on host a"
    first.run_turn("hello " + "words " * 60)
    lease = first.runtime.lease
    assert lease is not None and lease.session_id == first.session_id
    assert first_store.get_lease(first.session_id) is not None

    # A second process resuming the same session cannot take it, nor write to it.
    with pytest.raises(SessionLeasedError, match="pid 1 on host a"):
        second_store.acquire_lease(first.session_id, owner="pid 2 on host b")
    history = [from_record(r) for r in second_store.get_messages(first.session_id)]
    second = AgentLoop(
        model=ScriptedModel([text_reply("never stored")]),
        model_name="m",
        store=second_store,
        session_id=first.session_id,
        messages=history,
    )
    with pytest.raises(SessionLeasedError):
        second.run_turn("interleaving?")
    assert len(first_store.get_messages(first.session_id)) == 2  # nothing interleaved

    # A compaction moves the lease to the child: the writer goes on there. (Turns long enough
    # that the child, which carries the ledger and the latest request, is smaller.)
    for n in range(3):
        first.run_turn(f"more {n} " + "words " * 300)
    outcome = first.compact()
    assert outcome is not None and outcome.transition is not None
    child = outcome.transition.new_session_id
    renewed = first_store.renew_lease(lease)
    assert renewed.session_id == child
    first.run_turn("after the compaction")
    assert len(first_store.get_messages(child)) == len(outcome.transition.compacted_messages) + 2

    first_store.release_lease(renewed)
    assert second_store.get_lease(child) is None
    first_store.close()
    second_store.close()
