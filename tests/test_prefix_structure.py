"""The compaction prefix is kept as structure: its text is written from a ``SummaryInfo`` for the
API, and a history handed back as API dicts brings the structure back without reading the text.
Only a history saved as plain JSON (which lost it) is read back from the text."""

from __future__ import annotations

import json
from typing import Any

from agentloop import Message, as_messages, to_params
from agentloop._core.cutting.prefix import REQUEST_HEADING, build_prefix, render_prefix


def _tricky_prefix() -> Message:
    """A prefix its text cannot give back whole: the pinned reply called a tool (the text
    carries the call as a line), and the summary quotes the prefix's own markers."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    pinned = Message("assistant", ({"type": "text", "text": "Reading it."}, call), pinned=True)
    return build_prefix(
        "## Goal\nquote the format\n</summary>\n[pinned user message]\nstill the summary",
        pinned=[pinned],
        request=Message.user("Rename the helpers."),
        state="todo: nothing",
        replaced_count=12,
    )


def test_the_prefix_blocks_are_written_from_its_structure() -> None:
    prefix = _tricky_prefix()
    assert prefix.summary is not None
    assert prefix.content == render_prefix(prefix.summary, "todo: nothing")


def test_a_prefix_handed_back_as_dicts_keeps_its_structure() -> None:
    prefix = _tricky_prefix()
    params = to_params([prefix, Message.assistant("Done.")])
    back = as_messages(params)[0]
    assert back.summary is not None and back.summary is prefix.summary
    # The pinned reply keeps its tool call: no text reading could give it back.
    assert back.summary.pinned[0].tool_use_ids == ["toolu_1"]
    # Read from its text, the same prefix is misread: the structure is what makes it right.
    reread = as_messages(json.loads(json.dumps(params)))[0].summary
    assert reread is not None and reread != prefix.summary
    # Kept through another to_params (a caller normalizing its history), too.
    assert as_messages(to_params(params))[0].summary is prefix.summary


def test_on_the_wire_the_prefix_is_the_api_shape_only() -> None:
    prefix = _tricky_prefix()
    (param,) = to_params([prefix])
    wire: dict[str, Any] = json.loads(json.dumps(param))
    assert wire == {"role": "user", "content": [dict(block) for block in prefix.content]}
    assert param == wire


def test_a_history_saved_as_json_by_an_older_version_is_still_read() -> None:
    """Plain dicts as an earlier agentloop wrote them (its intro had one sentence less)."""
    saved = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "This conversation was compacted to fit the context window: the 5 "
                    "earlier messages were replaced by the summary below.\n\n<summary>\n"
                    "## Goal\nship it\n</summary>",
                },
                {"type": "text", "text": "Pinned messages, kept verbatim:"},
                {"type": "text", "text": "[pinned user message]"},
                {"type": "text", "text": "Always run the tests."},
                {"type": "text", "text": REQUEST_HEADING},
                {"type": "text", "text": "Rename the helpers."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "On it."}]},
    ]
    info = as_messages(saved)[0].summary
    assert info is not None
    assert (info.text, info.replaced_count) == ("## Goal\nship it", 5)
    assert [(m.role, m.text) for m in info.pinned] == [("user", "Always run the tests.")]
    assert info.request is not None and info.request.text == "Rename the helpers."


def test_a_message_like_a_prefix_elsewhere_than_first_is_not_one() -> None:
    prefix = _tricky_prefix()
    params = to_params([Message.user("hi"), Message.assistant("hello"), prefix])
    assert [m.summary for m in as_messages(params)] == [None, None, None]
