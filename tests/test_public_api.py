"""The public API is pinned: a change to it must be deliberate (and show up in this diff)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import agentloop
import sessions

ROOT = Path(__file__).resolve().parent.parent

AGENTLOOP_API = {
    "AgentLoop", "AgentloopError", "history_betas", "AnthropicModel", "AsyncModel", "Calibration",
    "CompactionDecision", "CompactionOutcome", "CompactionPlan", "CompactionSettings",
    "CompactionSummary", "CompactionTransition", "ConfigurationError", "ContextFullError",
    "ContextUsage", "ContextWindowResolver", "ConversationCompacter", "FunctionTool",
    "LoopEvents", "Message", "MessageParam", "MessageValidationError", "Model", "ModelError",
    "ModelLimits", "ModelProfile", "ModelRequest", "ModelResponse", "PreservedStateHook",
    "PromptTooLongError",
    "RecentFiles", "SummaryInfo", "TokenEstimator", "Tool", "ToolResult", "TurnResult", "Usage",
    "__version__", "as_messages", "choose_tail_start", "is_safe_boundary",
    "message_from_response", "prune_tool_outputs", "recent_files_hook", "search_history_tool",
    "to_params", "McpServers", "open_mcp", "aopen_mcp",
    "validate_messages", "validate_threshold", "with_cache_breakpoints",
    # what a tool call did: the seam, and the recognizers that ship
    "ToolCall", "ToolFacts", "FileTouched", "CommandRan", "TodoState", "default_tool_facts",
    "ON_DEMAND_COMPACTION_BETA",
}  # fmt: skip

SESSIONS_API = {
    "AmbiguousSessionIdError", "CompactionEntry", "CompactionError", "CompactionRecord",
    "CompactionStrategy", "Conversation", "CopyReport", "InvalidSessionIdError", "Lease",
    "LineageExport", "NewMessage", "PostgresSessionStore", "Role", "SearchHit",
    "SearchQueryError", "Session",
    "SessionCompactedError", "SessionError", "SessionLeasedError", "SessionNotFoundError",
    "SessionStatus", "SessionStore", "SqliteSessionStore", "StoreBusyError",
    "StoreConnectionError", "StoreCorruptError", "StoreError", "StoreMissingError",
    "StoreVersionError", "StoredMessage", "UNSET", "copy_store", "default_lease_owner",
    "default_store_path", "new_session_id", "open_store", "pair_safe_cut", "short_id",
    "validate_session_id", "validate_session_ref", "workspace_key",
}  # fmt: skip


def test_agentloop_public_names_are_pinned() -> None:
    assert set(agentloop.__all__) == AGENTLOOP_API
    assert set(sessions.__all__) == SESSIONS_API


def test_public_names_come_from_the_rooms_that_define_them() -> None:
    # Lazy re-exports resolve to the defining private module's object, not a copy.
    for package, prefix in ((agentloop, "agentloop._"), (sessions, "sessions._")):
        for name in package.__all__:
            value = getattr(package, name)
            module = getattr(value, "__module__", None)
            if isinstance(value, types.GenericAlias):
                continue  # a type alias such as MessageParam (dict[str, Any])
            if inspect.isclass(value) or inspect.isfunction(value):
                assert module is not None and module.startswith(prefix), (name, module)


def _agentloop_imports(source: str) -> set[str]:
    return {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == "agentloop"
        for alias in node.names
    }


def test_names_the_readme_and_examples_import_are_public() -> None:
    readme = ROOT.joinpath("README.md").read_text()
    sources = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    sources += [p.read_text() for p in sorted(ROOT.joinpath("examples").glob("*.py"))]
    imported = set().union(*(_agentloop_imports(source) for source in sources))
    assert imported, "the README and examples import from agentloop"
    assert imported <= AGENTLOOP_API, imported - AGENTLOOP_API


def test_unknown_attribute_is_an_attribute_error() -> None:
    for package in (agentloop, sessions):
        try:
            getattr(package, "NoSuchThing")  # noqa: B009
        except AttributeError as error:
            assert "NoSuchThing" in str(error)
        else:
            raise AssertionError("expected AttributeError")


def test_importing_the_packages_loads_nothing_heavy() -> None:
    # The CLI's start-up depends on it: `import agentloop` and `import sessions` are lazy.
    code = (
        "import sys, agentloop, sessions\n"
        "heavy = ('anthropic', 'pydantic', 'sqlite3', 'tiktoken')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


def test_testing_doubles_are_shipped_in_the_package() -> None:
    from agentloop import testing

    assert {"ScriptedModel", "FunctionModel"} <= set(testing.__all__)
    model = testing.ScriptedModel(["hello"])
    assert isinstance(model, agentloop.Model)
