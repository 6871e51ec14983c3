"""The public API is pinned: a change to it must be deliberate (and show up in this diff)."""

from __future__ import annotations

import importlib

import agentloop
import sessions

AGENTLOOP_API = {
    "AgentLoop", "AgentloopError", "AnthropicModel", "AsyncModel", "Calibration",
    "CompactionDecision", "CompactionResult", "CompactionSettings", "CompactionSummary",
    "CompactionTransition", "ConfigurationError", "ContextFullError", "ContextUsage",
    "ContextWindowResolver", "ConversationCompacter", "FunctionTool", "LoopEvents", "Message",
    "MessageParam", "MessageValidationError", "Model", "ModelError", "ModelLimits",
    "ModelRequest", "ModelResponse", "PreservedStateHook", "PromptTooLongError", "SummaryInfo",
    "TokenEstimator", "Tool", "ToolResult", "TurnResult", "Usage", "__version__",
    "as_messages", "choose_tail_start", "is_safe_boundary", "prune_tool_outputs",
    "sliding_window", "to_params", "validate_messages", "validate_threshold",
}  # fmt: skip


def test_agentloop_public_names_are_pinned() -> None:
    assert set(agentloop.__all__) == AGENTLOOP_API


def test_every_public_name_resolves_lazily() -> None:
    for name in agentloop.__all__:
        assert getattr(agentloop, name) is not None, name
    # Names are re-exported from the private module that defines them, not copied.
    assert (
        agentloop.ConversationCompacter
        is importlib.import_module("agentloop._core.compacter").ConversationCompacter
    )


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        agentloop.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("expected AttributeError")


def test_sessions_public_names_resolve() -> None:
    for name in sessions.__all__:
        assert hasattr(sessions, name), name
    for required in ("SessionStore", "open_store", "CompactionStrategy", "CompactionRecord"):
        assert required in sessions.__all__


def test_testing_doubles_are_shipped_in_the_package() -> None:
    from agentloop import testing

    assert {"ScriptedModel", "FunctionModel"} <= set(testing.__all__)
