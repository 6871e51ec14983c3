"""Usage a model only estimated (a test double's, the demo's: nothing counts tokens there) is
measured, stored and shown as an estimate, never as the API's count: the
API's own figures are the truth, and a guess is never dressed as a measurement."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentloop import AgentLoop, CompactionSettings, ConversationCompacter, Message, ModelRequest
from agentloop._adapters.records import COUNTED, USAGE_ESTIMATED, from_record, to_record
from agentloop._adapters.session_costs import session_cost
from agentloop._adapters.tokens import Calibration
from agentloop._cli.cost_report import cost_text
from agentloop._cli.main import main
from agentloop._core.compaction.results import CompactionSummary, child_metadata
from agentloop._core.measuring.context import measure
from agentloop._core.measuring.figures import TOKEN_SOURCES, token_figure
from agentloop._core.values.messages import Usage
from agentloop._core.values.model import (
    IterationUsage,
    ModelResponse,
    OnDemandCompaction,
    TextCallback,
)
from agentloop.testing import FunctionModel, ScriptedModel
from sessions import open_store

WORDS = " ".join(f"word{n}" for n in range(120))


def _loop(model: ScriptedModel | FunctionModel) -> tuple[AgentLoop, ConversationCompacter]:
    compacter = ConversationCompacter(
        model_name="m", context_window=200_000, model=model, calibration=Calibration()
    )
    return AgentLoop(model=model, model_name="m", compacter=compacter), compacter


@pytest.mark.parametrize("estimated", [True, False])
def test_a_reply_marked_estimated_is_measured_as_an_estimate(estimated: bool) -> None:
    model = ScriptedModel([f"noted: {WORDS}"], estimated_usage=estimated)
    loop, compacter = _loop(model)
    loop.run_turn(WORDS)

    reply = loop.messages[-1]
    assert reply.usage is not None and reply.usage.estimated is estimated
    decision = loop.context()
    assert decision is not None
    usage = decision.usage
    assert usage.tokens == reply.usage.context_tokens  # the same anchor either way
    assert compacter.calibration is not None
    if estimated:
        assert usage.source == "estimate"
        assert (usage.reported_tokens, usage.estimated_tokens) == (0, usage.tokens)
        assert token_figure(usage.tokens, usage.source).startswith("~")
        # An estimate teaches the calibration (API tokens per local token) nothing.
        assert compacter.calibration.samples == 0
    else:
        assert usage.source == "api"
        assert (usage.reported_tokens, usage.estimated_tokens) == (usage.tokens, 0)
        assert not token_figure(usage.tokens, usage.source).startswith("~")
        assert compacter.calibration.samples == 1


@pytest.mark.parametrize(("estimated", "source"), [(True, "estimate"), (False, "api+estimate")])
def test_what_follows_an_estimated_reply_stays_an_estimate(estimated: bool, source: str) -> None:
    messages = [
        Message.user("question"),
        Message.assistant("answer", usage=Usage(input_tokens=900, estimated=estimated)),
        Message.user("next question"),
    ]
    usage = measure(
        messages,
        window=10_000,
        count=lambda m: 10,
        fixed_tokens=lambda: 0,
        calibrate=lambda t, n: t,
    )
    assert (usage.tokens, usage.source) == (910, source)
    assert usage.reported_tokens == (0 if estimated else 900)


def test_estimated_usage_is_stored_as_an_estimate_and_read_back_as_one(tmp_path: Path) -> None:
    marked = Message.assistant("a", usage=Usage(input_tokens=700, output_tokens=5, estimated=True))
    counted = Message.assistant("b", usage=Usage(input_tokens=700, output_tokens=5))
    records = [to_record(marked), to_record(counted)]
    assert records[0].metadata == {USAGE_ESTIMATED: True}
    assert records[1].metadata == {}
    # The usage keeps the API's shape; nothing of it passes for the API's count.
    assert records[0].usage == records[1].usage == Usage(700, 5).to_dict()
    assert all(COUNTED not in record.metadata for record in records)

    with open_store(tmp_path / "sessions.db") as store:
        session = store.create_session(model="m", workspace=str(tmp_path))
        store.append_messages(session.id, [to_record(Message.user("q")), *records])
        stored = store.get_messages(session.id)
    back = [from_record(record).usage for record in stored[1:]]
    assert back == [marked.usage, counted.usage]
    assert back[0] is not None and back[0].estimated
    assert back[1] is not None and not back[1].estimated


@pytest.mark.parametrize("estimated", [True, False])
def test_a_bill_of_estimated_usage_is_an_estimate(tmp_path: Path, estimated: bool) -> None:
    summary = CompactionSummary(
        original_message_count=4,
        compacted_message_count=2,
        tokens_before=900,
        tokens_after=300,
        summary="## Goal",
        strategy="summarize",
        model="claude-haiku-4-5",
        created_at=datetime.now(UTC),
        summary_calls=1,
        summary_usage=Usage(input_tokens=800, output_tokens=40, estimated=estimated),
    )
    metadata = child_metadata(summary)
    reply = Usage(input_tokens=700, output_tokens=5, estimated=estimated)
    with open_store(tmp_path / "sessions.db") as store:
        session = store.create_session(
            model="claude-haiku-4-5", workspace=str(tmp_path), metadata=metadata
        )
        store.append_messages(
            session.id,
            [to_record(Message.user("q")), to_record(Message.assistant("a", usage=reply))],
        )
        report = session_cost(store, session.id)
    assert report.replies.usage.estimated is estimated
    assert report.summaries.usage.estimated is estimated
    assert report.to_dict()["cost_is_estimate"] is estimated  # the model's price is known
    text = cost_text(report, report, session.id)
    assert ("input ~1,500 · " in text) is estimated
    assert ("input 1,500 · " in text) is not estimated
    assert ("no API counted these tokens" in text) is estimated


def test_the_sum_of_usages_is_an_estimate_when_any_part_is() -> None:
    assert (Usage(10) + Usage(5, estimated=True)).estimated
    assert (Usage(5, estimated=True) + Usage(10)) == Usage(15, estimated=True)
    assert not (Usage(10) + Usage(5)).estimated


def test_the_doubles_mark_their_usage_only_when_asked() -> None:
    request = ModelRequest(model="m", messages=[Message.user("hi")])
    assert not ScriptedModel(["a"]).complete(request).usage.estimated
    assert ScriptedModel(["a"], estimated_usage=True).complete(request).usage.estimated
    assert not FunctionModel(lambda r: "a").complete(request).usage.estimated
    assert FunctionModel(lambda r: "a", estimated_usage=True).complete(request).usage.estimated
    on_demand = ScriptedModel(on_demand_compaction=True, estimated_usage=True)
    answer = on_demand.complete(
        ModelRequest(model="m", messages=[Message.user("hi")], compaction=OnDemandCompaction())
    )
    assert answer.usage.estimated and all(i.usage.estimated for i in answer.iterations)
    # count_tokens answers for the API: a double that only estimates cannot offer it.
    with pytest.raises(ValueError, match="cannot count tokens"):
        ScriptedModel(estimated_usage=True, counts_tokens=True)
    with pytest.raises(ValueError, match="cannot count tokens"):
        FunctionModel(lambda r: "a", estimated_usage=True, counts_tokens=True)


class _ServerCompactingModel:
    """A model whose API compacts on the server once, reporting the compacted context in a
    ``compaction`` iteration; its usage marked estimated or not."""

    def __init__(self, estimated: bool) -> None:
        self.estimated = estimated
        self.inner = FunctionModel(lambda r: f"noted: {WORDS}", estimated_usage=estimated)
        self.compacted = False

    def supports_server_compaction(self, model: str) -> bool:
        return True

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if request.server_compaction is None or self.compacted or len(request.messages) < 5:
            return self.inner.complete(request, on_text)
        self.compacted = True
        work = Usage(input_tokens=3_000, output_tokens=40, estimated=self.estimated)
        return ModelResponse(
            content=({"type": "compaction", "content": "## Goal\nwords", "signature": "s"},),
            usage=Usage(estimated=self.estimated),
            stop_reason="compaction",
            model=request.model,
            iterations=(IterationUsage("compaction", work),),
        )


@pytest.mark.parametrize(("estimated", "source"), [(True, "estimate"), (False, "api")])
def test_a_server_compaction_s_figure_keeps_its_source(estimated: bool, source: str) -> None:
    model = _ServerCompactingModel(estimated)
    compacter = ConversationCompacter(
        model_name="m",
        context_window=200_000,
        model=model,
        settings=CompactionSettings(strategy="server"),
    )
    loop = AgentLoop(model=model, model_name="m", compacter=compacter)
    for n in range(4):
        loop.run_turn(f"request {n}: {WORDS}")
    transition = loop.last_transition
    assert transition is not None
    assert transition.summary.tokens_before == 3_000
    assert transition.summary.tokens_before_source == source


# -- the demo, end to end ------------------------------------------------------------------------


def test_the_demo_shows_its_figures_as_estimates(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's scripted model counts nothing: /context, the indicator, the notices, the
    stored sources and ``sessions show`` all say estimate, and none claims the API measured."""
    assert main(["demo"]) == 0
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "measured from api" not in output
    (context,) = [line for line in output.splitlines() if line.startswith("Context: ")]
    assert re.fullmatch(
        r"Context: ~[\d,]+ / 4,800 tokens \(~\d+%\), measured from estimate", context
    )
    (said,) = [line for line in output.splitlines() if line.startswith("Decision: ")]
    assert re.match(r"Decision: ~[\d,]+ tokens is below the trigger", said)
    assert "(0 samples)" in output  # no API count calibrated anything
    report = output.split("› /context", 1)[1].split("› /compact", 1)[0]
    assert "Not restored after the last compaction: " in report  # files over the budget
    assert "((" not in report and "))" not in report  # no parenthesis inside another's
    indicators = [line for line in output.splitlines() if line.startswith("context ")]
    assert indicators and all(line.startswith("context ~") for line in indicators)
    notices = re.findall(r"\((~?[\d,]+) → (~?[\d,]+) tokens\)", output)
    assert len(notices) >= 2 and all(f.startswith("~") for pair in notices for f in pair)

    match = re.search(r"sessions delete (\S+) --lineage", output)
    assert match is not None
    home = Path(os.environ["AGENTLOOP_HOME"])
    with open_store(home / "sessions.db") as store:
        sessions = store.list_sessions(limit=None)
        sources = [s.metadata[TOKEN_SOURCES] for s in sessions if TOKEN_SOURCES in s.metadata]
        assert len(sources) == len(sessions) - 1
        assert all("api" not in recorded.values() for recorded in sources)
        newest = max(sessions, key=lambda s: s.created_at).id
    replies = [
        json.loads(metadata)
        for (metadata,) in sqlite3.connect(home / "sessions.db").execute(
            "SELECT metadata FROM messages WHERE usage IS NOT NULL"
        )
    ]
    assert replies and all(m.get(USAGE_ESTIMATED) is True and COUNTED not in m for m in replies)

    assert main(["sessions", "show", newest]) == 0
    shown = capsys.readouterr().out
    # The bill's token figures too: the model's guesses, priced as such.
    tokens = [line for line in shown.splitlines() if line.startswith("  input ")]
    assert len(tokens) == 2 and all(re.match(r"  input ~[\d,]+ · cache", t) for t in tokens)
    assert "no API counted these tokens" in shown
    headings = [line for line in shown.splitlines() if " in / " in line]
    assert headings and all(re.search(r"· ~[\d,]+ in / ~[\d,]+ out tokens", h) for h in headings)
