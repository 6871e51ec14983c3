"""The fake API's thinking, through the real SDK over HTTP:
5.x replies think by default with signed blocks bound to their prefix, thinking counts as
output and against ``max_tokens``, and thinking sent back is checked as the API checks it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    BINDING_BETA,
    FakeAnthropicServer,
    Reply,
    read_signature,
    text_reply,
    tool_reply,
)

SONNET = "claude-sonnet-5-5"
TOOLS: Any = [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
    {"name": "grep", "description": "Search", "input_schema": {"type": "object"}},
]
SYSTEM = "You are a careful coding agent."
BOUND = "The block is bound to a different conversation."
HEADER = "That setting requires the `thinking-binding-controls-2026-08-01` value"
DROP: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


class Talk:
    """A conversation driven through the SDK: each reply appended as returned."""

    def __init__(self, server: FakeAnthropicServer, model: str = SONNET) -> None:
        self.server = server
        self.client = server.client()
        self.model = model
        self.system = SYSTEM
        self.tools: list[Any] = list(TOOLS)
        self.messages: list[Any] = []

    def body(self, **options: Any) -> dict[str, Any]:
        body = {
            "model": self.model,
            "max_tokens": 2000,
            "system": self.system,
            "tools": self.tools,
            "messages": self.messages,
        }
        body.update(options)
        return body

    def send(self, *, betas: list[str] | None = None, **options: Any) -> Any:
        body = self.body(**options)
        if betas:
            return self.client.beta.messages.create(betas=betas, **body)
        return self.client.messages.create(**body)

    def turn(self, reply: Reply, text: str | None = None, **options: Any) -> Any:
        """Append a user text (or the results of the last tool calls), get ``reply``."""
        if text is not None:
            self.messages.append({"role": "user", "content": text})
        else:
            calls = [b for b in self.messages[-1]["content"] if b["type"] == "tool_use"]
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c["id"], "content": "ok"}
                        for c in calls
                    ],
                }
            )
        self.server.enqueue(reply)
        message = self.send(**options)
        self.messages.append(
            {"role": "assistant", "content": [b.to_dict() for b in message.content]}
        )
        return message

    def refused(self, **options: Any) -> str:
        """The message of the 400 the next request gets (expected by the test)."""
        self.server.expect_refusals()
        with pytest.raises(anthropic.BadRequestError) as caught:
            self.send(**options)
        body = caught.value.body
        assert isinstance(body, dict)
        return str(body["error"]["message"])


def thinking_paths(messages: list[Any]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, m in enumerate(messages)
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if b["type"] == "thinking"
    ]


def three_turns(server: FakeAnthropicServer) -> Talk:
    """user, assistant(thinking, text, thinking, tool_use), results, assistant, user, assistant."""
    talk = Talk(server)
    talk.turn(tool_reply(("read", {"path": "a.py"}), text="Reading a.py."), "Fix a.py")
    talk.turn(text_reply("a.py is fixed."))
    talk.turn(text_reply("Nothing else to do."), "Anything else?")
    talk.messages.append({"role": "user", "content": "Thanks"})
    return talk


# ---------------------------------------------------------------------------------------------
# Replies think


def test_a_55_reply_begins_with_an_empty_signed_thinking_block(server: FakeAnthropicServer) -> None:
    talk = Talk(server)
    message = talk.turn(text_reply("Hello."), "Hi")
    first = message.content[0]
    assert first.type == "thinking" and first.thinking == ""
    payload = read_signature(first.signature)
    assert payload is not None
    assert payload["model"] == "sonnet-5-5" and payload["acct"] == server.account
    assert payload["prev"] is None
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert server.violations == []


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-5-5", "claude-fable-5-1"])
def test_every_5x_model_thinks_by_default(server: FakeAnthropicServer, model: str) -> None:
    server.add_model(model)
    message = Talk(server, model).turn(text_reply("Hello."), "Hi")
    assert message.content[0].type == "thinking"


def test_a_4x_model_thinks_only_when_asked(server: FakeAnthropicServer) -> None:
    talk = Talk(server, "claude-sonnet-4-6")
    assert [b.type for b in talk.turn(text_reply("A."), "Hi").content] == ["text"]
    adaptive: Any = {"type": "adaptive"}
    message = talk.turn(text_reply("B."), "Again", thinking=adaptive)
    assert [b.type for b in message.content] == ["thinking", "text"]


def test_summarized_display_returns_text_and_progress_updates_precede_tool_calls(
    server: FakeAnthropicServer,
) -> None:
    talk = Talk(server)
    reply = tool_reply(("read", {"path": "a.py"}), ("grep", {"q": "x"}), thinking="Plan: read.")
    summarized: Any = {"type": "adaptive", "display": "summarized"}
    message = talk.turn(reply, "Look", thinking=summarized)
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "thinking", "tool_use", "thinking", "tool_use"]
    assert message.content[0].thinking == "Plan: read."
    assert message.content[1].thinking == "Next: read." and message.content[3].thinking
    ids = [read_signature(b.signature) for b in message.content if b.type == "thinking"]
    assert [p["seq"] for p in ids if p] == [0, 1, 2]
    # Each block records the one before it.
    assert ids[1] is not None and ids[0] is not None and ids[1]["prev"] == ids[0]["id"]


def test_scripted_replies_can_opt_out_or_bring_their_own_thinking(
    server: FakeAnthropicServer,
) -> None:
    talk = Talk(server)
    assert [b.type for b in talk.turn(text_reply("x", thinking=False), "a").content] == ["text"]
    own = {"type": "thinking", "thinking": "mine"}
    message = talk.turn(Reply(content=(own, {"type": "text", "text": "x"})), "b")
    assert message.content[0].thinking == "mine"
    assert read_signature(message.content[0].signature) is not None  # signed by the server
    talk.turn(text_reply("fine"), "c")
    assert server.violations == []


def test_thinking_counts_as_output(server: FakeAnthropicServer) -> None:
    server.thinking_tokens = 100
    talk = Talk(server)
    plain = talk.turn(tool_reply(("read", {}), thinking=False), "a").usage.output_tokens
    talk.turn(text_reply("ok", thinking=False))
    thinking = talk.turn(tool_reply(("read", {})), "a").usage.output_tokens
    assert thinking == plain + 2 * 100  # the leading block and the progress update


def test_thinking_counts_against_max_tokens(server: FakeAnthropicServer) -> None:
    server.thinking_tokens = 50
    talk = Talk(server)
    message = talk.turn(text_reply("word " * 100), "Hi", max_tokens=40)
    assert message.stop_reason == "max_tokens"
    assert [b.type for b in message.content] == ["thinking"]  # thought, no room for text
    assert message.usage.output_tokens == 40
    cut = talk.turn(text_reply("word " * 100), "Again", max_tokens=70)
    assert cut.stop_reason == "max_tokens" and [b.type for b in cut.content] == ["thinking", "text"]
    assert 0 < len(cut.content[1].text) < len("word " * 100)


def test_max_tokens_can_cut_a_tool_call(server: FakeAnthropicServer) -> None:
    server.thinking_tokens = 20
    talk = Talk(server)
    big = {"text": "x " * 400}
    message = talk.turn(tool_reply(("read", big)), "Hi", max_tokens=60)
    assert message.stop_reason == "max_tokens"
    assert message.content[-1].type == "tool_use" and message.content[-1].input == {}


def test_thinking_sent_back_is_billed_by_its_hidden_figure(server: FakeAnthropicServer) -> None:
    server.thinking_tokens = 300
    talk = Talk(server)
    talk.turn(text_reply("Hello."), "Hi")
    talk.messages.append({"role": "user", "content": "more"})
    kept = talk.client.messages.count_tokens(**_count(talk.body()))
    stripped = copy.deepcopy(talk.body())
    stripped["messages"][1]["content"] = stripped["messages"][1]["content"][1:]
    without = talk.client.messages.count_tokens(**_count(stripped))
    assert kept.input_tokens - without.input_tokens == 300


def _count(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "max_tokens"}


# ---------------------------------------------------------------------------------------------
# Thinking sent back


def test_a_tool_loop_sent_back_as_returned_is_accepted(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    server.enqueue(text_reply("You're welcome."))
    talk.send()
    assert server.violations == [] and server.refusals == []


def test_an_altered_signature_is_a_plain_400_even_with_drop_block(
    server: FakeAnthropicServer,
) -> None:
    talk = three_turns(server)
    block = talk.messages[1]["content"][0]
    block["signature"] = block["signature"][:-4] + "AAAA"
    message = talk.refused(betas=[BINDING_BETA], thinking=DROP)
    assert message == "messages.1.content.0: Invalid `signature` in `thinking` block."
    assert server.violations == [] and len(server.refusals) == 1


def test_a_foreign_signature_is_invalid_on_a_prefix_check_model(
    server: FakeAnthropicServer,
) -> None:
    talk = three_turns(server)
    talk.messages[1]["content"][0]["signature"] = "sig-from-elsewhere"
    assert "Invalid `signature`" in talk.refused() and BOUND not in talk.refused()


def test_the_latest_assistant_turn_cannot_lose_part_of_its_thinking(
    server: FakeAnthropicServer,
) -> None:
    talk = Talk(server)
    talk.turn(tool_reply(("read", {}), ("grep", {})), "Go")
    talk.messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
        for b in talk.messages[-1]["content"] if b["type"] == "tool_use"
    ]})  # fmt: skip
    latest = talk.messages[1]["content"]
    del latest[3]  # the second progress update
    message = talk.refused()
    assert message.startswith("messages.1.content.0: `thinking` or `redacted_thinking` blocks in")
    assert "cannot be modified" in message


def test_the_latest_assistant_turn_cannot_reorder_or_edit_its_thinking(
    server: FakeAnthropicServer,
) -> None:
    talk = Talk(server)
    summarized: Any = {"type": "adaptive", "display": "summarized"}
    talk.turn(tool_reply(("read", {})), "Go", thinking=summarized)
    talk.messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": talk.messages[-1]["content"][-1]["id"],
         "content": "ok"}
    ]})  # fmt: skip
    edited = copy.deepcopy(talk.messages)
    edited[1]["content"][0]["thinking"] = "something else"
    assert "cannot be modified" in talk.refused(messages=edited, thinking=summarized)
    swapped = copy.deepcopy(talk.messages)
    blocks = swapped[1]["content"]
    blocks[0], blocks[1] = blocks[1], blocks[0]
    assert "cannot be modified" in talk.refused(messages=swapped, thinking=summarized)


def test_all_of_the_latest_turns_thinking_may_go(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    talk.messages[-2]["content"] = [b for b in talk.messages[-2]["content"] if b["type"] == "text"]
    server.enqueue(text_reply("ok"))
    talk.send()
    assert server.violations == []


def test_an_omitted_blocks_text_is_ignored(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    talk.messages[-2]["content"][0]["thinking"] = "written in by a client"
    server.enqueue(text_reply("ok"))
    talk.send()
    assert server.violations == []


@pytest.mark.parametrize("what", ["system", "tools", "tool_result", "user_text"])
def test_an_edited_prefix_is_bound_to_a_different_conversation(
    server: FakeAnthropicServer, what: str
) -> None:
    talk = three_turns(server)
    first_path = "messages.1.content.0"
    if what == "system":
        talk.system = "Another prompt."
    elif what == "tools":
        talk.tools = talk.tools[:1]
    elif what == "tool_result":
        talk.messages[2]["content"][0]["content"] = "shortened"
        first_path = "messages.3.content.0"  # thinking after the edit only
    else:
        talk.messages[0]["content"] = "Fix a.py please"
    message = talk.refused()
    lines = message.split("\n")
    assert lines[0] == (
        f"{first_path}: Invalid `signature` in `thinking` block. {BOUND} Remove the block, or "
        'set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    assert lines[1].startswith(HEADER) and len(lines) == 3


def test_the_header_sentence_is_left_out_when_the_beta_was_sent(
    server: FakeAnthropicServer,
) -> None:
    talk = three_turns(server)
    talk.system = "Another prompt."
    message = talk.refused(betas=[BINDING_BETA])
    assert BOUND in message and HEADER not in message


def test_a_gap_fails_at_the_block_after_it(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    paths = thinking_paths(talk.messages)  # (1,0) (1,2) (3,0) (5,0)
    i, j = paths[2]
    del talk.messages[i]["content"][j]  # from the middle, later ones kept
    assert talk.refused().startswith(f"messages.{paths[3][0]}.content.0: Invalid `signature`")


def test_removing_thinking_from_the_start_or_all_of_it_is_no_edit(
    server: FakeAnthropicServer,
) -> None:
    talk = three_turns(server)
    start = copy.deepcopy(talk.messages)
    start[1]["content"] = [b for b in start[1]["content"] if b["type"] != "thinking"]
    none = [
        {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}
        if isinstance(m["content"], list)
        else m
        for m in talk.messages
    ]
    server.enqueue(text_reply("a"), text_reply("b"))
    talk.send(messages=start)
    talk.send(messages=none)
    assert server.violations == []


def test_a_block_put_back_fails_the_blocks_made_while_it_was_gone(
    server: FakeAnthropicServer,
) -> None:
    talk = three_turns(server)
    removed = talk.messages[5]["content"].pop(0)  # the last thinking, from the end: fine
    talk.messages.pop()  # the pending "Thanks"
    talk.turn(text_reply("Made without it."), "Thanks")
    talk.messages[5]["content"].insert(0, removed)
    talk.messages.append({"role": "user", "content": "and now?"})
    assert talk.refused().startswith("messages.7.content.0: Invalid `signature`")


def test_options_outside_the_prefix_are_no_edit(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    marked = copy.deepcopy(talk.messages)
    marked[2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    reordered = [dict(reversed(list(m.items()))) for m in marked]
    deferred = {**TOOLS[0], "name": "later", "defer_loading": True}
    server.enqueue(*(text_reply(str(n)) for n in range(3)))
    talk.send(messages=reordered, max_tokens=3000, output_config={"effort": "low"})
    talk.send(thinking={"type": "adaptive", "display": "summarized"}, tool_choice={"type": "auto"})
    talk.send(tools=[*TOOLS, deferred])
    assert server.violations == []


def test_count_tokens_runs_the_same_check(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    talk.system = "Changed."
    server.expect_refusals()
    with pytest.raises(anthropic.BadRequestError, match="bound to a different conversation"):
        talk.client.messages.count_tokens(**_count(talk.body()))


def test_a_refused_request_is_a_violation_unless_expected(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    talk.system = "Changed."
    with pytest.raises(anthropic.BadRequestError):
        talk.send()
    assert len(server.violations) == 1 and BOUND in server.violations[0]


# ---------------------------------------------------------------------------------------------
# Enforcement, drop_block, input_transformations


def test_an_old_account_lets_a_mismatch_through_and_lists_it_with_the_beta(
    server: FakeAnthropicServer,
) -> None:
    server.account_created_after_cutoff = False
    talk = three_turns(server)
    talk.system = "Changed."
    server.enqueue(text_reply("a"), text_reply("b"))
    assert talk.send().content  # no beta: through, nothing said
    message = talk.send(betas=[BINDING_BETA])
    assert [(t.type, t.path, t.reason) for t in message.input_transformations or []] == [
        ("thinking_mismatch_allowed", f"messages.{i}.content.{j}", "prefix_binding_mismatch")
        for i, j in thinking_paths(talk.messages)
    ]
    error: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
    assert BOUND in talk.refused(betas=[BINDING_BETA], thinking=error)


def test_block_binding_needs_its_beta(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    assert talk.refused(thinking=DROP).endswith("block_binding: Extra inputs are not permitted")


def test_drop_block_drops_the_failing_block_and_later_thinking(
    server: FakeAnthropicServer,
) -> None:
    server.thinking_tokens = 200
    talk = three_turns(server)
    talk.messages[2]["content"][0]["content"] = "shortened"  # fails (3,0) and everything after
    server.enqueue(text_reply("ok"))
    message = talk.send(betas=[BINDING_BETA], thinking=DROP)
    entries = [(t.type, t.path, t.reason) for t in message.input_transformations or []]
    assert entries == [
        ("thinking_dropped", "messages.3.content.0", "prefix_binding_mismatch"),
        ("thinking_dropped", "messages.5.content.0", "prefix_binding_mismatch"),
    ]
    stripped = copy.deepcopy(talk.messages)
    for index in (3, 5):
        stripped[index]["content"] = stripped[index]["content"][1:]
    counted = server.count_input_tokens({**talk.body(), "messages": stripped})
    usage = message.usage
    assert (
        usage.input_tokens
        + usage.cache_read_input_tokens
        + (usage.cache_creation_input_tokens or 0)
        == counted
    )
    assert server.violations == []


def test_the_beta_brings_an_empty_list_on_every_response(server: FakeAnthropicServer) -> None:
    talk = Talk(server)
    talk.messages.append({"role": "user", "content": "Hi"})
    server.enqueue(text_reply("a"), text_reply("b"))
    assert talk.send(betas=[BINDING_BETA]).input_transformations == []
    raw = talk.client.messages.with_raw_response.create(**talk.body())
    assert "input_transformations" not in raw.http_response.json()


def test_a_model_that_cannot_read_a_block_drops_it_silently(server: FakeAnthropicServer) -> None:
    server.thinking_tokens = 500
    talk = three_turns(server)
    talk.model = "claude-haiku-4-5"
    server.enqueue(text_reply("a"), text_reply("b"))
    message = talk.send(betas=[BINDING_BETA])
    assert {t.reason for t in message.input_transformations or []} == {"model_binding_mismatch"}
    assert message.usage.input_tokens < 500  # four blocks of 500 left out
    talk.model = "claude-opus-5-5"  # reads Sonnet 5.5's blocks
    assert talk.send(betas=[BINDING_BETA]).input_transformations == []
    assert server.violations == []


def test_another_accounts_sonnet_blocks_are_dropped(server: FakeAnthropicServer) -> None:
    talk = three_turns(server)
    server.account = "acct_other"
    server.enqueue(text_reply("a"))
    message = talk.send(betas=[BINDING_BETA])
    reasons = {t.reason for t in message.input_transformations or []}
    assert reasons == {"organization_binding_mismatch"}


def test_redacted_thinking_is_signed_checked_and_billed_like_thinking(
    server: FakeAnthropicServer,
) -> None:
    server.thinking_tokens = 250
    talk = Talk(server)
    message = talk.turn(text_reply("Hello.", redacted=True), "Hi")
    assert message.content[0].type == "redacted_thinking"
    talk.messages.append({"role": "user", "content": "more"})
    server.enqueue(text_reply("ok"))
    assert talk.send().usage.input_tokens > 250
    talk.system = "Changed."
    assert talk.refused().startswith(
        "messages.1.content.0: Invalid `signature` in `redacted_thinking` block. " + BOUND
    )
