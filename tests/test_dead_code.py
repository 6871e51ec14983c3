"""No dead code: vulture reads agentloop/, sessions/ and examples/ (the examples
are the users) and every name it finds unused is either gone or listed here with its reason.

A name used only by tests is dead too: tests are not scanned."""

from __future__ import annotations

from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("agentloop", "sessions", "examples")

# Called from outside, by name: module hooks, pydantic, decorators, frameworks.
IGNORED_NAMES = [
    "__getattr__",  # lazy re-exports of the public API (PEP 562)
    "__dir__",
    "model_config",  # pydantic's configuration
    "m0*_*",  # the store's named migrations, found by their names
    "exc_type",  # context-manager protocol arguments
    "tb",
]
IGNORED_DECORATORS = ["@field_validator", "@*.add", "@model_validator"]

# Public API that nothing inside uses (users call it), and typed fields the API defines.
PUBLIC: dict[str, str] = {
    "arun_turn": "AgentLoop's async API",
    "acompact": "AgentLoop's async API",
    "aprepare": "ConversationCompacter's async API",
    "compacted_params": "CompactionTransition: the compacted history as plain API dicts",
    "records": "ToolHistory: the records, for a caller's own hook",
    "paths": "RecentFiles: the files tracked, newest first",
    "reported_tokens": "ContextUsage: the part the API reported",
    "estimated_tokens": "ContextUsage: the part estimated locally",
    "preserved_state": "CompactionPlan: the preserved state a compaction would carry",
    "NONE": "sessions' CompactionStrategy constants of the seed's compact API",
    "SUMMARIZE": "sessions' CompactionStrategy constants of the seed's compact API",
    "sliding_window": "sessions' CompactionStrategy constructor of the seed's compact API",
    "TypedBlock": "blocks: the union of the typed blocks, for callers who type their own",
    "citations": "blocks: a field of the API's text and document blocks",
    "cache_control": "blocks: a field the API's blocks may carry",
    "encrypted_content": "blocks: a field of the API's compaction block",
    "tool_changes": "blocks: a field of the API's compaction block",
    "on_text_changed": "prompt_toolkit's buffer event, subscribed to",
    "close_with": "McpServers: the MCP servers end with the user's AgentLoop",
    # LangChain's AgentMiddleware and pydantic-ai's capability hooks, called by the frameworks.
    "agentloop_session_id": "LangChain: the state field the middleware adds",
    "state_schema": "LangChain: the middleware's state",
    "wrap_model_call": "LangChain hook",
    "awrap_model_call": "LangChain hook",
    "aafter_agent": "LangChain hook",
    "get_serialization_name": "pydantic-ai hook",
    "before_model_request": "pydantic-ai hook",
    "after_run": "pydantic-ai hook",
}


def _unused() -> list[str]:
    finder = vulture.Vulture(
        ignore_names=IGNORED_NAMES + list(PUBLIC), ignore_decorators=IGNORED_DECORATORS
    )
    finder.scavenge([str(ROOT / path) for path in SCANNED])
    return [
        f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno} {item.typ} {item.name}"
        for item in finder.get_unused_code(min_confidence=60)
        # A `yield` after `return` is how a generator with no effects is written.
        if item.typ != "unreachable_code"
        and not str(item.filename).startswith(str(ROOT / "examples"))
    ]


def test_there_is_no_dead_code() -> None:
    assert _unused() == []


def test_every_exception_is_still_needed() -> None:
    finder = vulture.Vulture(ignore_names=IGNORED_NAMES, ignore_decorators=IGNORED_DECORATORS)
    finder.scavenge([str(ROOT / path) for path in SCANNED])
    flagged = {item.name for item in finder.get_unused_code(min_confidence=60)}
    assert sorted(name for name in PUBLIC if name not in flagged) == []


def test_the_finder_sees_dead_code(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text(
        "def used():\n    return 1\n\n\ndef forgotten():\n    return used()\n"
    )
    finder = vulture.Vulture()
    finder.scavenge([str(tmp_path)])
    assert [item.name for item in finder.get_unused_code(min_confidence=60)] == ["forgotten"]
