"""Strategies are things and the preview tells the truth.

* the strategy's name is compared as a string nowhere outside the registry (the CLI may parse
  names);
* a strategy registered from outside (here, this file) is used by the compaction and its
  preview with no other change;
* the preview (``/compact --dry-run``) runs the compaction's own strategy under the same
  budget: on the corpus its figure is within 25 % of what the compaction then gives, or, when a
  summary is still to be written, it is a range that holds the result; it never promises growth;
* the preview names the preserved-state sources, not the headings inside restored files.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from fake_api import FakeAnthropicServer
from transcripts import CORPUS, Transcript

from agentloop import CompactionSettings, ConversationCompacter, Message, ModelRequest, Usage
from agentloop._cli.ui import plan_report
from agentloop._core.compaction.effects import Steps
from agentloop._core.compaction.strategy import BaseStrategy, Built, Job, register, strategy_named
from agentloop._core.compaction_core import STRATEGIES
from agentloop._core.cutting.prefix import as_messages
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.strategies import BUILTIN
from agentloop._core.values.messages import to_params
from agentloop.testing import FunctionModel

ROOT = Path(__file__).resolve().parent.parent
REGISTRY_MODULE = ROOT / "agentloop" / "_core" / "compaction" / "strategy.py"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
NAMES = ("auto", "summarize", "sliding_window", "prune", "server", "none")


# -- no strategy name compared as a string --------------------------------------------------


def _is_strategy(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("strategy", "strategy_name")


def _names_in(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {v for item in node.elts for v in _names_in(item)}
    return set()


def name_comparisons(source: str) -> list[int]:
    """Lines where a ``strategy`` is compared with (or looked up in) a strategy's name."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any(_is_strategy(side) for side in sides) and any(
            _names_in(side) & set(NAMES) for side in sides
        ):
            lines.append(node.lineno)
    return lines


def test_the_checker_sees_a_comparison_on_the_strategy_name() -> None:
    assert name_comparisons('if settings.strategy == "server":\n    pass\n') == [1]
    assert name_comparisons('ok = strategy in ("auto", "summarize")\n') == [1]
    assert name_comparisons('ok = strategy.automatic and x == "server"\n') == []


def test_no_strategy_name_is_compared_as_a_string_outside_the_registry() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / "agentloop").rglob("*.py")):
        if path == REGISTRY_MODULE or "_cli" in path.parts:  # the CLI parses names
            continue
        if lines := name_comparisons(path.read_text()):
            found[str(path.relative_to(ROOT))] = lines
    assert found == {}


def test_the_builtin_strategies_are_the_names_settings_and_the_cli_offer() -> None:
    assert tuple(strategy.name for strategy in BUILTIN) == STRATEGIES == NAMES
    assert all(strategy_named(strategy.name) is strategy for strategy in BUILTIN)


# -- a strategy from outside -----------------------------------------------------------------


class KeepLastExchange(BaseStrategy):
    """A toy: a fixed note, then the smallest verbatim tail."""

    name = "toy_keep_last"

    def build(self, job: Job) -> Steps[Built | str]:
        compacted, measured = yield from job.assembled(
            job.smallest, "toy note", request_chars=None, tighten=False
        )
        return Built(compacted, measured, self.name, "toy note", job.smallest)


register(KeepLastExchange())


def history(rounds: int) -> list[Message]:
    out = [Message.user("start the work")]
    for n in range(rounds):
        out += [Message.assistant(f"step {n}: " + "detail " * 200), Message.user(f"go on {n}")]
    return out


def test_a_registered_strategy_is_used_by_the_compaction_and_its_preview() -> None:
    model = FunctionModel(lambda request: "a summary")
    compacter = ConversationCompacter(
        model_name="claude-test",
        context_window=20_000,
        model=model,
        settings=CompactionSettings(strategy=cast(Any, "toy_keep_last")),
        clock=lambda: NOW,
        new_session_id=lambda: "child",
    )
    messages = history(12)

    plan = compacter.plan(messages)
    assert plan.strategy == "toy_keep_last"
    assert plan.verbatim_messages == 2  # the smallest tail: the last exchange

    transition = compacter.compact_and_transition("parent", messages, force=True)
    assert transition is not None
    assert transition.summary.strategy == "toy_keep_last"
    first = transition.compacted_messages[0]
    assert first.summary is not None and first.summary.text == "toy note"
    assert transition.compacted_messages[1:] == messages[-2:]
    assert model.requests == []  # the toy asks no model


# -- the preview against the compaction, on the corpus ----------------------------------------


@dataclass
class CountedModel(FunctionModel):
    """A summarizer whose ``count_tokens`` is the test server's count (no HTTP)."""

    server: FakeAnthropicServer | None = None

    def count_tokens(self, request: ModelRequest) -> int:
        assert self.server is not None
        body: dict[str, Any] = {"model": request.model, "messages": to_params(request.messages)}
        if request.system.strip():
            body["system"] = request.system
        if request.tools:
            body["tools"] = [dict(tool) for tool in request.tools]
        return self.server.count_input_tokens(body)


SUMMARY = (
    "## Goal\nKeep the shop backend healthy.\n\n## Progress\nsee the tail\n\n## Next steps\ngo"
)


def anchored(transcript: Transcript, server: FakeAnthropicServer) -> list[Message]:
    """The transcript, its last reply carrying the usage the API reported (as a loop keeps it)."""
    messages = as_messages(transcript.messages)
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    prompt = server.count_input_tokens(transcript.body(messages=transcript.messages[:last]))
    usage = Usage(input_tokens=prompt, output_tokens=100)
    messages[last] = Message.assistant(messages[last].content, usage=usage)
    return messages


@pytest.mark.parametrize("strategy", ["auto", "summarize", "sliding_window", "prune"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_preview_is_within_a_quarter_of_the_result_or_a_range_holding_it(
    name: str, strategy: str
) -> None:
    transcript = CORPUS[name](0, 120)
    server = FakeAnthropicServer()

    def make() -> ConversationCompacter:
        window = int(server.count_input_tokens(transcript.body()) / 0.92)
        return ConversationCompacter(
            model_name="claude-sonnet-4-6",
            context_window=window,
            model=CountedModel(function=lambda request: SUMMARY, server=server),
            max_output_tokens=4_096,
            settings=CompactionSettings(strategy=cast(Any, strategy), threshold=0.8),
            clock=lambda: NOW,
            new_session_id=lambda: "child",
        )

    messages = anchored(transcript, server)
    system, tools = transcript.system, transcript.tools
    plan = make().plan(messages, system=system, tools=tools)
    transition = make().compact_and_transition("parent", messages, system=system, tools=tools)
    assert transition is not None
    result = transition.summary.tokens_after
    low, high = plan.expected_tokens_low, plan.expected_tokens_after

    assert plan.strategy in (transition.summary.strategy, "summarize", "prune")
    assert high < plan.decision.usage.tokens  # no promise of growth
    if plan.summary_allowance:  # a summary to write: a range, from no summary to its cap
        assert low < high
        # The low end is an estimate too: it may be above the result by the estimate's error.
        assert low * 0.9 <= result <= high, (low, result, high)
    elif low == high:  # one estimate
        assert abs(high - result) <= 0.25 * result, (high, result)
    else:  # where an estimate decides between two cuts, both ends
        assert low * 0.9 <= result <= high * 1.1, (low, result, high)
    if transition.summary.strategy == plan.strategy and plan.strategy != "prune":
        kept = len(transition.compacted_messages) - 1
        assert kept <= plan.verbatim_messages  # what it keeps is what the preview said, or less


# -- preserved state ------------------------------------------------------------------------


def test_the_preview_names_the_preserved_state_sources_not_headings_inside_files() -> None:
    restored = "## Recently read files\n### README.md\n```\n# Scratch\nnotes\n```"
    hooks = [
        PreservedStateHook("todos", lambda: "## Todos\n- [ ] fix the parser"),
        PreservedStateHook("recent files", lambda: restored),
        PreservedStateHook("phase", lambda: ""),  # nothing to preserve: not listed
    ]
    compacter = ConversationCompacter(
        model_name="claude-test",
        context_window=20_000,
        model=FunctionModel(lambda request: "a summary"),
        settings=CompactionSettings(strategy="summarize"),
        hooks=hooks,
    )
    plan = compacter.plan(history(12))
    assert plan.preserved_sections == ["ledger", "todos", "recent files"]
    report = plan_report(plan)
    assert "preserved state: ledger, todos, recent files" in report
    assert "Scratch" not in report
