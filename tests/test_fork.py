"""Undo a compaction by forking its uncompacted parent: a new branch, the child left as it was."""

from __future__ import annotations

from pathlib import Path

from agentloop import AgentLoop, CompactionSettings, ConversationCompacter
from agentloop._adapters.records import fork_session, from_record
from agentloop.testing import ScriptedModel, text_reply
from sessions import open_store


def test_forking_the_parent_undoes_a_compaction_and_keeps_the_child(tmp_path: Path) -> None:
    store = open_store(tmp_path / "sessions.db")
    model = ScriptedModel([text_reply(f"answer {n} " + "detail " * 80) for n in range(5)])
    compacter = ConversationCompacter(
        model_name="m",
        context_window=200_000,
        model=model,
        settings=CompactionSettings(strategy="summarize"),
    )
    loop = AgentLoop(model=model, model_name="m", compacter=compacter, store=store)
    for n in range(5):
        loop.run_turn(f"request {n} " + "words " * 80)
    parent = loop.session_id
    parent_messages = [m.to_param() for m in store.get_messages(parent)]
    outcome = loop.compact()
    assert outcome is not None and outcome.transition is not None
    child = outcome.transition.new_session_id
    child_messages = [m.to_param() for m in store.get_messages(child)]

    fork = fork_session(store, parent)

    assert store.get_session(fork).parent_id == parent
    assert [m.to_param() for m in store.get_messages(fork)] == parent_messages  # exact history
    assert [m.to_param() for m in store.get_messages(child)] == child_messages  # untouched
    assert {s.id for s in store.children(parent)} == {child, fork}
    # Resuming the lineage continues at the most recently active leaf: the fork.
    assert store.newest_descendant(parent).id == fork
    # The fork continues like any session, from the uncompacted history.
    resumed = [from_record(r) for r in store.get_messages(fork)]
    model.add(text_reply("back on the full history"))
    again = AgentLoop(model=model, model_name="m", store=store, session_id=fork, messages=resumed)
    assert again.run_turn("go on").text == "back on the full history"
    assert len(store.get_messages(fork)) == len(parent_messages) + 2
    store.close()
