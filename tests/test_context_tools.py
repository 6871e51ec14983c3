"""The model sees its context (``context_status``) and may ask for a compaction
(``compact_context``), which runs at the next safe boundary and never when the user said no."""

from __future__ import annotations

from agentloop import AgentLoop, CompactionSettings, ConversationCompacter, ModelRequest
from agentloop.testing import ScriptedModel, summary_input, text_reply, tool_call, tool_reply

FACTS = "\n".join(f"fact {n}: the parser handles case {n}" for n in range(60))


def make(enabled: bool = True, *, context_tools: bool = True) -> tuple[AgentLoop, ScriptedModel]:
    summaries: list[str] = []

    def summarize(request: ModelRequest) -> str:
        summaries.append(summary_input(request))
        return "## Goal\nkeep the parser facts"

    model = ScriptedModel([], summarizer=summarize)
    model.summaries = summaries  # type: ignore[attr-defined]
    compacter = ConversationCompacter(
        model_name="m",
        context_window=200_000,
        model=model,
        settings=CompactionSettings(enabled=enabled),
    )
    loop = AgentLoop(model=model, model_name="m", compacter=compacter, context_tools=context_tools)
    return loop, model


def test_the_tools_are_off_unless_asked_for() -> None:
    loop, _ = make(context_tools=False)
    assert "context_status" not in loop.tools and "compact_context" not in loop.tools
    loop, _ = make()
    assert {"context_status", "compact_context"} <= set(loop.tools)


def test_context_status_reports_usage_window_and_trigger() -> None:
    loop, model = make()
    model.add(tool_reply(tool_call("context_status", {})), text_reply("noted"))
    loop.run_turn("how full are you?")
    result = loop.messages[2].content[0]
    text = str(result["content"])
    assert result["type"] == "tool_result"
    assert "window: 200,000 tokens" in text
    assert "compaction triggers at:" in text
    assert "last compaction: none" in text


def test_compact_context_compacts_after_the_tool_round_with_the_instructions() -> None:
    loop, model = make()
    for n in range(4):
        model.add(text_reply(f"answer {n}\n{FACTS}"))
        loop.run_turn(f"question {n}")
    model.add(
        tool_reply(
            tool_call("compact_context", {"instructions": "keep every parser fact"}),
            tool_call("context_status", {}),
        ),
        text_reply("carrying on"),
    )
    before = loop.session_id
    result = loop.run_turn("tidy up your context, then carry on")

    assert result.text == "carrying on"
    assert len(result.transitions) == 1, "compacted once, at the boundary after the round"
    transition = result.transitions[0]
    assert transition.original_session_id == before
    assert transition.summary.instructions == "keep every parser fact"
    summaries: list[str] = model.summaries  # type: ignore[attr-defined]
    assert summaries and "keep every parser fact" in summaries[0]
    # Both tool results of the round were in the history that was compacted (never mid-round).
    replies = [r for r in model.requests if r.metadata.get("purpose") == "conversation"]
    last = replies[-1].messages
    assert last[0].summary is not None
    assert loop.last_transition is transition


def test_compact_context_is_refused_when_the_user_turned_compaction_off() -> None:
    loop, model = make(enabled=False)
    model.add(tool_reply(tool_call("compact_context", {})), text_reply("ok"))
    result = loop.run_turn("compact yourself")
    assert result.transitions == []
    answer = str(loop.messages[2].content[0]["content"])
    assert "compaction is turned off" in answer
