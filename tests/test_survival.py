"""What survives a compaction, measured on the corpus: the targets of
``benchmarks/bench_survival.py`` hold on every transcript, after every one of 5 successive
compactions; the measure sees what a context without the ledger loses; the receipt lists what
a compaction left out, each with a search that finds it."""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from transcripts import coding_session
from transcripts.recorded import calculator_session

from agentloop import (
    CompactionSettings,
    ConversationCompacter,
    Message,
    as_messages,
    default_tool_facts,
)
from agentloop._adapters.records import to_record
from agentloop._agent.search_history import SearchHistoryTool
from agentloop._core.facts import preserved_state
from agentloop._core.facts.ledger import Ledger, derive
from agentloop._core.facts.receipt import Fact, receipt, span_facts
from sessions import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_survival


@pytest.mark.heavy
def test_the_targets_hold_on_the_corpus_after_5_successive_compactions() -> None:
    survival = bench_survival.measure(seeds=(0,), size=120)
    assert survival.compactions >= 5 * 7
    assert survival.misses() == []
    for kind in ("paths", "commands", "errors", "requests", "todos"):
        assert survival.each[kind].facts > 0 and survival.after[kind].facts > 0
    table = bench_survival.table(survival)
    assert table.startswith("| fact | kind of fact |") and "| after 5 | todo states |" in table


@pytest.mark.heavy
def test_without_the_ledger_the_measure_sees_the_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preserved_state, "ledger_fitted", lambda *args, **kwargs: Ledger())
    survival = bench_survival.measure(seeds=(1,), size=90, compactions=2)
    misses = " ".join(survival.misses())
    assert "commands" in misses and "todos" in misses and "errors" in misses


def test_a_stale_ledger_is_counted_stale() -> None:
    todo = Fact("todos", ("[x] write the parser",), "write the parser")
    shown_open = Ledger(todos=(("in_progress", "write the parser"),))
    assert bench_survival.stale(todo, shown_open, {})
    assert not bench_survival.stale(todo, Ledger(todos=(("completed", "write the parser"),)), {})
    command = Fact("commands", ("pytest -q", "exit 0"), "pytest -q")
    assert not bench_survival.stale(command, Ledger(), {})
    transcript = as_messages(calculator_session(2, 40).messages)
    ledger = derive(transcript, facts=default_tool_facts())
    path = Fact("paths", ("calc.py",), "calc.py")
    assert bench_survival.stale(path, ledger, {"calc.py": True}) == (
        next(f for f in ledger.files if f.path == "calc.py").state.startswith("unchanged")
    )


def _compacted(messages: list[Message]) -> tuple[list[Message], int, str]:
    compacter = ConversationCompacter(
        model_name="claude-sonnet-4-6",
        context_window=200_000,
        settings=CompactionSettings(strategy="sliding_window"),  # keeps no summary: loses most
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transition = compacter.compact_and_transition("s", messages, force=True)
    assert transition is not None
    child = list(transition.compacted_messages)
    return child, len(messages) - (len(child) - 1), transition.summary.summary


def test_the_receipt_lists_what_a_compaction_left_out_with_a_search_that_finds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(preserved_state, "ledger_fitted", lambda *args, **kwargs: Ledger())
    messages = as_messages(coding_session(4, 120).messages)
    child, replaced, _ = _compacted(messages)
    shown = receipt(messages, replaced, child, default_tool_facts())
    assert shown.left_out > 0 and "errors" in shown.missing
    facts = span_facts(messages, 0, replaced, default_tool_facts())
    assert sum(shown.facts.values()) == len(facts)
    with tempfile.TemporaryDirectory() as home:
        store = open_store(Path(home) / "r.db")
        session = store.create_session(model="m", workspace="/w")
        store.append_messages(session.id, [to_record(m) for m in messages])
        tool = SearchHistoryTool(store, session.id)
        for fact in shown.missing["errors"]:
            assert bench_survival.recoverable(fact, tool), fact
        store.close()
    lines = shown.lines()
    assert lines[0].startswith(f"Left out of the context by the last compaction: {shown.left_out}")
    assert any("(search_history '" in line for line in lines)
    data = shown.to_dict()
    assert data["errors"]["left_out"][0]["search"] == shown.missing["errors"][0].query


def test_with_the_ledger_the_receipt_of_a_sliding_window_keeps_the_artifacts() -> None:
    messages = as_messages(coding_session(4, 120).messages)
    child, replaced, _ = _compacted(messages)
    shown = receipt(messages, replaced, child, default_tool_facts())
    for kind in ("paths", "commands", "errors"):
        assert not shown.missing.get(kind), (kind, shown.missing.get(kind))
