"""A session keeps its prefix: the system prompt and the tool definitions it started with are
stored with it and sent byte for byte on every later request (a resume, a compaction's child).

The 5.x models bind every thinking block to the exact prefix it was produced after (system,
tools, every earlier message): a system prompt rebuilt on resume from a changed ``AGENTS.md``
would make the API refuse every stored thinking block. So what changes later is appended
instead: a changed instruction file reaches the model as a ``role: "system"`` message right
after the next user message (on models that read mid-conversation system messages), else as a
text block of that user message, and is never edited afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentloop._core.values.blocks import is_text
from agentloop._core.values.messages import Message

__all__ = [
    "PREFIX_KEY",
    "REMOVED",
    "UPDATE_INTRO",
    "StoredPrefix",
    "changed_labels",
    "instructions_notice",
    "instructions_seen",
    "update_messages",
    "update_text",
]

PREFIX_KEY = "prefix"
"""The session metadata key holding the :class:`StoredPrefix` (inherited by every child)."""

UPDATE_INTRO = (
    "The user's instruction files changed during this conversation. Their current text, "
    "below, replaces the instructions in the system prompt."
)
REMOVED = (
    "The user's instruction files were removed during this conversation: the instructions in "
    "the system prompt no longer apply."
)

_SECTION = re.compile(r'<instructions file="([^"]*)" scope="[^"]*">\n(.*?)\n</instructions>', re.S)


@dataclass(frozen=True, slots=True)
class StoredPrefix:
    """What every request of a session starts with, as it was first sent."""

    system: str
    tools: tuple[dict[str, Any], ...]
    instructions: str
    """The instruction files' text as rendered into ``system`` ('' when there were none)."""

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "tools": list(self.tools), "instructions": self.instructions}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> StoredPrefix | None:
        """The prefix a session's metadata holds (None: a session stored before it was kept,
        or a damaged entry: the caller builds a new one)."""
        data = metadata.get(PREFIX_KEY)
        if not isinstance(data, Mapping):
            return None
        system, tools = data.get("system"), data.get("tools")
        instructions = data.get("instructions")
        if not isinstance(system, str) or not isinstance(instructions, str):
            return None
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            return None
        return cls(system, tuple(tools), instructions)


def update_text(rendered: str) -> str:
    """What the model is told when the instruction files now render as ``rendered``."""
    return f"{UPDATE_INTRO}\n\n{rendered}" if rendered else REMOVED


def _update_of(text: str) -> str | None:
    if text == REMOVED:
        return ""
    if text.startswith(UPDATE_INTRO + "\n\n"):
        return text[len(UPDATE_INTRO) + 2 :]
    return None


def instructions_seen(messages: Sequence[Message], in_system: str) -> str:
    """The instructions the model reads now: the newest update still in ``messages``, else
    those rendered into the system prompt (an update summarized away by a compaction no longer
    applies, so it is given again)."""
    for message in reversed(messages):
        if message.role == "assistant":
            continue
        for block in reversed(message.content):
            if is_text(block) and (seen := _update_of(str(block.get("text", "")))) is not None:
                return seen
    return in_system


def changed_labels(before: str, after: str) -> list[str]:
    """The instruction files (their labels) whose text differs between two renderings, in the
    order of ``after`` then the ones removed."""
    old = {m.group(1): m.group(2) for m in _SECTION.finditer(before)}
    new = {m.group(1): m.group(2) for m in _SECTION.finditer(after)}
    labels = [label for label, text in new.items() if old.get(label) != text]
    return labels + [label for label in old if label not in new]


def instructions_notice(before: str, after: str, *, where: str) -> str:
    """The one line telling the user how the instruction files differ from what the session
    was told (``where``: the workspace): changed or new ones are sent to the model; one no
    longer found there no longer applies, and the ones still found stay in force."""
    old = {m.group(1): m.group(2) for m in _SECTION.finditer(before)}
    new = {m.group(1): m.group(2) for m in _SECTION.finditer(after)}
    changed = [label for label, text in new.items() if old.get(label) != text]
    gone = [label for label in old if label not in new]
    parts = []
    if changed:
        parts.append(
            f"{', '.join(changed)} changed since this session started: the new text was added "
            "to the conversation"
        )
    if gone:
        verb = "is" if len(gone) == 1 else "are"
        kept = [label for label in new if label not in changed]
        rest = f"; {', '.join(kept)} stay{'s' if len(kept) == 1 else ''} in force" if kept else ""
        parts.append(
            f"{', '.join(gone)} {verb} not in {where}: {'its' if len(gone) == 1 else 'their'} "
            f"instructions no longer apply (the model is told so){rest}"
        )
    return "; ".join(parts) or "The instruction files changed since this session started"


def update_messages(
    text: str, *, system_messages: bool
) -> tuple[list[dict[str, Any]], list[Message]]:
    """Where an update goes with the next user message: (text blocks to add to that message,
    messages to append right after it: a system message where the model's profile reads
    them, ``system_messages``)."""
    block = {"type": "text", "text": text}
    if system_messages:
        return [], [Message.system([block])]
    return [block], []
