"""``agentloop sessions show``: one session's messages, numbered as ``export`` numbers them
(``#1`` is the first; the export of the whole conversation is ``conversation_export``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from agentloop._cli import markup, render
from agentloop._core.measuring.figures import plural

if TYPE_CHECKING:
    from agentloop._adapters.session_costs import CostReport
    from agentloop._core.facts.receipt import Receipt
    from agentloop._sessions import CompactionEntry, Session, SessionStore


def _show_object(store: SessionStore, session: Session) -> dict[str, object]:
    messages = store.get_messages(session.id)
    record = store.get_compaction_record(session.id)
    history = store.compaction_history(session.id)
    data = render.plain(session)
    data["children"] = [child.id for child in store.children(session.id)]
    data["newest_descendant"] = store.newest_descendant(session.id).id
    data["messages"] = [
        {
            "role": message.role,
            "content": message.content,
            "seq": message.seq,
            "created_at": render.iso(message.created_at),
            "token_estimate": message.token_estimate,
            "usage": message.usage,
            "metadata": message.metadata,
        }
        for message in messages
    ]
    compaction = render.plain(record)
    metadata = {member.id: member.metadata for member in store.lineage(session.id)}
    compaction["history"] = [
        render.compaction_json(entry, metadata.get(entry.child_id or "")) for entry in history
    ]
    data["compaction"] = compaction
    left = _receipt(store, session)
    data["receipt"] = None if left is None else left.to_dict()
    own, conversation = _costs(store, session)
    data["cost"] = {"session": own.to_dict(), "conversation": conversation.to_dict()}
    return data


def _receipt(store: SessionStore, session: Session) -> Receipt | None:
    """What the compaction that made ``session`` left out of its context."""
    from agentloop._adapters.compaction_receipt import session_receipt

    return session_receipt(store, session.id)


def _costs(store: SessionStore, session: Session) -> tuple[CostReport, CostReport]:
    from agentloop._adapters.session_costs import conversation_cost
    from agentloop._cli.cost_report import configured_prices

    return conversation_cost(store, session.id, configured_prices())


def _made_by(store: SessionStore, session: Session) -> CompactionEntry | None:
    """The compaction that made ``session`` (None: a root, or a fork)."""
    if session.parent_id is None:
        return None
    history = store.compaction_history(session.id)
    return next((entry for entry in history if entry.child_id == session.id), None)


def _made_by_text(entry: CompactionEntry, session: Session, parent: str) -> str:
    """``from 43x07d7w: 19 → 3 messages (4,224 → ~3,228 tokens) by summarize``."""
    figures = render.compaction_figures(entry, session.metadata)
    return (
        f"from {parent}: {entry.messages_before:,} → "
        f"{plural(entry.messages_after, 'message')}"
        f"{' ' + figures if figures else ''} by {render.strategy_name(entry.strategy)}"
    )


def show_command(store: SessionStore, out: TextIO, ref: str, *, as_json: bool = False) -> None:
    """A session (id or unique prefix) and its messages, long blocks cut."""
    session = store.get_session(ref)
    if as_json:
        render.print_json(_show_object(store, session), out)
        return
    now = datetime.now(UTC)
    children = store.children(session.id)
    record = store.get_compaction_record(session.id)
    status: str = session.status
    if session.status == "compacted":
        head = store.newest_descendant(session.id)
        if head.id != session.id:
            status += f" (continues in {head.id[:8]})"
    fields = [
        ("Session", session.id),
        ("Title", session.title or "-"),
        ("Status", status),
        ("Parent", session.parent_id or "-"),
        ("Children", ", ".join(child.id[:8] for child in children) or "-"),
        ("Model", session.model),
        ("Workspace", session.workspace),
        ("Created", render.when(session.created_at)),
        ("Updated", f"{render.when(session.updated_at)} ({render.ago(session.updated_at, now)})"),
        ("Messages", f"{session.message_count:,}"),
    ]
    made_by = _made_by(store, session)
    if made_by is not None:
        fields.append(("Compacted", _made_by_text(made_by, session, made_by.parent_id[:8])))
    if record.compaction_count:
        last = render.when(record.last_compacted_at) if record.last_compacted_at else "-"
        path = {session.id, *(a.id for a in store.ancestors(session.id))}
        on_path = sum(1 for e in store.compaction_history(session.id) if e.child_id in path)
        count = f"{plural(on_path, 'compaction')} on the way to this session"
        if on_path != record.compaction_count:  # the others made branches (undone, forked)
            count += f" ({record.compaction_count} in the whole lineage)"
        fields.append(("Compaction", f"{count}, last {last}"))
    from agentloop._cli.cells import fit, two_columns
    from agentloop._cli.cost_report import cost_text

    columns = render.terminal_width(out)  # a terminal: wrapped at words to its width

    def put(text: str) -> None:
        out.write(fit(text, columns) + "\n")

    out.write("".join(line + "\n" for line in two_columns(fields, columns, indent=0)))
    put(cost_text(*_costs(store, session), session.id))
    left = _receipt(store, session)
    if left is not None:
        put("\n".join(left.lines()))
    for message in store.get_messages(session.id):
        put("\n" + markup.message_heading(message))
        for block in message.content:
            put(markup.indent(markup.render_block(block, limit=True)))
