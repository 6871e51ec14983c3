"""What the framework integration tests share: the scripted assistant on the test server, and
the checks of the store's lineage.

The assistant answers each user turn with ``TOOL_ROUNDS`` rounds of ``note`` tool calls, then a
text; a summary request (agentloop's, through the same server) is answered with a summary that
repeats the first turn's fact when, and only when, the request showed it to the summarizer.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from fake_api import ReplySpec, text_reply, tool_reply

from sessions import SessionStore

FACT = "KX-4471"
FIRST_TURN = f"The deploy key is {FACT}; keep it in mind. Please record some notes."
SYSTEM = "You are a test agent. Record notes with the note tool when asked."
TOOL_ROUNDS = 2
NOTE_WORDS = 160


def note_text(n: int) -> str:
    """The ``note`` tool's output: long enough that a few turns fill a small window."""
    return f"note {n} recorded: " + " ".join(f"w{n}x{i}" for i in range(NOTE_WORDS))


def is_summary_request(body: dict[str, Any]) -> bool:
    """agentloop's summary request: its instruction ends the conversation, or (a transcript
    summarized on its own) its system prompt is the summarizer's."""
    last = json.dumps(body["messages"][-1])
    system = json.dumps(body.get("system", "")).lower()
    return "compaction request" in last or "summary" in system


def _texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


@dataclass
class Assistant:
    """The test server's handler."""

    summaries: list[dict[str, Any]] = field(default_factory=list)
    """Every summary request's body."""
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        with self.lock:
            if is_summary_request(body):
                self.summaries.append(body)
                seen = FACT in json.dumps(body)
                fact = f"The deploy key is {FACT}." if seen else "No key was mentioned."
                return text_reply(
                    f"## Goal\nRecord notes for the user. {fact}\n## Progress\nnotes recorded\n"
                    "## Next steps\nkeep recording"
                )
            rounds = 0
            messages = body["messages"]
            # Tool rounds since the user last typed something.
            for message in reversed(messages):
                if message["role"] != "user":
                    continue
                content = message["content"]
                if isinstance(content, list) and any(
                    b.get("type") == "tool_result" for b in content
                ):
                    rounds += 1
                    continue
                break
            if rounds >= TOOL_ROUNDS:
                return text_reply(f"Recorded the notes ({_texts(messages[-1])[:20]}).")
            self.calls += 1
            return tool_reply(("note", {"n": self.calls}), text="Recording a note now.")


def lineage_chain(store: SessionStore, session_id: str) -> list[str]:
    """The ids from the root of ``session_id``'s lineage down to it (a chain, no forks)."""
    chain = [session_id]
    for ancestor in store.ancestors(session_id):
        chain.insert(0, ancestor.id)
    return chain


def stored_text(store: SessionStore, session_id: str) -> str:
    return json.dumps([m.content for m in store.get_messages(session_id)])
