"""A reply that thinks and is then cut by ``max_tokens`` outside a tool call: the test server
signs what comes back (a thinking block the reply never reached is not one it produced), so
the cut reply goes back unchanged and is accepted; the loop keeps it as it came, ends the turn
with a notice, and the next turns are accepted with the partial reply in their history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_api import FakeAnthropicServer, text_reply, tool_reply
from test_loop_stop_reasons import SONNET, _loop, _note_tool

from agentloop._loop.stop_reasons import cut_reply_line
from sessions import SqliteSessionStore

ROOM = 40
"""The model's output limit here: one thinking block (24 tokens) and a few words of text."""
LONG = " ".join(f"word{n}" for n in range(200))


def _cut_after_text() -> Any:
    """Thinking, a long text, then a call (its progress-update thinking before it): what
    ``ROOM`` cuts inside the text, the second thinking block and the call never reached."""
    return tool_reply(("note", {"text": "x"}), text=LONG)


def test_a_reply_cut_after_its_first_thinking_block_goes_back_unchanged(
    fake_api: FakeAnthropicServer,
) -> None:
    client = fake_api.client()
    fake_api.enqueue(_cut_after_text(), text_reply("the rest"))
    tools: list[Any] = [{"name": "note", "input_schema": {"type": "object"}}]
    first: list[Any] = [{"role": "user", "content": "explain"}]
    cut = client.messages.create(model=SONNET, max_tokens=ROOM, messages=first, tools=tools)
    assert cut.stop_reason == "max_tokens"
    kinds = [block.type for block in cut.content]
    assert kinds == ["thinking", "text"]  # the progress thinking and the call were cut off
    assert 0 < len(cut.content[1].text) < len(LONG)  # type: ignore[union-attr]
    sent_back = [block.model_dump(exclude_none=True) for block in cut.content]
    again: list[Any] = [
        *first,
        {"role": "assistant", "content": sent_back},
        {"role": "user", "content": "go on"},
    ]
    rest = client.messages.create(model=SONNET, max_tokens=ROOM, messages=again, tools=tools)
    assert rest.stop_reason == "end_turn"
    assert fake_api.refusals == [] and fake_api.violations == []


def test_the_loop_keeps_a_cut_reply_tells_the_user_and_goes_on(
    fake_api: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_api.add_model(SONNET, max_tokens=ROOM)  # what the Models API says the model writes
    store = SqliteSessionStore(tmp_path / "s.db")
    calls: list[dict[str, Any]] = []
    loop, heard = _loop(fake_api, store=store, tools=[_note_tool(calls)])
    fake_api.enqueue(_cut_after_text(), text_reply("the rest"), text_reply("done"))

    first = loop.run_turn("explain")
    assert first.stop_reason == "max_tokens" and calls == []  # the call was never reached
    assert first.text and first.text in LONG and len(first.text) < len(LONG)
    assert heard.warnings == [cut_reply_line(ROOM)]
    assert loop.run_turn("go on").text == "the rest"
    assert loop.run_turn("thanks").text == "done"

    # Every request accepted; each sent the cut reply back as the API gave it, on its own
    # between two user messages.
    assert fake_api.refusals == [] and fake_api.violations == []
    bodies = fake_api.message_requests
    assert [b["max_tokens"] for b in bodies] == [ROOM] * 3
    kept = bodies[1]["messages"][1]
    assert [b["type"] for b in kept["content"]] == ["thinking", "text"]
    assert kept["content"][1]["text"] == first.text
    for body in bodies[1:]:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]
        assert body["messages"][1] == kept
    # The store keeps the partial reply, thinking and all.
    stored = store.get_messages(loop.session_id)
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert stored[1].to_param()["content"] == kept["content"]  # thinking, partial text
    store.close()
