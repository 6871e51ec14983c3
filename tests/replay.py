"""Replaying a recorded coding session through :class:`AgentLoop` against the fake API.

The fake server answers each conversation request with the transcript's next assistant message
and each summary request with a summary; the loop's tool calls get the transcript's recorded
results, in order. The user's turns are the transcript's requests. So the loop makes the
requests a real run would have made (its own compactions included) and the server bills them
like the API's prompt cache: the figures of the cost tests and of ``benchmarks/bench_cost.py``.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_api import Bill, FakeAnthropicServer, Reply, billed_ratio, text_reply
from test_loop import is_summary_request
from transcripts import Transcript

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
    LoopEvents,
    ToolResult,
)
from agentloop._core.blocks import tool_result_text
from agentloop._core.cache import CacheMode
from agentloop._core.results import CompactionTransition
from agentloop._core.summary import SUMMARIZER_SYSTEM

MODEL = "claude-sonnet-4-6"

Summarizer = Callable[[dict[str, Any]], "str | Reply"]
"""Answers a summary request's body: the summary, or any reply."""


def user_turns(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The transcript's requests: user messages that answer no tool call (their text,
    images and documents)."""
    turns: list[list[dict[str, Any]]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "user" and not any(b.get("type") == "tool_result" for b in blocks):
            turns.append([dict(b) for b in blocks])
    return turns


def replies(messages: Sequence[Mapping[str, Any]]) -> deque[list[dict[str, Any]]]:
    """The assistant messages, without thinking (a replayed signature would not verify)."""
    out: deque[list[dict[str, Any]]] = deque()
    for message in messages:
        if message["role"] == "assistant":
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            kept = [dict(b) for b in blocks if b.get("type") in ("text", "tool_use")]
            out.append(kept or [{"type": "text", "text": "ok"}])
    return out


def recorded_results(messages: Sequence[Mapping[str, Any]]) -> deque[ToolResult]:
    results: deque[ToolResult] = deque()
    for message in messages:
        content = message["content"]
        if message["role"] != "user" or isinstance(content, str):
            continue
        for block in content:
            if block.get("type") == "tool_result":
                text = tool_result_text(block)
                results.append(ToolResult(text or "(no output)", bool(block.get("is_error"))))
    return results


@dataclass
class ReplayRun:
    """What one replay was billed, request by request."""

    bills: list[Bill]
    transitions: list[CompactionTransition]
    summary_calls: list[int]
    """Summarizer requests per compaction."""
    turns: int
    session_starts: list[int]
    """Indexes in ``bills`` of each child session's first request."""

    def prefix_breaks(self) -> list[str]:
        """:func:`prefix_breaks` of this run's requests (summaries over a rendered transcript,
        which share nothing with the conversation by design, left out)."""
        return prefix_breaks(
            [b.body for b in self.bills],
            set(self.session_starts),
            skip=lambda body: _system(body) == SUMMARIZER_SYSTEM,
        )

    @property
    def conversation_bills(self) -> list[Bill]:
        return [b for b in self.bills if not is_summary_request(b.body)]

    @property
    def summary_bills(self) -> list[Bill]:
        return [b for b in self.bills if is_summary_request(b.body)]

    @property
    def ratio(self) -> float:
        return billed_ratio(self.bills)


@dataclass
class _Events(LoopEvents):
    server: FakeAnthropicServer
    transitions: list[CompactionTransition] = field(default_factory=list)
    session_starts: list[int] = field(default_factory=list)

    def on_transition(self, transition: CompactionTransition) -> None:
        self.transitions.append(transition)
        self.session_starts.append(len(self.server.bills))

    def on_warning(self, message: str) -> None:
        pass


class Replayer:
    """The fake server's handler for one transcript: replies in order, summaries on request."""

    def __init__(self, transcript: Transcript, summary: Summarizer) -> None:
        self.replies = replies(transcript.messages)
        self.summary = summary
        self.summary_bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            self.summary_bodies.append(body)
            answer = self.summary(body)
            return text_reply(answer) if isinstance(answer, str) else answer
        if not self.replies:
            return text_reply("done")
        return Reply(content=tuple(self.replies.popleft()))


def replay(
    server: FakeAnthropicServer,
    transcript: Transcript,
    *,
    window: int,
    summary: Summarizer,
    cache: CacheMode = "conversation",
    max_turns: int | None = None,
    strategy: str = "auto",
    summary_model: str | None = None,
    system: str | None = None,
) -> ReplayRun:
    """Run the transcript's turns through an :class:`AgentLoop` on the real SDK (``system``
    replaces the transcript's system prompt)."""
    handler = Replayer(transcript, summary)
    server.handler = handler
    results = recorded_results(transcript.messages)

    def recorded(_input: Mapping[str, Any]) -> ToolResult:
        return results.popleft() if results else ToolResult("(no output)")

    tools = [
        FunctionTool(t["name"], t.get("description", ""), t["input_schema"], recorded)
        for t in transcript.tools
        if "input_schema" in t  # a server tool (web search) runs on the API, not here
    ]
    model = AnthropicModel(server.client(), prompt_cache=cache)
    settings = CompactionSettings(strategy=strategy, summary_model=summary_model)  # type: ignore[arg-type]
    compacter = ConversationCompacter(
        model=model, model_name=MODEL, context_window=window, settings=settings
    )
    events = _Events(server)
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=compacter,
        system=transcript.system if system is None else system,
        tools=tools,
        events=events,
        max_tool_rounds=200,
    )
    turns = user_turns(transcript.messages)[:max_turns]
    for turn in turns:
        loop.run_turn(turn)
    calls = [t.summary.summary_calls for t in events.transitions]
    return ReplayRun(
        list(server.bills), events.transitions, calls, len(turns), events.session_starts
    )


def body_prefix(body: Mapping[str, Any], messages: int, blocks: int) -> str:
    """Canonical JSON of a request body's tools, system and first ``messages`` messages (the
    last one cut after ``blocks`` blocks), ``cache_control`` markers left out."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    kept = [dict(m) for m in body.get("messages", [])[:messages]]
    if kept:
        content = kept[-1]["content"]
        if isinstance(content, list):
            kept[-1]["content"] = content[:blocks]
    return json.dumps(clean([body.get("tools"), body.get("system"), kept]), sort_keys=True)


def last_message_breakpoint(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """(messages, blocks) up to and including the newest marked message block."""
    found: tuple[int, int] | None = None
    for m, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        for b, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("cache_control"):
                found = (m + 1, b + 1)
    return found


def _system(body: Mapping[str, Any]) -> str:
    system = body.get("system") or []
    if isinstance(system, list):
        return "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system)


def prefix_breaks(
    bodies: Sequence[Mapping[str, Any]],
    session_starts: set[int],
    *,
    skip: Callable[[Mapping[str, Any]], bool] = lambda body: False,
) -> list[str]:
    """Where a request changed a byte before the previous request's newest breakpoint (within
    one session; a child's first request, at ``session_starts``, starts a new message prefix,
    and then only tools and system must stay): one line per break, empty when none."""
    problems: list[str] = []
    kept = [(index, body) for index, body in enumerate(bodies) if not skip(body)]
    for (_, before), (index, after) in itertools.pairwise(kept):
        if body_prefix(before, 0, 0) != body_prefix(after, 0, 0):
            problems.append(f"request {index}: tools or system changed")
            continue
        mark = last_message_breakpoint(before)
        if mark is None or index in session_starts:
            continue
        if body_prefix(before, *mark) != body_prefix(after, *mark):
            problems.append(f"request {index}: a byte before the previous breakpoint changed")
    return problems
