"""``search_history``: the agent looks up what only the earlier, compacted parts of its
conversation still hold.

A compaction never deletes: every parent session keeps its messages (tool inputs and results
included). This tool runs the store's full-text search (:meth:`SessionStore.search_messages`)
over the whole lineage of the current session, and only over it, and returns the best matches
as short excerpts saying where each comes from. Excerpts are cut from text whose secrets were
redacted first (so a cut never shows half a secret), and the result is redacted again, like
every tool result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any

from agentloop._agent.base import CodingTool, InputError, optional_int, required_str
from agentloop._agent.secrets import redact
from agentloop._core.values.tool import Tool, ToolResult
from agentloop._sessions import SearchHit, SearchQueryError, SessionNotFoundError, SessionStore

__all__ = ["SearchHistoryTool", "search_history_tool"]

TOOL_NAME = "search_history"
DEFAULT_RESULTS = 5
MAX_RESULTS = 20
DEFAULT_EXCERPT_CHARS = 300
MIN_EXCERPT_CHARS = 80
MAX_EXCERPT_CHARS = 1000
MAX_OUTPUT_CHARS = 8000
"""The whole result stays under this many characters, whatever the limits asked for."""

DESCRIPTION = (
    "Search the full history of this conversation, including the earlier parts that were "
    "compacted into a summary: every message, tool call and tool result is kept. Use it when "
    "you need a detail that is not in your context (a name, a value, a decision, an error, "
    "what a command printed) instead of guessing. Returns the best-matching excerpts, each "
    "with the session and message it comes from. Matches whole words, all of them; end a word "
    "with * to match its prefix."
)
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Words to look for, e.g. 'deploy key' or 'migration error'.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RESULTS,
            "description": f"How many matches at most (default {DEFAULT_RESULTS}).",
        },
        "excerpt_chars": {
            "type": "integer",
            "minimum": MIN_EXCERPT_CHARS,
            "maximum": MAX_EXCERPT_CHARS,
            "description": f"Characters per excerpt (default {DEFAULT_EXCERPT_CHARS}).",
        },
    },
    "required": ["query"],
}


def _bounded(tool_input: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = optional_int(tool_input, key, default, minimum=low)
    if value > high:
        raise InputError(f"parameter {key!r} must be at most {high}, got {value}")
    return value


def _origin(hit: SearchHit, current: str) -> str:
    if hit.tool_name is not None:
        what = f"{'result' if hit.role == 'user' else 'call'} of {hit.tool_name}"
    else:
        what = hit.role
    where = "this session" if hit.session_id == current else "earlier session"
    when = hit.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{where} {hit.session_id[:8]}, message #{hit.seq + 1} ({what}), {when}"


def render_hits(hits: list[SearchHit], query: str, current: str, *, some_words: bool) -> str:
    """The tool's answer: one entry per hit, best first, within :data:`MAX_OUTPUT_CHARS`."""
    if not hits:
        return f"No message of this conversation matches {query!r}."
    count = f"{len(hits)} match{'es' if len(hits) != 1 else ''}"
    if some_words:
        head = f"No message holds every word of {query!r}; {count} holding some, best first:"
    else:
        head = f"{count} for {query!r} in this conversation's history, best first:"
    parts = [head]
    size = len(head)
    for number, hit in enumerate(hits, start=1):
        entry = f"[{number}] {_origin(hit, current)}\n{hit.excerpt}"
        if size + len(entry) + 2 > MAX_OUTPUT_CHARS:
            left = len(hits) - number + 1
            parts.append(f"({left} more not shown: the result is capped; narrow the query.)")
            break
        parts.append(entry)
        size += len(entry) + 2
    return "\n\n".join(parts)


class SearchHistoryTool(CodingTool):
    """Full-text search over the current conversation's lineage in ``store``."""

    def __init__(self, store: SessionStore, session_id: str | Callable[[], str]) -> None:
        super().__init__(TOOL_NAME, DESCRIPTION, INPUT_SCHEMA)
        self.store = store
        self._session_id = session_id

    def current_session(self) -> str:
        """The session the conversation is in now (it moves to a child at each compaction)."""
        return self._session_id() if callable(self._session_id) else self._session_id

    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        query = required_str(tool_input, "query")
        limit = _bounded(tool_input, "limit", DEFAULT_RESULTS, 1, MAX_RESULTS)
        width = _bounded(
            tool_input, "excerpt_chars", DEFAULT_EXCERPT_CHARS, MIN_EXCERPT_CHARS, MAX_EXCERPT_CHARS
        )
        current = self.current_session()

        def run(any_term: bool) -> list[SearchHit]:
            return self.store.search_messages(
                query,
                session_id=current,
                limit=limit,
                excerpt_chars=width,
                any_term=any_term,
                exclude_tools=(TOOL_NAME,),  # earlier searches quote what they found
                redact=redact,
            )

        try:
            hits = run(False)
            some_words = False
            if not hits and len(query.split()) > 1:
                hits, some_words = run(True), True
        except SearchQueryError as error:
            raise InputError(str(error)) from None
        except SessionNotFoundError:
            return ToolResult("Nothing of this conversation is stored yet.")
        return ToolResult(render_hits(hits, query, current, some_words=some_words and bool(hits)))


def search_history_tool(store: SessionStore, session_id: str | Callable[[], str]) -> Tool:
    """The ``search_history`` tool over ``store``: full-text search of the whole lineage of
    ``session_id`` (any session of the conversation: its compacted ancestors included; a
    callable is asked at each call, e.g. ``lambda: loop.session_id``), redacted, bounded."""
    return SearchHistoryTool(store, session_id)
