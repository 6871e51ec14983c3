"""What a model can do is read from its profile only, looked up in one place.

The static half walks every module of ``agentloop``: outside the lookup (``profile_table``) and
the adapter that fills profiles from the Models API (``anthropic_capabilities``), no module holds
a table keyed by model ids, a regular expression over model ids, an ``isinstance`` on a
capability protocol or a call of a capability method on another object. The behavioural half
declares abilities on a test double's ``profile=`` and sees the compacter follow them, through
the public API.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ConversationCompacter,
    LoopEvents,
    Message,
    ModelProfile,
    ModelRequest,
)
from agentloop._core.values.profile_table import builtin_profile, profile_of
from agentloop.testing import FunctionModel, ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
ONE_PLACE = {
    "agentloop/_core/values/profile_table.py",
    "agentloop/_adapters/anthropic_capabilities.py",
}
# A model-id pattern names a family or a snapshot date; a model table is keyed by ids.
_FAMILY = re.compile(r"claude|opus|sonnet|haiku|fable|mythos|\\d\{8\}")
_MODEL_KEY = re.compile(r"^(claude-|opus$|sonnet$|haiku$|fable$|mythos$)")
PROTOCOLS = {"ServerCompactingModel", "OnDemandCompactingModel", "OutputLimitedModel"}
ABILITY_METHODS = {
    "supports_server_compaction",
    "supports_on_demand_compaction",
    "max_reply_tokens",
    "accepts_system_messages",
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted((ROOT / "agentloop").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        yield name, ast.parse(path.read_text(encoding="utf-8"), name)


def _named(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _findings(tree: ast.Module) -> list[str]:
    """What in ``tree`` reads a model's ability by other means than its profile."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _named(node.func)
            if callee == "isinstance" and len(node.args) == 2:
                kinds = node.args[1]
                names = [_named(e) for e in kinds.elts] if isinstance(kinds, ast.Tuple) else []
                names.append(_named(kinds))
                names += [_named(e) for e in ast.walk(kinds) if isinstance(e, ast.expr)]
                hit = PROTOCOLS.intersection(n for n in names if n)
                if hit:
                    found.append(f"line {node.lineno}: isinstance on {sorted(hit)}")
            elif callee in ABILITY_METHODS:
                receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                if not (isinstance(receiver, ast.Name) and receiver.id == "self"):
                    found.append(f"line {node.lineno}: calls {callee}")
            elif callee in ("compile", "match", "search", "fullmatch") and node.args:
                pattern = node.args[0]
                if (
                    isinstance(pattern, ast.Constant)
                    and isinstance(pattern.value, str)
                    and _FAMILY.search(pattern.value)
                ):
                    found.append(f"line {node.lineno}: a model-id pattern")
        elif isinstance(node, ast.Dict | ast.Set):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            ids = [
                k.value
                for k in keys
                if isinstance(k, ast.Constant)
                and isinstance(k.value, str)
                and _MODEL_KEY.match(k.value)
            ]
            if len(ids) >= 2:
                found.append(f"line {node.lineno}: a table keyed by model ids ({ids[0]}, ...)")
    return found


def test_abilities_are_read_from_the_profile_only() -> None:
    outside = {
        name: hits
        for name, tree in _modules()
        if name not in ONE_PLACE and (hits := _findings(tree))
    }
    assert outside == {}


def test_the_walk_finds_what_it_forbids() -> None:
    # The one place holds each kind; the walk must see them there, or it proves nothing.
    trees = dict(_modules())
    table = " ".join(_findings(trees["agentloop/_core/values/profile_table.py"]))
    assert "a table keyed by model ids" in table and "a model-id pattern" in table
    assert "isinstance on" in table
    planted = ast.parse(
        "isinstance(m, OutputLimitedModel)\nm.supports_on_demand_compaction('x')\n"
        "PRICES = {'claude-a': 1, 'claude-b': 2}\nre.compile(r'sonnet-(\\d)')\n"
    )
    assert len(_findings(planted)) == 4


# -- the one lookup ----------------------------------------------------------------------------


def test_dated_and_platform_ids_share_their_base_profile() -> None:
    base = builtin_profile("claude-sonnet-4-5")
    for alias in ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5@20250929"):
        dated = builtin_profile(alias)
        assert (dated.context_window, dated.max_output_tokens) == (200_000, 64_000)
        assert dated.thinking_types == base.thinking_types and dated.model == alias
    assert builtin_profile("us.anthropic.claude-opus-4-8-v1:0").system_messages
    assert not builtin_profile("claude-sonnet-5").system_messages
    five = builtin_profile("claude-opus-5-5")
    assert five.signed_thinking and five.thinks_by_default and five.context_window == 1_000_000
    assert not builtin_profile("claude-opus-4-6").signed_thinking
    assert builtin_profile("claude-haiku-4-5").price_known
    assert not builtin_profile("claude-nova-9").price_known  # an estimate, said so


def test_a_declared_profile_wins_and_takes_the_model_name() -> None:
    declared = ModelProfile("mine", context_window=50_000, on_demand_compaction=True)
    model = FunctionModel(lambda _r: "ok", profile=declared)
    found = profile_of(model, "claude-sonnet-5-5")
    assert found.context_window == 50_000 and found.on_demand_compaction
    assert found.model == "claude-sonnet-5-5"


class _OlderAdapter:
    """A user's adapter written against the capability methods, with no profile."""

    def complete(self, request: ModelRequest, on_text: object = None) -> object:
        raise AssertionError("not called")

    def supports_on_demand_compaction(self, model: str) -> bool:
        return True

    def supports_server_compaction(self, model: str) -> bool:
        raise RuntimeError("cannot tell")

    def max_reply_tokens(self, model: str) -> int | None:
        return 4_321


def test_an_older_adapter_is_folded_into_its_profile() -> None:
    profile = profile_of(_OlderAdapter(), "claude-sonnet-5-5")
    assert profile.on_demand_compaction and profile.max_output_tokens == 4_321
    assert not profile.server_compaction  # a method that fails says no
    assert profile.context_window == 1_000_000  # the table's fact of the model
    plain = profile_of(None, "claude-sonnet-5-5")
    assert not plain.on_demand_compaction and plain.max_output_tokens is None


# -- the compacter follows the profile ---------------------------------------------------------

SONNET = "claude-sonnet-5-5"  # the table: 1M window, system messages, no on-demand compaction


def _history(turns: int = 6, words: int = 300) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [Message.user(f"request {n}: " + "word " * words), Message.assistant(f"answer {n}")]
    out.append(Message.user("the newest request " + "word " * 50))
    return out


def _compacted(model: ScriptedModel) -> list[Message]:
    compacter = ConversationCompacter(
        model_name=SONNET,
        context_window=8_000,
        model=model,
        max_output_tokens=500,
        settings=CompactionSettings(prepare_at=None),
    )
    result = compacter.compact_and_transition("p", _history(), force=True)
    assert result is not None
    return list(result.compacted_messages)


@pytest.mark.parametrize("on_demand", [True, False])
def test_on_demand_compaction_follows_the_profile(on_demand: bool) -> None:
    # The flag says the opposite of the profile: the profile decides.
    model = ScriptedModel(
        on_demand_compaction=not on_demand,
        profile=ModelProfile(SONNET, on_demand_compaction=on_demand, system_messages=True),
    )
    child = _compacted(model)
    asked = [r for r in model.requests if r.compaction is not None]
    assert bool(asked) == on_demand
    assert (child[0].content[0]["type"] == "compaction") == on_demand


@pytest.mark.parametrize("system_messages", [True, False])
def test_where_the_carried_context_goes_follows_the_profile(system_messages: bool) -> None:
    # Sonnet 5.5 reads system messages by the table; the declared profile says otherwise.
    model = ScriptedModel(
        profile=ModelProfile(SONNET, on_demand_compaction=True, system_messages=system_messages)
    )
    child = _compacted(model)
    assert child[0].content[0]["type"] == "compaction"
    assert any(m.role == "system" for m in child) == system_messages
    assert (child[-1].role == "user") != system_messages
    assert "Context carried over" in child[-1].text


def test_the_window_comes_from_the_profile() -> None:
    small = FunctionModel(lambda _r: "ok", profile=ModelProfile(SONNET, context_window=40_000))
    table = FunctionModel(lambda _r: "ok")
    narrow = ConversationCompacter(model_name=SONNET, model=small)
    wide = ConversationCompacter(model_name=SONNET, model=table)
    assert (narrow.context_window, narrow.window_source) == (40_000, "declared")
    assert (wide.context_window, wide.window_source) == (1_000_000, "builtin")
    msgs = _history(80, 600)
    assert narrow.should_compact(msgs).compact
    assert not wide.should_compact(msgs).compact


def test_the_reply_size_follows_the_profiles_output_limit() -> None:
    sizes: list[int] = []

    def answer(request: ModelRequest) -> str:
        sizes.append(request.max_tokens)
        return "done"

    limited = FunctionModel(answer, profile=ModelProfile(SONNET, max_output_tokens=20_000))
    AgentLoop(model=limited, model_name=SONNET, max_tokens=4_096).run_turn("hello")
    unknown = FunctionModel(answer, profile=ModelProfile(SONNET))
    AgentLoop(model=unknown, model_name=SONNET, max_tokens=4_096).run_turn("hello")
    assert sizes == [20_000, 4_096]


class _Warnings(LoopEvents):
    def __init__(self) -> None:
        self.said: list[str] = []

    def on_warning(self, message: str) -> None:
        self.said.append(message)


@pytest.mark.parametrize("offers", [True, False])
def test_server_compaction_follows_the_profile(offers: bool) -> None:
    profile = ModelProfile(SONNET, server_compaction=offers)
    model = FunctionModel(lambda _r: "done", profile=profile)
    settings = CompactionSettings(strategy="server")
    compacter = ConversationCompacter(model_name=SONNET, model=model, settings=settings)
    events = _Warnings()
    AgentLoop(model=model, model_name=SONNET, compacter=compacter, events=events).run_turn("hi")
    assert (compacter.settings.strategy == "server") == offers
    assert bool(events.said) != offers
