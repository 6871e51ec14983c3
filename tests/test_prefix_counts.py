"""The compacted context and the compaction notice speak of the same messages: the
prefix names the parent session's message count, the figure the notice shows, and says how many
original messages it stands for in all only when earlier compactions add to them."""

from __future__ import annotations

import json

from agentloop import CompactionSettings, ConversationCompacter, Message, as_messages, to_params
from agentloop.testing import ScriptedModel


def _history(turns: int, start: int = 0) -> list[Message]:
    messages: list[Message] = []
    for n in range(start, start + turns):
        messages.append(Message.user(f"Step {n}: rename the helper in module_{n}.py. " * 12))
        messages.append(Message.assistant(f"Renamed it in module_{n}.py; tests pass. " * 12))
    return messages


def test_the_prefix_names_the_notices_figure_then_the_total_across_compactions() -> None:
    compacter = ConversationCompacter(
        model_name="m",
        context_window=3_000,
        model=ScriptedModel(),
        settings=CompactionSettings(strategy="summarize"),
    )
    first = compacter.compact_and_transition("s1", _history(12))
    assert first is not None
    parent = first.summary.original_message_count  # the notice's "N messages → new session"
    info = first.compacted_messages[0].summary
    assert info is not None and info.parent_count == parent == 24
    intro = first.compacted_messages[0].text
    assert f"the earliest {info.replaced_here} of the parent session's {parent} messages" in intro
    assert "in all" not in intro  # nothing earlier to add

    again = [*first.compacted_messages, *_history(12, start=100)]
    second = compacter.compact_and_transition(first.new_session_id, again)
    assert second is not None
    info2 = second.compacted_messages[0].summary
    assert info2 is not None and info2.parent_count == second.summary.original_message_count
    assert info2.replaced_count > info2.replaced_here  # the first compaction's messages too
    intro2 = second.compacted_messages[0].text
    assert f"of the parent session's {len(again)} messages" in intro2
    assert f"({info2.replaced_count} original messages in all" in intro2

    # Saved as plain JSON (the structure lost), the counts come back from the text.
    reread = as_messages(json.loads(json.dumps(to_params(second.compacted_messages))))[0]
    assert reread.summary is not None
    assert (reread.summary.replaced_count, reread.summary.replaced_here) == (
        info2.replaced_count,
        info2.replaced_here,
    )
    assert reread.summary.parent_count == len(again)
