"""``agentloop sessions export``: the complete transcript of a conversation.

A conversation is a lineage of sessions: the first, then each compaction's child (or a branch,
such as the one ``/undo-compaction`` makes). The export follows it from its first session to
where resuming continues and writes each message once: a compaction's child begins with the
compacted context (its summary, shown as such) and the messages it carried over, which the
export does not repeat; a branch begins with a copy of its source, likewise not repeated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TextIO

from agentloop._cli import markup, render
from agentloop._core.measuring.figures import plural

if TYPE_CHECKING:
    from agentloop._sessions import CompactionEntry, Session, SessionStore, StoredMessage

ExportFormat = Literal["markdown", "json"]


class Part:
    """One session of the conversation as the export writes it."""

    def __init__(
        self,
        session: Session,
        messages: list[StoredMessage],
        start: int,
        made_by: CompactionEntry | None,
    ) -> None:
        self.session = session
        self.messages = messages
        self.start = start
        """The first message said in this session (before it: what it carried over)."""
        self.made_by = made_by
        """The compaction that created it (None: the first session, or a branch)."""

    @property
    def said(self) -> list[StoredMessage]:
        return self.messages[self.start :]

    @property
    def carried(self) -> list[StoredMessage]:
        return self.messages[: self.start]


def _same(a: StoredMessage, b: StoredMessage) -> bool:
    return a.role == b.role and a.content == b.content


def conversation_parts(store: SessionStore, ref: str) -> list[Part]:
    """The sessions from the conversation's first to where resuming ``ref`` continues."""
    newest = store.newest_descendant(store.get_session(ref).id)
    path = [*reversed(store.ancestors(newest.id)), newest]
    made = {e.child_id: e for e in store.compaction_history(newest.id) if e.child_id}
    parts: list[Part] = []
    for session in path:
        messages = store.get_messages(session.id)
        entry = made.get(session.id)
        if entry is not None:
            start = min(entry.messages_after, len(messages))
        elif parts:  # a branch: a copy of its source's messages, then its own
            before = parts[-1].messages
            start = 0
            while start < min(len(before), len(messages)) and _same(before[start], messages[start]):
                start += 1
        else:
            start = 0
        parts.append(Part(session, messages, start, entry))
    return parts


def export_conversation(
    store: SessionStore, out: TextIO, ref: str, *, format: ExportFormat = "markdown"
) -> None:
    """Write the whole conversation ``ref`` belongs to (see the module's docstring)."""
    parts = conversation_parts(store, ref)
    if format == "json":
        render.print_json(_as_json(parts), out)
        return
    out.write(_as_markdown(parts))


def _message_json(message: StoredMessage) -> dict[str, object]:
    return {
        "role": message.role,
        "content": message.content,
        "seq": message.seq,
        "created_at": render.iso(message.created_at),
        "usage": message.usage,
        "metadata": message.metadata,
    }


def _as_json(parts: list[Part]) -> dict[str, object]:
    return {
        "sessions": [
            {
                **render.plain(part.session),
                "compaction": None
                if part.made_by is None
                else render.compaction_json(part.made_by, part.session.metadata),
                "carried_over": [_message_json(m) for m in part.carried],
                "messages": [_message_json(m) for m in part.said],
            }
            for part in parts
        ],
        "messages": sum(len(part.said) for part in parts),
    }


def _as_markdown(parts: list[Part]) -> str:
    first, last = parts[0].session, parts[-1].session
    title = first.title or f"Session {first.id[:8]}"
    said = sum(len(part.said) for part in parts)
    out = [f"# {markup.markdown_inline(render.one_line(title))}\n\n"]
    meta = [
        ("Conversation", f"{plural(len(parts), 'session')}, {plural(said, 'message')} said"),
        ("First session", f"`{first.id}`"),
        ("Resume continues in", f"`{last.id}`"),
        ("Model", f"`{last.model}`"),
        ("Workspace", f"`{first.workspace}`"),
        ("Created", render.when(first.created_at)),
        ("Updated", render.when(last.updated_at)),
    ]
    out.extend(f"- **{name}:** {value}\n" for name, value in meta)
    for index, part in enumerate(parts):
        session = part.session
        out.append(f"\n## Session `{session.id[:8]}` ({session.status})\n\n")
        if part.made_by is not None:
            note = render.compaction_note(part.made_by, session.metadata).removeprefix("← ")
            out.append(f"The conversation was {note}; the model went on from this context:\n")
            earlier = parts[index - 1].messages if index else []
            copies = [m for m in part.carried if any(_same(m, e) for e in earlier)]
            for message in part.carried:
                if message in copies:
                    continue  # said above, word for word
                out.append(f"\n> **{message.role}** (the compacted context)\n>\n")
                for block in message.content:
                    text = markup.markdown_block(block)
                    out.append(
                        "".join(f"> {line}\n" if line else ">\n" for line in text.split("\n"))
                    )
            if copies:
                out.append(
                    f"\n(then {plural(len(copies), 'message')} carried over as said above)\n"
                )
        elif index:
            source = parts[index - 1].session.id[:8]
            out.append(
                f"A branch of `{source}` (a fork, or `/undo-compaction`), continuing after "
                f"its message #{part.start}.\n"
            )
        for message in part.said:
            role = "User" if message.role == "user" else "Assistant"
            out.append(f"\n### {markup.number(message)} {role}\n")
            out.extend("\n" + markup.markdown_block(block) + "\n" for block in message.content)
    return "".join(out)
