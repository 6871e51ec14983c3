"""The late-2026 rules of the fake API, each through the real SDK over HTTP, in the form the
docs give (status, error type and code, message): kept turns under another system prompt or
tool set, effort and the prompt cache, thinking sized in thousands, compaction blocks with
``encrypted_content`` / ``tool_changes``, mid-conversation system features and their betas,
``anthropic-version: 2026-10-21``, cache keep-alives, task budgets, Sonnet 5.5's cache minimum
and the 5.5 models' output limit."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import BINDING_BETA, ONDEMAND_BETA, FakeAnthropicServer, text_reply

SONNET = "claude-sonnet-5-5"
SYSTEM = "You are a careful coding agent."
TOOLS: Any = [{"name": "read", "description": "Read", "input_schema": {"type": "object"}}]
MORE_TOOLS: Any = [
    *TOOLS,
    {"name": "grep", "description": "Search", "input_schema": {"type": "object"}},
]
CHECKED: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
DROP: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
INLINE = "inline-tools-2026-09-15"
OLD_VERSION = {"anthropic-version": "2023-06-01"}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


def create(server: FakeAnthropicServer, betas: list[str] | None = None, **body: Any) -> Any:
    request = {"model": SONNET, "max_tokens": 2000, "system": SYSTEM, "tools": TOOLS, **body}
    return server.client().beta.messages.create(betas=betas or [ONDEMAND_BETA], **request)


def refused(server: FakeAnthropicServer, **body: Any) -> anthropic.APIStatusError:
    server.expect_refusals()
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(server, **body)
    server.expect_refusals(False)
    return caught.value


def message_of(error: anthropic.APIStatusError) -> str:
    """The API's ``error.message`` (the SDK's own message prefixes the status and the body)."""
    body = error.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


def talk(server: FakeAnthropicServer, turns: int, **options: Any) -> list[Any]:
    messages: list[Any] = []
    for n in range(turns):
        messages.append({"role": "user", "content": f"request number {n}"})
        server.enqueue(text_reply(f"answer {n}"))
        reply = create(server, messages=messages, **options)
        messages.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
    return messages


def kept_history(server: FakeAnthropicServer, **compaction: Any) -> list[Any]:
    """Four turns, the first two compacted (with ``compaction``'s overrides), the last two kept,
    then a new user turn. The compaction request sets ``drop_block``: under another system
    prompt or tool set its own thinking fails the prefix check (dropped, not refused)."""
    everything = talk(server, 4)
    block = create(server, messages=everything[:4], compaction={"type": "summarize"},
                   betas=[ONDEMAND_BETA, BINDING_BETA], thinking=DROP, **compaction)  # fmt: skip
    (compacted,) = block.content
    return [
        {"role": "assistant", "content": [compacted.to_dict()]},
        *everything[4:],
        {"role": "user", "content": "next"},
    ]


# ---------------------------------------------------------------------------------------------
# Rule (c) of kept turns: the compaction request's system prompt and tools


@pytest.mark.parametrize(
    "other", [{"system": "Another system prompt."}, {"tools": MORE_TOOLS}], ids=["system", "tools"]
)
def test_a_compaction_under_another_system_or_tools_costs_the_kept_thinking(
    server: FakeAnthropicServer, other: dict[str, Any]
) -> None:
    history = kept_history(server, **other)  # the compaction itself is accepted
    assert server.violations == []
    error = refused(server, messages=history, betas=[ONDEMAND_BETA, BINDING_BETA], thinking=CHECKED)
    assert (error.status_code, error.error_code) == (400, None)
    body = error.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert message_of(error).startswith(
        "messages.2.content.0: Invalid `signature` in `thinking` block. The block is bound to a "
        "different conversation."
    )
    server.enqueue(text_reply("ok"))
    dropped = create(server, messages=history, betas=[ONDEMAND_BETA, BINDING_BETA], thinking=DROP)
    assert [(t.type, t.path, t.reason) for t in dropped.input_transformations or []] == [
        ("thinking_dropped", "messages.2.content.0", "prefix_binding_mismatch"),
        ("thinking_dropped", "messages.4.content.0", "prefix_binding_mismatch"),
    ]


def test_a_compaction_under_the_same_system_and_tools_keeps_it(
    server: FakeAnthropicServer,
) -> None:
    history = kept_history(server)
    server.enqueue(text_reply("ok"))
    message = create(
        server, messages=history, betas=[ONDEMAND_BETA, BINDING_BETA], thinking=CHECKED
    )
    assert message.input_transformations == [] and server.violations == []


# ---------------------------------------------------------------------------------------------
# Effort and the prompt cache; Sonnet 5.5's minimum cacheable prefix


def test_an_effort_change_restarts_the_prompt_cache(server: FakeAnthropicServer) -> None:
    messages = [{"role": "user", "content": "word " * 1500}]
    marked: Any = {"type": "ephemeral"}

    def cached(effort: str | None) -> tuple[int, int]:
        server.enqueue(text_reply("ok"))
        options: dict[str, Any] = {"output_config": {"effort": effort}} if effort else {}
        usage = create(server, messages=messages, cache_control=marked, **options).usage
        return usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0

    written = cached(None)[1]
    assert written > 0
    assert cached("high") == (written, 0)  # Sonnet 5.5's default effort: the same cache
    assert cached("low") == (0, written)  # another effort: written again
    assert cached("low") == (written, 0)


def test_sonnet_55_caches_prefixes_from_512_tokens(server: FakeAnthropicServer) -> None:
    messages = [{"role": "user", "content": "word " * 700}]
    marked: Any = {"type": "ephemeral"}
    for model, cached in ((SONNET, True), ("claude-opus-5-5", False)):
        server.enqueue(text_reply("ok"))
        usage = create(server, model=model, messages=messages, cache_control=marked).usage
        assert 512 <= server.count_message_tokens(messages) < 1024
        assert bool(usage.cache_creation_input_tokens) is cached, model


# ---------------------------------------------------------------------------------------------
# Thinking in thousands of tokens


def test_thinking_in_thousands_counts_against_max_tokens_and_as_input() -> None:
    with FakeAnthropicServer(thinking_tokens=3_000) as server:
        hi: Any = [{"role": "user", "content": "Hi"}]
        server.enqueue(text_reply("Hello there."))
        message = create(server, messages=hi, max_tokens=8_000)
        assert [b.type for b in message.content] == ["thinking", "text"]
        assert message.usage.output_tokens > 3_000
        server.enqueue(text_reply("Hello there."))
        cut = create(server, messages=hi, max_tokens=2_000)  # thinking alone overflows it
        assert cut.stop_reason == "max_tokens" and [b.type for b in cut.content] == ["thinking"]
        again = [*hi, {"role": "assistant", "content": [b.to_dict() for b in message.content]}]
        again.append({"role": "user", "content": "And?"})
        assert server.count_input_tokens({"messages": again}) > 3_000  # sent back: input


# ---------------------------------------------------------------------------------------------
# Compaction blocks: encrypted_content, tool_changes, tool references, misplaced


def test_compaction_blocks_carry_encrypted_content_and_tool_changes(
    server: FakeAnthropicServer,
) -> None:
    messages = talk(server, 2, tools=MORE_TOOLS)
    added = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "grep"}}
    messages.append({"role": "user", "content": "use grep too"})
    messages.append({"role": "system", "content": [added]})
    messages.append({"role": "assistant", "content": "noted"})
    messages.append({"role": "user", "content": "go on"})
    betas = [ONDEMAND_BETA, INLINE]
    reply = create(server, messages=messages, tools=MORE_TOOLS, betas=betas,
                   compaction={"type": "summarize"})  # fmt: skip
    block = reply.content[0].to_dict()
    assert block["encrypted_content"] and block["tool_changes"] == [added]
    history = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "next"}]
    server.enqueue(text_reply("ok"))
    create(server, messages=history, tools=MORE_TOOLS, betas=betas)  # byte-exact: accepted
    assert server.violations == []
    cases = [
        ({**block, "encrypted_content": block["encrypted_content"] + "x"},
         "compaction_content_mismatch", "encrypted_content"),
        ({**block, "tool_changes": []}, "compaction_tool_changes_mismatch", "tool_changes"),
        ({k: v for k, v in block.items() if k != "tool_changes"},
         "compaction_tool_changes_mismatch", "tool_changes"),
    ]  # fmt: skip
    for altered, code, field in cases:
        history[0] = {"role": "assistant", "content": [altered]}
        error = refused(server, messages=history, tools=MORE_TOOLS, betas=betas)
        assert (error.status_code, error.error_code) == (400, code)
        assert message_of(error).startswith(f"messages.0.content.0.{field}: ")


def test_too_many_tool_references_for_a_block(server: FakeAnthropicServer) -> None:
    server.max_tool_references = 1
    messages = talk(server, 1, tools=MORE_TOOLS)
    added = [
        {"type": "tool_addition", "tool": {"type": "tool_reference", "name": name}}
        for name in ("read", "grep")
    ]
    messages += [{"role": "user", "content": "add both"}, {"role": "system", "content": added}]
    error = refused(server, messages=messages, tools=MORE_TOOLS, betas=[ONDEMAND_BETA, INLINE],
                    compaction={"type": "summarize"})  # fmt: skip
    assert (error.status_code, error.error_code) == (400, "compaction_too_many_tool_references")
    assert "references 2 distinct tools" in message_of(error)


def test_a_compaction_block_in_a_system_message_is_misplaced(server: FakeAnthropicServer) -> None:
    messages = talk(server, 1)
    block = create(server, messages=messages, compaction={"type": "summarize"}).content[0]
    inside = [*messages, {"role": "user", "content": "go"},
              {"role": "system", "content": [block.to_dict()]}]  # fmt: skip
    error = refused(server, messages=inside)
    assert (error.status_code, error.error_code) == (400, "compaction_block_misplaced")
    assert message_of(error).startswith("messages.3.content.0: a compaction block cannot be")


# ---------------------------------------------------------------------------------------------
# Mid-conversation system messages: features and their betas, tool references


def _with_system(**message: Any) -> list[Any]:
    return [{"role": "user", "content": "Hi"}, {"role": "system", **message}]


@pytest.mark.parametrize(
    ("message", "beta", "field"),
    [
        (
            {"content": "Reminder.", "clear_at": "next_user_message"},
            "mid-conversation-system-clear-at-2026-08-21",
            "messages.1.clear_at",
        ),
        (
            {"content": [], "output_config": {"effort": "low"}},
            "mid-conversation-output-config-2026-07-01",
            "messages.1.output_config",
        ),
        (
            {
                "content": [
                    {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "read"}}
                ]
            },
            INLINE,
            "messages.1.content.0",
        ),
    ],
    ids=["clear_at", "output_config", "tool_addition"],
)
def test_system_message_features_need_their_beta(
    server: FakeAnthropicServer, message: dict[str, Any], beta: str, field: str
) -> None:
    error = refused(server, messages=_with_system(**message), betas=["other-2026-01-01"])
    assert (error.status_code, error.error_code) == (400, None)
    assert message_of(error).startswith(f"{field}")
    server.enqueue(text_reply("ok"))
    create(server, messages=_with_system(**message), betas=[beta])
    assert server.violations == []


def test_the_older_tool_changes_beta_takes_references_only(server: FakeAnthropicServer) -> None:
    older = "mid-conversation-tool-changes-2026-07-01"
    definition = {"type": "tool_definition", "definition": TOOLS[0]}
    error = refused(
        server,
        messages=_with_system(content=[{"type": "tool_addition", "tool": definition}]),
        betas=[older],
    )
    assert "requires the `anthropic-beta` header `inline-tools-2026-09-15`" in message_of(error)


def test_a_turn_scoped_reminder_holds_text_only(server: FakeAnthropicServer) -> None:
    beta = "mid-conversation-system-clear-at-2026-08-21"
    marked = [{"type": "text", "text": "Reminder.", "cache_control": {"type": "ephemeral"}}]
    error = refused(
        server, messages=_with_system(content=marked, clear_at="next_user_message"), betas=[beta]
    )
    assert "cache_control" in message_of(error)


def test_an_unresolved_tool_reference(server: FakeAnthropicServer) -> None:
    ref = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "deploy"}}
    error = refused(server, messages=_with_system(content=[ref]), betas=[INLINE])
    assert (error.status_code, error.error_code) == (400, "tool_reference_unresolved")
    assert message_of(error) == (
        "messages.1.content.0.tool: the tool reference 'deploy' does not resolve to a tool in "
        "`tools`"
    )


# ---------------------------------------------------------------------------------------------
# anthropic-version 2026-10-21


def test_the_sdk_sends_the_2026_version() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION  # what the installed SDK sends

    assert ANTHROPIC_API_VERSION == "2026-10-21"


@pytest.mark.parametrize(("option", "value"), [("temperature", 1.0), ("top_p", 1.0), ("top_k", 5)])
def test_2026_refuses_sampling_options_on_every_model(
    server: FakeAnthropicServer, option: str, value: float
) -> None:
    hi: Any = [{"role": "user", "content": "Hi"}]
    error = refused(server, model="claude-sonnet-4-6", messages=hi, extra_body={option: value})
    assert (error.status_code, error.error_code) == (400, None)
    assert message_of(error).startswith(
        f"{option}: this parameter was removed in API version 2026-10-21"
    )
    server.enqueue(text_reply("ok"))  # the older version still takes them on 4.x models
    create(server, model="claude-sonnet-4-6", messages=hi, extra_body={option: value},
           extra_headers=OLD_VERSION)  # fmt: skip
    assert server.violations == []


def test_2026_refuses_citations_on_user_text(server: FakeAnthropicServer) -> None:
    cited = {"type": "char_location", "cited_text": "x", "document_index": 0,
             "start_char_index": 0, "end_char_index": 1, "document_title": None}  # fmt: skip
    user = [
        {"role": "user", "content": [{"type": "text", "text": "As cited.", "citations": [cited]}]}
    ]
    error = refused(server, messages=user)
    assert message_of(error) == (
        "messages.0.content.0.citations: citations on user text are not accepted in API "
        "version 2026-10-21"
    )
    server.enqueue(text_reply("ok"))
    create(server, messages=user, extra_headers=OLD_VERSION)
    assert server.violations == []


def test_2026_refuses_a_document_in_an_assistant_message(server: FakeAnthropicServer) -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                               "data": "notes"}}  # fmt: skip
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [document]},
                {"role": "user", "content": "Go on"}]  # fmt: skip
    refused(server, messages=messages)
    assert any(
        "`document` blocks are not allowed in assistant messages in API version 2026-10-21" in r
        for r in server.refusals
    )


# ---------------------------------------------------------------------------------------------
# Keep-alives, task budgets, output limits


def test_a_keep_alive_samples_nothing_and_may_not_compact(server: FakeAnthropicServer) -> None:
    messages = talk(server, 1)
    messages.append({"role": "user", "content": "still there?"})
    alive = create(server, messages=messages, max_tokens=0)
    assert (alive.content, alive.stop_reason, alive.usage.output_tokens) == ([], "max_tokens", 0)
    error = refused(server, messages=messages, max_tokens=0, compaction={"type": "summarize"})
    assert (error.status_code, error.error_code) == (400, None)
    assert message_of(error).startswith("compaction: cannot be combined with `max_tokens: 0`")


def test_a_task_budget_is_refused_with_compaction_and_beside_the_block(
    server: FakeAnthropicServer,
) -> None:
    messages = talk(server, 1)
    budget = {"output_config": {"task_budget": {"total": 50_000, "remaining": 20_000}}}
    error = refused(server, messages=messages, compaction={"type": "summarize"}, extra_body=budget)
    assert "output_config.task_budget.remaining" in message_of(error)
    block = create(server, messages=messages, compaction={"type": "summarize"}).content[0]
    later = [{"role": "assistant", "content": [block.to_dict()]}, {"role": "user", "content": "go"}]
    error = refused(server, messages=later, extra_body=budget)
    assert message_of(error) == (
        "output_config.task_budget.remaining: cannot be used on a request that carries a "
        "compaction block"
    )
    server.enqueue(text_reply("ok"))
    total_only = {"output_config": {"task_budget": {"total": 50_000}}}
    create(server, messages=later, extra_body=total_only)
    assert server.violations == []


@pytest.mark.parametrize("model", [SONNET, "claude-haiku-5-5", "claude-opus-5-5"])
def test_the_55_models_write_up_to_128k_tokens(server: FakeAnthropicServer, model: str) -> None:
    spec = server.client().models.retrieve(model)
    assert spec.max_tokens == 128_000
    hi: Any = [{"role": "user", "content": "Hi"}]
    server.enqueue(text_reply("ok"))
    create(server, model=model, messages=hi, max_tokens=128_000, timeout=60)
    error = refused(server, model=model, messages=hi, max_tokens=128_001, timeout=60)
    assert message_of(error) == (
        f"max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens for "
        f"{model}"
    )


def test_rule_c_holds_for_thinking_made_after_the_block(server: FakeAnthropicServer) -> None:
    # Thinking produced after a block compacted under another prompt is bound to the block as
    # this conversation reads it: it stays valid on the next request.
    history = kept_history(server, system="Another system prompt.")
    history = [history[0], {"role": "user", "content": "fresh start"}]
    server.enqueue(text_reply("ok"))
    reply = create(server, messages=history)
    history.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
    history.append({"role": "user", "content": "more"})
    server.enqueue(text_reply("ok"))
    again = create(server, messages=copy.deepcopy(history), betas=[ONDEMAND_BETA, BINDING_BETA],
                   thinking=CHECKED)  # fmt: skip
    assert again.input_transformations == [] and server.violations == []
