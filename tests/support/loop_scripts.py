"""Helpers shared by the tests (moved from test_loop.py)."""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fake_api import (
    FakeAnthropicServer,
    ReplySpec,
    text_reply,
)

from agentloop import (
    AgentLoop,
    AnthropicModel,
    CompactionSettings,
    CompactionTransition,
    ConversationCompacter,
    FunctionTool,
    LoopEvents,
    Message,
    ModelResponse,
    to_params,
)
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM, SUMMARY_REQUEST_OPENING
from agentloop._core.measuring.context import CompactionDecision
from sessions import Lease, NewMessage, Session, SqliteSessionStore, StoredMessage
from sessions._sql_store import SqlSessionStore

MODEL = "claude-sonnet-4-6"


SYSTEM = "You are a test agent. Record notes with the note tool when asked."


SUMMARY = (
    "## Goal\nWrite the notes the user asks for.\n## Constraints and decisions\nnone\n"
    "## Progress\nNotes are being written.\n## Files read and modified\nnone\n"
    "## Open todos\nnone\n## Errors and their state\nnone\n## Next steps\nContinue."
)


PREFIX_START = "This conversation was compacted"


WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda")


def filler(label: str, words: int) -> str:
    """``words`` distinct-ish words (about one token each), starting with ``label``."""
    cycle = itertools.cycle(WORDS)
    return label + ": " + " ".join(next(cycle) for _ in range(words))


def _note(tool_input: Mapping[str, Any]) -> str:
    # Short on purpose: outputs under 200 characters are never pruned, so "auto" summarizes.
    return f"note {tool_input.get('n')} recorded"


NOTE_TOOL = FunctionTool(
    name="note",
    description="Record a numbered note.",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    },
    function=_note,
)


def system_text(body: Mapping[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return "".join(str(block.get("text", "")) for block in system if isinstance(block, dict))
    return str(system or "")


def is_summary_request(body: Mapping[str, Any]) -> bool:
    """A summary request: one that continues the conversation (its last user message ends with
    the compaction instruction) or one over a rendered transcript (the summarizer's system)."""
    if system_text(body) == SUMMARIZER_SYSTEM:
        return True
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages else None
    last = content[-1] if isinstance(content, list) and content else None
    text = last.get("text") if isinstance(last, dict) else content
    return isinstance(text, str) and text.startswith(SUMMARY_REQUEST_OPENING)


def unmarked(value: Any) -> Any:
    """``value`` (a request body or part of one) without its prompt-cache markers: what the
    conversation holds, to compare with what is stored."""
    if isinstance(value, dict):
        return {key: unmarked(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list):
        return [unmarked(item) for item in value]
    return value


def first_text(body: Mapping[str, Any]) -> str:
    """The first text of the first message of a request body."""
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return str(content[0].get("text", ""))


API_SUMMARY_START = "Summary by the server of"


def api_summary(body: Mapping[str, Any]) -> str | None:
    """The API's summary a request opens with (the content of the compaction block alone in its
    first message, an assistant one), or None when it does not open with one."""
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    content = first.get("content")
    if first.get("role") != "assistant" or not isinstance(content, list) or len(content) != 1:
        return None
    block = content[0]
    if block.get("type") != "compaction" or not isinstance(block.get("content"), str):
        return None
    return str(block["content"])


def opens_with_api_summary(body: Mapping[str, Any]) -> bool:
    """The request opens with a summary the (test) API wrote."""
    return (api_summary(body) or "").startswith(API_SUMMARY_START)


def compaction_requests(bodies: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The on-demand compaction requests among ``bodies`` (those with ``compaction``)."""
    return [body for body in bodies if body.get("compaction") is not None]


def request_text(body: Mapping[str, Any]) -> str:
    """All text of a request's messages, joined (to look for what reached the server)."""
    parts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                parts.append(str(block["text"]))
    return "\n".join(parts)


class Script:
    """The fake model: summarizer requests get ``summary``; conversation requests are answered
    from ``replies`` (then "done"). Both kinds of request bodies are recorded in order."""

    def __init__(self, summary: str = SUMMARY) -> None:
        self.summary = summary
        self.summary_delay = 0.0
        """Seconds each summary reply takes (a summarizer is slower than a turn)."""
        self.summary_reply: ReplySpec | None = None
        """Answer summary requests with this instead (an error, say)."""
        self.replies: deque[ReplySpec] = deque()
        self.conversation: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        if is_summary_request(body):
            self.summaries.append(body)
            if self.summary_reply is not None:
                return self.summary_reply
            return text_reply(self.summary, delay=self.summary_delay)
        self.conversation.append(body)
        return self.replies.popleft() if self.replies else text_reply("done")

    def add(self, *replies: ReplySpec) -> None:
        self.replies.extend(replies)


class Recorder(LoopEvents):
    """Keeps what the loop reported; snapshots the history when a compaction starts."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.loop: AgentLoop | None = None
        self.transitions: list[CompactionTransition] = []
        self.snapshots: list[list[Message]] = []
        """The history (and its session id) as it was when each compaction started."""
        self.snapshot_sessions: list[str] = []
        self.requests_before: list[int] = []
        """How many conversation requests the server had seen at each transition."""
        self.skipped: list[str] = []
        self.usages: list[CompactionDecision] = []
        self.text: list[str] = []
        self.replies: list[ModelResponse] = []

    def on_text(self, delta: str) -> None:
        self.text.append(delta)

    def on_usage(self, decision: CompactionDecision) -> None:
        self.usages.append(decision)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        assert self.loop is not None
        self.snapshots.append(list(self.loop.messages))
        self.snapshot_sessions.append(self.loop.session_id)

    def on_transition(self, transition: CompactionTransition) -> None:
        self.transitions.append(transition)
        self.requests_before.append(len(self.script.conversation))

    def on_compaction_skipped(self, reason: str) -> None:
        self.skipped.append(reason)

    def on_reply(self, response: ModelResponse) -> None:
        self.replies.append(response)


def scripted_loop(
    fake_api: FakeAnthropicServer,
    store: SqliteSessionStore,
    workspace: Path,
    *,
    window: int = 4000,
    enabled: bool = True,
    max_retries: int = 0,
    tools: Sequence[Any] = (NOTE_TOOL,),
    prepare_at: float | None = None,
) -> tuple[AgentLoop, Script, Recorder]:
    """A loop on the fake API; ``prepare_at`` None (these tests' default): every summary is
    written at the trigger (the prepared path has its own tests)."""
    script = Script()
    fake_api.handler = script
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url, max_retries=max_retries)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=window,
        model=model,
        max_output_tokens=512,
        # These tests follow agentloop's own summarizer (the API's: test_on_demand_e2e).
        settings=CompactionSettings(enabled=enabled, prepare_at=prepare_at, api_summary=False),
    )
    recorder = Recorder(script)
    loop = AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=compacter,
        store=store,
        workspace=str(workspace),
        title="test",
        system=SYSTEM,
        tools=tools,
        max_tokens=512,
        events=recorder,
    )
    recorder.loop = loop
    return loop, script, recorder


def params(messages: list[Message]) -> list[dict[str, Any]]:
    return [dict(p) for p in to_params(messages)]


def stored_params(store: SqliteSessionStore, session_id: str) -> list[dict[str, Any]]:
    return [dict(m.to_param()) for m in store.get_messages(session_id)]


class WriteRecorder(SqlSessionStore):
    """Mixed in before a real store class: notes the thread of every write (kind, thread id)."""

    write_threads: list[tuple[str, int]]

    def create_session(self, **options: Any) -> Session:
        self._note("create")
        return super().create_session(**options)

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[NewMessage | Mapping[str, Any]],
        *,
        lease: Lease | None = None,
    ) -> list[StoredMessage]:
        self._note("append")
        return super().append_messages(session_id, messages, lease=lease)

    def transition(self, parent_id: str, **options: Any) -> Session:
        self._note("transition")
        return super().transition(parent_id, **options)

    def _note(self, kind: str) -> None:
        self.__dict__.setdefault("write_threads", []).append((kind, threading.get_ident()))
