"""On-demand compaction in the fake API (beta ``compact-2026-09-04``, notes section 3), through
the real SDK over HTTP: the signed block, its refusals and error codes, kept turns and their
thinking, failures on demand."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    BINDING_BETA,
    COMPACT_BETA,
    ONDEMAND_BETA,
    FakeAnthropicServer,
    text_reply,
    tool_reply,
)

SONNET = "claude-sonnet-5-5"
SYSTEM = "You are a careful coding agent."
TOOLS: Any = [{"name": "read", "description": "Read", "input_schema": {"type": "object"}}]
SUMMARIZE: Any = {"type": "summarize"}
CHECKED: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


class Session:
    """A conversation on the beta client, with the on-demand beta on every request."""

    def __init__(self, server: FakeAnthropicServer) -> None:
        self.server = server
        self.client = server.client()
        self.system = SYSTEM
        self.messages: list[Any] = []

    def create(self, *, betas: list[str] | None = None, **options: Any) -> Any:
        body = {
            "model": SONNET,
            "max_tokens": 2000,
            "system": self.system,
            "tools": TOOLS,
            "messages": self.messages,
            **options,
        }
        return self.client.beta.messages.create(betas=betas or [ONDEMAND_BETA], **body)

    def turn(self, text: str, reply: Any = None) -> Any:
        self.messages.append({"role": "user", "content": text})
        self.server.enqueue(reply or text_reply(f"answer to {text}"))
        message = self.create()
        self.messages.append(
            {"role": "assistant", "content": [b.to_dict() for b in message.content]}
        )
        return message

    def compact(self, **options: Any) -> Any:
        return self.create(compaction=options.pop("compaction", SUMMARIZE), **options)

    def error(self, **options: Any) -> anthropic.APIStatusError:
        self.server.expect_refusals()
        with pytest.raises(anthropic.APIStatusError) as caught:
            self.create(**options)
        return caught.value


def talked(server: FakeAnthropicServer, turns: int = 3) -> Session:
    session = Session(server)
    for n in range(turns):
        session.turn(f"request number {n}")
    return session


def test_a_compaction_is_one_signed_block_with_its_own_usage(server: FakeAnthropicServer) -> None:
    session = talked(server)
    message = session.compact()
    assert message.stop_reason == "compaction"
    (block,) = message.content
    assert block.type == "compaction" and block.signature
    assert block.content.splitlines()[1:] == [f"- request number {n}" for n in range(3)]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (0, 0)
    (iteration,) = message.usage.iterations or []
    assert iteration.type == "compaction" and iteration.input_tokens > 0
    assert iteration.output_tokens > 0
    assert server.pending == 0 and server.violations == []


def test_instructions_reach_the_summary(server: FakeAnthropicServer) -> None:
    session = talked(server, 1)
    compaction = {"type": "summarize", "instructions": "Keep file names."}
    block = session.compact(compaction=compaction).content[0]
    assert block.content.endswith("Instructions: Keep file names.")


def test_a_compaction_streams_as_one_block_start(server: FakeAnthropicServer) -> None:
    session = talked(server, 1)
    body = {"model": SONNET, "max_tokens": 2000, "system": SYSTEM, "tools": TOOLS,
            "messages": session.messages, "compaction": SUMMARIZE}  # fmt: skip
    with session.client.beta.messages.stream(betas=[ONDEMAND_BETA], **body) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert "content_block_delta" not in events
    assert events.count("content_block_start") == 1 and events.count("content_block_stop") == 1
    assert final.content[0].type == "compaction" and final.stop_reason == "compaction"


def test_a_swapped_in_block_continues_the_conversation(server: FakeAnthropicServer) -> None:
    session = talked(server)
    block_message = session.compact()
    session.messages = [
        {"role": "assistant", "content": [b.to_dict() for b in block_message.content]}
    ]
    session.turn("request after the summary")
    assert server.violations == []
    counted = server.count_requests  # nothing; the counted input is the summary on
    assert counted == []
    later = session.compact()
    lines = later.content[0].content.splitlines()[1:]
    assert lines == [f"- request number {n}" for n in range(3)] + ["- request after the summary"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ("no_beta", None),
        ("empty", "compaction_nothing_to_summarize"),
        ("open_tool_call", "compaction_incomplete_turn"),
        ("stop_sequences", None),
        ("context_management", None),
        ("forced_tool_choice", None),
        ("long_instructions", None),
    ],
)
def test_compaction_requests_the_api_refuses(
    server: FakeAnthropicServer, change: str, code: str | None
) -> None:
    session = talked(server, 1)
    options: dict[str, Any] = {"compaction": SUMMARIZE}
    if change == "no_beta":
        options["betas"] = ["other-beta-2026-01-01"]
    elif change == "empty":
        session.messages = []
    elif change == "open_tool_call":
        session.turn("read it", tool_reply(("read", {})))
    elif change == "stop_sequences":
        options["stop_sequences"] = ["END"]
    elif change == "context_management":
        options["context_management"] = {"edits": [{"type": "clear_thinking_20251015"}]}
        options["betas"] = [ONDEMAND_BETA, "context-management-2025-06-27"]
    elif change == "forced_tool_choice":
        options["tool_choice"] = {"type": "auto"}  # fine ...
        options["model"] = "claude-haiku-5-5"
        options["tool_choice"] = {"type": "any"}  # ... but not a forced one
    else:
        options["compaction"] = {"type": "summarize", "instructions": "x" * 16_385}
    error = session.error(**options)
    assert error.status_code == 400 and error.error_code == code
    assert len(server.refusals) == 1 and server.violations == []


def test_a_model_without_compaction_refuses_it(server: FakeAnthropicServer) -> None:
    server.models_without_compaction.add(SONNET)
    error = talked(server, 1).error(compaction=SUMMARIZE)
    assert "not supported" in str(error.message)


def test_the_block_must_come_back_first_alone_and_unaltered(server: FakeAnthropicServer) -> None:
    session = talked(server)
    block = session.compact().content[0].to_dict()
    first = {"role": "assistant", "content": [block]}
    forged = block["signature"][:-2] + ("00" if not block["signature"].endswith("00") else "11")
    cases: list[tuple[list[Any], str | None]] = [
        ([session.messages[0], first, {"role": "user", "content": "go"}],
         "compaction_block_misplaced"),
        ([first, {"role": "user", "content": "go"}, {"role": "assistant", "content": [block]},
          {"role": "user", "content": "on"}], "compaction_block_ambiguous"),
        ([{"role": "assistant", "content": [{**block, "signature": forged}]},
          {"role": "user", "content": "go"}], "compaction_signature_invalid"),
        ([{"role": "assistant", "content": [{**block, "content": block["content"] + "!"}]},
          {"role": "user", "content": "go"}], "compaction_content_mismatch"),
        ([{"role": "assistant", "content": [{**block, "citations": None}]},
          {"role": "user", "content": "go"}], None),
    ]  # fmt: skip
    for messages, code in cases:
        session.messages = messages
        error = session.error()
        assert (error.status_code, error.error_code) == (400, code), error.message
    assert "citations: Extra inputs are not permitted" in str(error.message)
    session.messages = [first, {"role": "user", "content": "go"}]
    assert "compact-2026-09-04" in str(session.error(betas=[BINDING_BETA]).message)
    edit = {"edits": [{"type": "compact_20260112"}]}
    error = session.error(betas=[ONDEMAND_BETA, COMPACT_BETA], context_management=edit)
    assert "compact_20260112" in str(error.message)


def test_messages_before_the_block_are_not_read(server: FakeAnthropicServer) -> None:
    session = talked(server)
    block = session.compact().content[0].to_dict()
    as_user = [{"role": "user", "content": [block, {"type": "text", "text": "go on"}]}]
    server.enqueue(text_reply("ok"))
    session.messages = as_user
    message = session.create()
    summary_only = server.count_message_tokens(as_user)
    usage = message.usage
    read = usage.input_tokens + (usage.cache_read_input_tokens or 0)
    assert read + (usage.cache_creation_input_tokens or 0) < summary_only + 200
    assert server.violations == []


def test_failures_on_demand(server: FakeAnthropicServer) -> None:
    session = talked(server, 1)
    stops = ["max_tokens", "tool_use", "refusal", "end_turn", "model_context_window_exceeded"]
    server.fail_next_compactions(*stops, "unavailable")
    for stop in stops:
        message = session.compact()
        assert (message.stop_reason, message.content) == (stop, [])
    with pytest.raises(anthropic.APIStatusError) as caught:
        session.compact()
    assert (caught.value.status_code, caught.value.error_code) == (529, "compaction_unavailable")
    assert session.compact().stop_reason == "compaction"


def test_a_summary_longer_than_max_tokens_is_no_summary(server: FakeAnthropicServer) -> None:
    session = talked(server, 3)
    message = session.compact(max_tokens=5)
    assert (message.stop_reason, message.content) == ("max_tokens", [])


# ---------------------------------------------------------------------------------------------
# Kept turns (notes 3.5)


def kept_turns(server: FakeAnthropicServer) -> tuple[Session, list[Any]]:
    """Compact the first two turns of four; the history is [block, turns 3 and 4]."""
    session = talked(server, 4)
    everything = list(session.messages)
    session.messages = everything[:4]
    block = session.compact().content[0].to_dict()
    return session, [{"role": "assistant", "content": [block]}, *everything[4:]]


def test_kept_turns_that_continue_the_summary_keep_their_thinking(
    server: FakeAnthropicServer,
) -> None:
    session, history = kept_turns(server)
    session.messages = [*history, {"role": "user", "content": "next"}]
    server.enqueue(text_reply("ok"))
    message = session.create(betas=[ONDEMAND_BETA, BINDING_BETA], thinking=CHECKED)
    assert message.input_transformations == []
    assert server.violations == []


def test_kept_turns_after_a_changed_system_lose_their_thinking(
    server: FakeAnthropicServer,
) -> None:
    session, history = kept_turns(server)
    session.messages = [*history, {"role": "user", "content": "next"}]
    session.system = "Another prompt."
    error = session.error(betas=[ONDEMAND_BETA, BINDING_BETA], thinking=CHECKED)
    assert "messages.2.content.0" in str(error.message) and "different conversation" in str(
        error.message
    )


def test_kept_turns_that_do_not_continue_the_summary_lose_their_thinking(
    server: FakeAnthropicServer,
) -> None:
    session = talked(server, 4)
    everything = list(session.messages)
    session.messages = everything[:4]  # ends with an assistant reply
    block = session.compact().content[0].to_dict()
    # The kept part skips a user turn: it starts with an assistant reply, as the summary ended.
    session.messages = [{"role": "assistant", "content": [block]}, *everything[5:],
                        {"role": "user", "content": "next"}]  # fmt: skip
    drop: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    server.enqueue(text_reply("ok"))
    message = session.create(betas=[ONDEMAND_BETA, BINDING_BETA], thinking=drop)
    paths = [t.path for t in message.input_transformations or []]
    assert paths == ["messages.1.content.0", "messages.3.content.0"]


def test_thinking_made_after_the_block_is_bound_to_it(server: FakeAnthropicServer) -> None:
    session, history = kept_turns(server)
    session.messages = history
    session.turn("next")
    session.turn("and next")
    assert server.violations == []
    edited = copy.deepcopy(session.messages)
    edited[-4]["content"] = "next, edited"
    session.messages = [*edited, {"role": "user", "content": "more"}]
    assert "different conversation" in str(session.error().message)


def test_the_compaction_call_reads_the_conversations_prompt_cache(
    server: FakeAnthropicServer,
) -> None:
    server.cache_min_tokens = 1
    session = talked(server, 2)
    marked: Any = {"type": "ephemeral"}
    session.messages.append({"role": "user", "content": "one more"})
    server.enqueue(text_reply("sure"))
    written = session.create(cache_control=marked).usage.cache_creation_input_tokens
    (iteration,) = session.compact(cache_control=marked).usage.iterations or []
    assert written and iteration.cache_read_input_tokens == written
