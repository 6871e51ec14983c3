"""Replaying a recorded coding session through :class:`AgentLoop` against the fake API.

The fake server answers each conversation request with the transcript's next assistant message
and each summary request with a summary; the loop's tool calls get the transcript's recorded
results, in order. The user's turns are the transcript's requests. So the loop makes the
requests a real run would have made (its own compactions included) and the server bills them
like the API's prompt cache: the figures of the cost tests and of ``benchmarks/bench_cost.py``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_api import Bill, FakeAnthropicServer, Reply, billed_ratio, text_reply
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
from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.measuring.cache import CacheMode
from agentloop._core.values.blocks import tool_result_text
from support.loop_scripts import is_summary_request

MODEL = "claude-sonnet-4-6"
PREPARE_AT = CompactionSettings().prepare_at

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
    stalls: list[float] = field(default_factory=list)
    """Seconds each compaction held the turn up (its start to the transition)."""

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
    stalls: list[float] = field(default_factory=list)
    started: float | None = None

    def on_compaction_start(self, decision: Any) -> None:
        self.started = time.perf_counter()

    def on_transition(self, transition: CompactionTransition) -> None:
        self.transitions.append(transition)
        self.session_starts.append(len(self.server.bills))
        if self.started is not None:
            self.stalls.append(time.perf_counter() - self.started)
            self.started = None

    def on_compaction_skipped(self, reason: str) -> None:
        self.started = None

    def on_warning(self, message: str) -> None:
        pass


class Replayer:
    """The fake server's handler for one transcript: replies in order, summaries on request."""

    def __init__(
        self,
        transcript: Transcript,
        summary: Summarizer,
        reply_delay: float = 0.0,
        summary_delay: float = 0.0,
    ) -> None:
        self.replies = replies(transcript.messages)
        self.summary = summary
        self.summary_bodies: list[dict[str, Any]] = []
        self.reply_delay = reply_delay
        self.summary_delay = summary_delay

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            self.summary_bodies.append(body)
            answer = self.summary(body)
            if isinstance(answer, str):
                return text_reply(answer, delay=self.summary_delay)
            return answer
        if not self.replies:
            return text_reply("done", delay=self.reply_delay)
        return Reply(content=tuple(self.replies.popleft()), delay=self.reply_delay)


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
    prepare_at: float | None = PREPARE_AT,
    reply_delay: float = 0.0,
    summary_delay: float = 0.0,
    api_summary: bool = False,
) -> ReplayRun:
    """Run the transcript's turns through an :class:`AgentLoop` on the real SDK (``system``
    replaces the transcript's system prompt; ``prepare_at`` None: no summary prepared ahead;
    the delays are how long the server takes for each reply and each summary; ``api_summary``:
    the API writes the summaries where the model offers it, else agentloop's summarizer)."""
    handler = Replayer(transcript, summary, reply_delay, summary_delay)
    server.handler = handler
    results = recorded_results(transcript.messages)

    def recorded(_input: Mapping[str, Any]) -> ToolResult:
        return results.popleft() if results else ToolResult("(no output)")

    tools = [
        FunctionTool(t["name"], t.get("description", ""), t["input_schema"], recorded)
        for t in transcript.tools
        if "input_schema" in t  # a server tool (web search) runs on the API, not here
    ]
    # From settings (not a client): it has the async client a background summary can cancel.
    model = AnthropicModel(
        api_key="test-key", base_url=server.base_url, max_retries=0, prompt_cache=cache
    )
    settings = CompactionSettings(
        strategy=strategy,  # type: ignore[arg-type]
        summary_model=summary_model,
        prepare_at=prepare_at,
        api_summary=api_summary,
    )
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
    try:
        for turn in turns:
            loop.run_turn(turn)
    finally:
        loop.close()
    calls = [t.summary.summary_calls for t in events.transitions]
    return ReplayRun(
        list(server.bills),
        events.transitions,
        calls,
        len(turns),
        events.session_starts,
        events.stalls,
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
    """Where a request changed a byte before the newest breakpoint of the previous request of
    its session (requests of one session open with the same first message; a child's first
    request, at ``session_starts`` or with a first message not seen before, starts a new
    message prefix, and then only tools and system must stay). A summary prepared in the
    background may be answered after the conversation moved on: each request is compared with
    the previous one of its own session, not with whatever came before it. One line per break,
    empty when none."""
    problems: list[str] = []
    kept = [(index, body) for index, body in enumerate(bodies) if not skip(body)]
    sessions: dict[str, list[Mapping[str, Any]]] = {}
    previous: Mapping[str, Any] | None = None
    for index, after in kept:
        if previous is not None and body_prefix(previous, 0, 0) != body_prefix(after, 0, 0):
            problems.append(f"request {index}: tools or system changed")
        previous = after
        earlier = sessions.setdefault(first_message(after), [])
        size = len(after.get("messages") or [])
        # The newest earlier request it can extend (a background summary answered late covers
        # an older, shorter history than the request billed just before it).
        before = next((b for b in reversed(earlier) if len(b.get("messages") or []) <= size), None)
        earlier.append(after)
        if before is None or index in session_starts:
            continue
        mark = last_message_breakpoint(before)
        if mark is None:
            continue
        if body_prefix(before, *mark) != body_prefix(after, *mark):
            problems.append(f"request {index}: a byte before the previous breakpoint changed")
    return problems


def first_message(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or []
    return body_prefix({"messages": messages[:1]}, 1, 10_000) if messages else ""
