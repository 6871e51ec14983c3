"""Where a run starts: a new session, ``--resume ID`` or ``--continue`` (both at the newest
descendant), and the few lines that orient the user when a conversation is resumed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop._core.measuring.figures import plural
from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    from agentloop._core.values.messages import Message
    from agentloop._sessions import Conversation, SessionStore

EXCERPT = 100
PICK_LIMIT = 10
"""How many recent conversations ``-r`` without an id offers."""

Picker = Callable[["Sequence[Conversation]", str], str]
"""Shows recent conversations of a workspace and returns the chosen one's session id."""


class NothingChosen(AgentloopError):
    """The user left the ``-r`` picker without choosing."""


@dataclass(frozen=True, slots=True)
class Start:
    """The session to continue (None: a new one) and the one the user named."""

    session_id: str | None = None
    requested_id: str | None = None
    workspace: str | None = None
    """The workspace the resumed session ran in."""
    forked_from: str | None = None
    """With ``--fork-session``: the session ``session_id`` is a new branch of."""


def resolve_start(
    store: SessionStore,
    *,
    resume: str | None,
    continue_latest: bool,
    workspace: Path,
    pick: Picker | None = None,
) -> Start:
    """``--resume ID`` or ``--continue``: the newest descendant of that conversation;
    ``pick`` (``-r`` without an id, on a terminal) lets the user choose a recent one."""
    from agentloop._cli.store_access import latest_conversation, list_conversations
    from agentloop._sessions import workspace_key

    if resume is not None:
        requested = store.resolve_id(resume)
    elif continue_latest and pick is not None:
        recent = [
            c
            for c in list_conversations(store, workspace=workspace_key(workspace), limit=50)
            if c.head.message_count > 0
        ][:PICK_LIMIT]
        if not recent:
            raise AgentloopError(f"no session to resume in {workspace}")
        requested = pick(recent, str(workspace))
    elif continue_latest:
        latest = latest_conversation(store, workspace_key(workspace))
        if latest is None:
            raise AgentloopError(f"no session to continue in {workspace}")
        requested = latest.id
    else:
        return Start()
    head = store.newest_descendant(requested)
    return Start(head.id, requested, head.workspace)


def _text(message: Message) -> str:
    return " ".join(message.text.split())


def _cut(text: str, width: int = EXCERPT) -> str:
    from agentloop._cli.cells import cut_words  # in display cells: CJK and emoji take two

    return cut_words(text, width)


def _asked(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        if message.summary is not None:
            request = message.summary.request
            if request is not None and (text := _text(request)):
                return text
        elif text := _text(message):
            return text
    return ""


def last_exchange(
    messages: Sequence[Message], earlier: Callable[[], Sequence[Message]] = tuple
) -> list[str]:
    """The last thing the user asked and the last thing the agent said, one line each;
    ``earlier()`` gives the messages before a compaction, where the question may be."""
    lines: list[str] = []
    said = next(
        (text for m in reversed(messages) if m.role == "assistant" and (text := _text(m))), ""
    )
    asked = _asked(messages) or _asked(earlier())
    if asked:
        lines.append(f"  you: {_cut(asked)}")
    if said:
        lines.append(f"  agentloop: {_cut(said)}")
    return lines


def orientation(
    store: SessionStore,
    start: Start,
    messages: Sequence[Message],
    *,
    here: Path,
    context_line: str,
) -> list[str]:
    """What a resumed run prints first: where it continues, the last exchange, the context
    figure, and a warning when the session ran elsewhere."""
    assert start.session_id is not None
    # A fork continues its source: where it stands in the lineage, and what came before it,
    # are the source's (the fork itself is a branch, not a compaction).
    head = start.forked_from or start.session_id
    first = f"Resuming session {head[:8]} ({plural(len(messages), 'message')})"
    if start.forked_from is not None:
        first = (
            f"Continuing in a new branch: session {start.session_id[:8]} "
            f"({plural(len(messages), 'message')}) from session {head[:8]}, which stays as it was"
        )
    if start.requested_id is not None and start.requested_id != head:
        generations = len(store.ancestors(head)) - len(store.ancestors(start.requested_id))
        later = f"{plural(generations, 'generation')} later"
        first += (
            f" — {start.requested_id[:8]} was compacted; continuing at its newest "
            f"descendant ({later})"
        )

    def earlier() -> list[Message]:
        from agentloop._adapters.records import from_record

        parent = store.get_session(head).parent_id
        return [] if parent is None else [from_record(r) for r in store.get_messages(parent)]

    lines = [first, *last_exchange(messages, earlier)]
    if context_line:
        lines.append(context_line)
    from agentloop._sessions import workspace_key

    ran_in = start.workspace
    if ran_in is not None and ran_in != workspace_key(here):
        if not Path(ran_in).is_dir():
            lines.append(
                f"warning: this session ran in {ran_in}, which no longer exists; "
                f"tools now work in {here}"
            )
        else:
            lines.append(
                f"warning: this session ran in {ran_in}; tools now work in {here} "
                f"(cd there to work on that project)"
            )
    return lines
