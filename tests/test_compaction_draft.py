"""A compaction reviewed before it applies (``/compact --review``): whether its summary is the
API's signed block is read from the child it would save, not from the name of what made it."""

from __future__ import annotations

from typing import Any, cast

from agentloop import CompactionSettings, ConversationCompacter, Message
from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job, register
from agentloop._loop.agent_loop import AgentLoop
from agentloop._loop.compaction_draft import CompactionDraft
from agentloop._loop.drive import drive
from agentloop.testing import ScriptedModel

SONNET_55 = "claude-sonnet-5-5"
RELABELLED = "relabelled_api_summary"


class Relabelled(BaseStrategy):
    """The API's summary where offered, recorded under a name of its own."""

    name = RELABELLED
    summarizes = True

    def build(self, job: Job) -> Steps[Built | str]:
        built = yield from job.api_summary()
        if not isinstance(built, str):
            built.label = "my own words"
        return built


register(Relabelled())


def history() -> list[Message]:
    out: list[Message] = []
    for n in range(6):
        out += [Message.user(f"request {n}: " + "word " * 300), Message.assistant(f"answer {n}")]
    return [*out, Message.user("the newest request")]


def draft(strategy: str, model: ScriptedModel) -> CompactionDraft:
    compacter = ConversationCompacter(
        model_name=SONNET_55,
        context_window=8_000,
        model=model,
        max_output_tokens=500,
        settings=CompactionSettings(strategy=cast(Any, strategy), prepare_at=None),
    )
    loop = AgentLoop(model=model, model_name=SONNET_55, compacter=compacter, messages=history())
    made = loop.draft_compaction()
    assert isinstance(made, CompactionDraft)
    return made


def test_signed_is_read_from_the_childs_first_block_not_from_the_label() -> None:
    made = draft(RELABELLED, ScriptedModel(on_demand_compaction=True))
    assert made.transition.summary.strategy == "my own words"
    assert made.transition.compacted_messages[0].content[0]["type"] == "compaction"
    assert made.signed
    made.drop()


def test_a_summary_agentloop_wrote_is_not_signed() -> None:
    made = draft("summarize", ScriptedModel())  # no on-demand compaction: agentloop's own
    assert made.transition.compacted_messages[0].summary is not None
    assert not made.signed
    made.drop()


def test_a_strategy_that_asks_for_the_apis_summary_where_none_is_offered_hears_why() -> None:
    model = ScriptedModel()  # the model writes no summary of its own
    compacter = ConversationCompacter(
        model_name=SONNET_55,
        context_window=8_000,
        model=model,
        settings=CompactionSettings(strategy=cast(Any, RELABELLED), prepare_at=None),
    )
    outcome = drive(compacter.steps("parent", history(), force=True), compacter.runtime.perform)
    assert outcome.transition is None
    assert "does not write summaries" in str(outcome.skipped)
    assert all(request.compaction is None for request in model.requests)
