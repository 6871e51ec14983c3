"""The loop is composed of parts it holds (no mixins, no methods declared for another class to
provide), and what a compaction carries for the next user turn has one owner, ``NextTurn``,
held by the compacter; the core only returns it (``CompactionOutcome.later``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, text_reply
from support.loop_scripts import filler

from agentloop import AgentLoop, AnthropicModel, ConversationCompacter
from agentloop._core.values.messages import Message
from agentloop._loop.compaction_draft import CompactionDraft, CompactionDrafts
from agentloop._loop.next_turn import NextTurn
from agentloop._loop.server_steps import ServerSteps
from agentloop._loop.stop_reasons import ReplyRoom
from agentloop._loop.store_writes import StoreWrites

ROOT = Path(__file__).resolve().parents[1]
SONNET_55 = "claude-sonnet-5-5"


def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted((ROOT / "agentloop").rglob("*.py"))
    ]


def _is_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body that only raises ``NotImplementedError`` (after its docstring, if any)."""
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def test_no_method_is_a_stub_for_another_class_to_provide() -> None:
    stubs = [
        f"{path}:{node.lineno} {node.name}"
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_stub(node)
    ]
    assert stubs == []


def test_the_loop_inherits_nothing_and_its_parts_declare_none_of_its_attributes() -> None:
    assert AgentLoop.__mro__ == (AgentLoop, object)
    for part in (AgentLoop, ServerSteps, ReplyRoom, CompactionDrafts, StoreWrites):
        assert part.__bases__ == (object,), part
        # A class-level annotation is an attribute declared for a host to provide.
        assert vars(part).get("__annotations__", {}) == {}, part


def test_next_turn_holds_one_item_placed_once_and_puts_it_back_from_a_checkpoint() -> None:
    waiting: NextTurn[str] = NextTurn()
    assert waiting.peek() is None and waiting.take() is None
    waiting.hold("ledger")
    restore = waiting.checkpoint()
    waiting.hold("another")
    assert waiting.peek() == "another" and waiting.peek() == "another"  # peeking leaves it
    restore()
    assert waiting.take() == "ledger"
    assert waiting.take() is None  # taken once
    waiting.hold("x")
    waiting.drop()
    assert waiting.peek() is None


def test_nothing_in_agentloop_assigns_later_but_its_owner() -> None:
    writes = [
        f"{path}:{node.lineno}"
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for leaf in (target.elts if isinstance(target, ast.Tuple) else [target])
        if isinstance(leaf, ast.Attribute) and leaf.attr == "later"
    ]
    assert writes == []


def test_later_reads_what_waits_and_setting_it_is_deprecated_but_still_works() -> None:
    compacter = ConversationCompacter()  # (a compacter waiting for its loop)
    carried = Message.system("carried context")
    assert compacter.later is None
    compacter.next_turn.hold(carried)
    assert compacter.later is carried
    with pytest.warns(DeprecationWarning, match="next_turn"):
        compacter.later = None
    assert compacter.next_turn.peek() is None
    with pytest.warns(DeprecationWarning):
        compacter.later = carried
    assert compacter.next_turn.peek() is carried


def test_what_a_compaction_between_turns_carries_waits_with_the_compacter_for_the_next_message(
    fake_api: FakeAnthropicServer,
) -> None:
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=0)
    compacter = ConversationCompacter(model_name=SONNET_55, context_window=100_000, model=model)
    loop = AgentLoop(model=model, model_name=SONNET_55, compacter=compacter)
    for n in range(4):
        fake_api.enqueue(text_reply(filler(f"answer {n}", 120)))
        loop.run_turn(f"request {n}: rename KEY-{n}")
    earlier = Message.system("what an earlier compaction carried")
    compacter.next_turn.hold(earlier)

    # A reviewed compaction holds what its child carries while it is shown; dropped, the
    # compacter is as it was (the draft's part was given the compacter, not the loop).
    draft = loop.draft_compaction()
    assert isinstance(draft, CompactionDraft)
    drafted = compacter.next_turn.peek()
    assert drafted is not None and drafted is not earlier
    draft.drop()
    assert compacter.next_turn.peek() is earlier

    outcome = loop.compact()
    assert outcome is not None and outcome.transition is not None
    # The child ends with a reply: the core returns what it cannot place yet, and the
    # compacter holds exactly that (in place of what waited before).
    assert outcome.transition.compacted_messages[-1].role == "assistant"
    assert outcome.later is not None
    assert compacter.next_turn.peek() is outcome.later

    fake_api.enqueue(text_reply("KEY-3 is renamed."))
    loop.run_turn("and now?")

    body = fake_api.message_requests[-1]
    user_at = max(i for i, m in enumerate(body["messages"]) if m["role"] == "user")
    placed = body["messages"][user_at + 1]
    assert placed["role"] == "system"
    assert [block["text"] for block in placed["content"]] == [
        block["text"] for block in outcome.later.content
    ]
    assert "what an earlier compaction carried" not in str(body["messages"])
    assert compacter.next_turn.peek() is None  # placed once
    assert fake_api.violations == []
