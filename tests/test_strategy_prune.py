"""Strategy ``prune`` (and ``auto``'s first step) on a history the API's summary opens: the
signed block is never edited; the preserved state goes after the newest user turn instead."""

from __future__ import annotations

from support.histories import CharCounter

from agentloop import CompactionSettings, ConversationCompacter, Message
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.values.messages import validate_messages
from agentloop.testing import ScriptedModel, tool_call

BLOCK = {"type": "compaction", "content": "what came before", "signature": "sig-1"}


def opened_by_the_block(*, ends_with_reply: bool) -> list[Message]:
    out = [Message("assistant", (dict(BLOCK),))]
    for n in range(6):
        call = tool_call("read", {"n": n}, call_id=f"toolu_{n:04d}")
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "x" * 4_000}
        out += [
            Message.user(f"request {n}"),
            Message.assistant([call]),
            Message.user([result]),
            Message.assistant(f"answer {n}"),
        ]
    return out if ends_with_reply else [*out, Message.user("the newest request")]


def compacter() -> ConversationCompacter:
    return ConversationCompacter(
        model_name="claude-sonnet-5-5",
        context_window=20_000,
        model=ScriptedModel(),
        max_output_tokens=500,
        settings=CompactionSettings(strategy="prune", prepare_at=None),
        counter=CharCounter(),
        hooks=[PreservedStateHook("todos", lambda: "- [ ] ship the fix")],
    )


def test_the_block_stays_verbatim_and_the_state_follows_the_newest_user_turn() -> None:
    history = opened_by_the_block(ends_with_reply=False)
    transition = compacter().compact_and_transition("p", history, force=True)
    assert transition is not None and transition.summary.strategy == "prune"
    child = transition.compacted_messages
    assert child[0] == history[0] and child[0].is_compaction_only  # the signed block, as it was
    assert child[-2] == history[-1]
    assert child[-1].role == "system" and "ship the fix" in child[-1].text
    validate_messages(child, allow_pending_tool_use=False)


def test_between_turns_the_state_waits_for_the_next_user_message() -> None:
    c = compacter()
    history = opened_by_the_block(ends_with_reply=True)
    transition = c.compact_and_transition("p", history, force=True)
    assert transition is not None
    assert transition.compacted_messages[-1].role == "assistant"
    new = Message.user("next")
    placed = c.carried(new)
    assert placed[0] is new and "ship the fix" in placed[1].text
