"""``agentloop sessions list`` and ``agentloop sessions tree``: what is stored, at a glance.

``list`` shows one row per conversation (its newest session, where resuming continues, with its
generation); ``--all-generations`` shows every session. ``tree`` draws a lineage: a chain of
compactions as a list, indented only where it forks, the session resume continues marked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, TextIO

from agentloop._cli import render
from agentloop._cli.render import Column
from agentloop._core.measuring.figures import plural

if TYPE_CHECKING:
    from agentloop._sessions import Session, SessionStore

DEFAULT_LIMIT = 50
RESUME_MARK = "◀ resume continues here"


class Listed(Protocol):
    """A session as the listing shows it: a :class:`sessions.Session`, or the plain row
    ``agentloop sessions list`` reads without pydantic (:mod:`sessions._list_handle`)."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def message_count(self) -> int: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def model(self) -> str: ...
    @property
    def workspace(self) -> str: ...
    @property
    def title(self) -> str | None: ...


class ListedConversation(Protocol):
    @property
    def head(self) -> Listed: ...
    @property
    def root_id(self) -> str: ...
    @property
    def generations(self) -> int: ...
    @property
    def sessions(self) -> int: ...


class Lister(Protocol):
    """What the listing reads: a :class:`sessions.SessionStore`, or the read-only handle of
    :func:`sessions._list_handle.open_listing` (the same methods, returning plain rows)."""

    def list_sessions(
        self, *, workspace: str | None = ..., limit: int | None = ..., offset: int = ...
    ) -> Sequence[Listed]: ...

    def count_sessions(self, *, workspace: str | None = ...) -> int: ...

    def list_conversations(
        self, *, workspace: str | None = ..., limit: int | None = ..., offset: int = ...
    ) -> Sequence[ListedConversation]: ...


def _title(session: Listed) -> str:
    return render.one_line(session.title) if session.title else "-"


NOT_LISTED = ("prefix",)
"""Session metadata left out of ``sessions list --json`` (``sessions show --json`` has it): the
system prompt and tool schemas each session stores (``session_prefix.PREFIX_KEY``), kilobytes
a row."""


def _plain(session: Listed) -> dict[str, object]:
    """A listed session as JSON-ready data: every field of :class:`sessions.Session`, in order
    (the plain rows have the same ones), its metadata without :data:`NOT_LISTED`."""
    from agentloop._sessions import SESSION_FIELDS

    def value_of(name: str) -> object:
        value = getattr(session, name)
        if name == "metadata" and isinstance(value, dict):
            return {k: v for k, v in value.items() if k not in NOT_LISTED}
        return render.iso(value) if isinstance(value, datetime) else value

    return {name: value_of(name) for name in SESSION_FIELDS}


def list_command(
    store: Lister,
    out: TextIO,
    *,
    workspace: str | None,
    limit: int | None = DEFAULT_LIMIT,
    as_json: bool = False,
    all_generations: bool = False,
) -> None:
    """Conversations (or with ``all_generations`` every session) of ``workspace`` (every
    workspace if None), most recently updated first."""
    if all_generations:
        _list_sessions(store, out, workspace=workspace, limit=limit, as_json=as_json)
        return
    # One more than asked: whether there are more, without counting them all.
    rows = store.list_conversations(workspace=workspace, limit=None if limit is None else limit + 1)
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit is not None else rows
    if as_json:
        data = []
        for row in rows:
            item = _plain(row.head)
            item.update(root_id=row.root_id, generations=row.generations, sessions=row.sessions)
            data.append(item)
        render.print_json(data, out)
        return
    if not rows:
        out.write(_nothing_here(workspace))
        return
    now = datetime.now(UTC)
    columns = [
        Column("ID"),
        Column("MSGS", right=True),
        Column("GEN", right=True),
        Column("UPDATED"),
        Column("MODEL", drop=2),
    ]
    if workspace is None:
        columns.append(Column("WORKSPACE", flex=True, min_width=16, drop=1, keep_end=True))
    columns.append(Column("TITLE", flex=True, min_width=12))
    table = []
    for row in rows:
        head = row.head
        cells = [
            head.id[:8],
            f"{head.message_count:,}",
            str(row.generations + 1),
            render.ago(head.updated_at, now),
            head.model,
        ]
        if workspace is None:
            cells.append(render.home_short(head.workspace))
        cells.append(_title(head))
        table.append(cells)
    for line in render.fit_table(columns, table, render.terminal_width(out)):
        out.write(line + "\n")
    if more:
        out.write(f"({len(rows):,} most recent shown; --limit 0 shows all)\n")


def _nothing_here(workspace: str | None) -> str:
    if workspace is None:
        return "No sessions yet.\n"
    return f"No sessions in {workspace} (--all lists every workspace).\n"


def _list_sessions(
    store: Lister, out: TextIO, *, workspace: str | None, limit: int | None, as_json: bool
) -> None:
    sessions = store.list_sessions(workspace=workspace, limit=limit)
    if as_json:
        render.print_json([_plain(session) for session in sessions], out)
        return
    if not sessions:
        out.write(_nothing_here(workspace))
        return
    now = datetime.now(UTC)
    columns = [
        Column("ID"),
        Column("PARENT", drop=3),
        Column("STATUS"),
        Column("MSGS", right=True),
        Column("UPDATED"),
        Column("MODEL", drop=2),
    ]
    if workspace is None:
        columns.append(Column("WORKSPACE", flex=True, min_width=16, drop=1, keep_end=True))
    columns.append(Column("TITLE", flex=True, min_width=12))
    table = []
    for session in sessions:
        cells = [
            session.id[:8],
            session.parent_id[:8] if session.parent_id else "-",
            session.status,
            f"{session.message_count:,}",
            render.ago(session.updated_at, now),
            session.model,
        ]
        if workspace is None:
            cells.append(render.home_short(session.workspace))
        cells.append(_title(session))
        table.append(cells)
    for line in render.fit_table(columns, table, render.terminal_width(out)):
        out.write(line + "\n")
    if limit is not None and len(sessions) == limit:
        total = store.count_sessions(workspace=workspace)
        if total > limit:
            out.write(f"({limit:,} of {total:,} shown; --limit 0 shows all)\n")


# ---------------------------------------------------------------------------- tree


def tree_command(
    store: SessionStore,
    out: TextIO,
    ref: str | None = None,
    *,
    workspace: str | None = None,
    as_json: bool = False,
) -> None:
    """The lineage of ``ref`` (default: the latest conversation of ``workspace``)."""
    if ref is None:
        from agentloop._cli.store_access import list_conversations

        latest = list_conversations(store, workspace=workspace, limit=1)
        if not latest:
            if as_json:
                render.print_json([], out)  # as `list --json`: nothing is an empty array
            else:
                out.write(_nothing_here(workspace))
            return
        anchor = latest[0].head
    else:
        anchor = store.get_session(ref)
    lineage = store.lineage(anchor.id)
    history = store.compaction_history(anchor.id)
    resume = store.newest_descendant(anchor.id).id
    created_by = {entry.child_id: entry for entry in history if entry.child_id}
    in_place: dict[str, int] = {}
    for entry in history:
        if entry.child_id is None:
            in_place[entry.parent_id] = in_place.get(entry.parent_id, 0) + 1
    by_parent: dict[str | None, list[Session]] = {}
    for session in lineage:
        by_parent.setdefault(session.parent_id, []).append(session)
    root = lineage[0]

    if as_json:

        def node(session: Session) -> dict[str, object]:
            data = render.plain(session)
            entry = created_by.get(session.id)
            data["compaction"] = render.compaction_json(entry, session.metadata) if entry else None
            data["resume"] = session.id == resume
            data["children"] = [node(child) for child in by_parent.get(session.id, [])]
            return data

        render.print_json(node(root), out)
        return

    rows: list[tuple[str, str, Session]] = []  # (its tree lead, its children's lead, it)

    def chain(session: Session, first_prefix: str, prefix: str) -> None:
        # A run of single children is drawn as a list at one indentation; only forks indent.
        current, lead = session, first_prefix
        while True:
            rows.append((lead, prefix, current))
            kids = by_parent.get(current.id, [])
            if len(kids) != 1:
                break
            current, lead = kids[0], prefix
        for index, kid in enumerate(kids):
            last = index == len(kids) - 1
            chain(kid, prefix + ("└─ " if last else "├─ "), prefix + ("   " if last else "│  "))

    chain(root, "", "")
    branches = _branches(lineage, created_by, resume)
    marks_of = {
        session.id: [
            *(["◀ this"] if session.id == anchor.id != resume and ref is not None else []),
            *([RESUME_MARK] if session.id == resume else []),
        ]
        for _, _, session in rows
    }

    def status(session: Session) -> str:
        return "abandoned" if session.id in branches.abandoned else session.status

    def rest(session: Session) -> list[str]:
        parts: list[str] = []
        if session.parent_id is None or session.parent_id not in branches.members:
            if session.title:
                parts.append(f'"{render.one_line(session.title)}"')
            parts.append(session.model)
        entry = created_by.get(session.id)
        if entry is not None:
            parts.append(render.compaction_note(entry, session.metadata))
        elif session.id in branches.labels:
            parts.append(branches.labels[session.id])
        if in_place.get(session.id):
            parts.append(f"(+{plural(in_place[session.id], 'no-op compaction')})")
        return parts + marks_of[session.id]

    _draw(out, rows, status, rest, render.terminal_width(out))


class _Branches:
    """What the tree says of branches that are not compactions: a ``/undo-compaction`` (a
    branch from a compacted session, made after its compaction) and the child it abandoned."""

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.labels: dict[str, str] = {}
        self.abandoned: set[str] = set()


def _branches(
    lineage: Sequence[Session], created_by: Mapping[str, object], resume: str
) -> _Branches:
    found = _Branches()
    found.members = {s.id for s in lineage}
    by_id = {s.id: s for s in lineage}
    has_children = {s.parent_id for s in lineage}
    for session in lineage:
        parent = by_id.get(session.parent_id or "")
        if parent is None or session.id in created_by:
            continue
        undone = [
            s
            for s in lineage
            if s.parent_id == parent.id
            and s.id in created_by
            and s.created_at <= session.created_at
        ]
        if parent.status == "compacted" and undone:
            child = undone[-1]
            undo = f"← /undo-compaction of {child.id[:8]} (from {parent.id[:8]})"
            found.labels[session.id] = undo
            if child.status == "active" and child.id != resume and child.id not in has_children:
                found.abandoned.add(child.id)
        else:
            found.labels[session.id] = f"← branch of {parent.id[:8]}"
    return found


def _draw(
    out: TextIO,
    rows: Sequence[tuple[str, str, Session]],
    status: Callable[[Session], str],
    rest: Callable[[Session], list[str]],
    width: int | None,
) -> None:
    """The tree's rows: id, status and size in aligned columns, then what else is known,
    wrapped under the row (figures and strategy whole; only a title is cut, at a word)."""
    from agentloop._cli.cells import cells, cut_words, fit, pad

    lead_width = max(cells(lead) for lead, _, _ in rows) + 8
    status_width = max(len(status(s)) for _, _, s in rows)
    size_width = max(len(plural(s.message_count, "msg")) for _, _, s in rows)
    for lead, below, session in rows:
        head = (
            f"{pad(lead + session.id[:8], lead_width)}  {pad(status(session), status_width)}  "
            f"{pad(plural(session.message_count, 'msg'), size_width, right=True)}"
        )
        line, lines = head, []
        indent = below + " " * (lead_width + 2 - cells(below))  # under the status column
        parts = rest(session)
        for index, part in enumerate(parts):
            room = None if width is None else width - cells(line) - 2
            if room is not None and part.startswith('"') and line == head and room >= 16:
                following = parts[index + 1] if index + 1 < len(parts) else ""
                if room - cells(following) - 2 >= 16:  # the model beside it, if it can be
                    room -= cells(following) + 2
                # A title: cut at a word, with … and its closing quote; never the figures.
                part = f'"{cut_words(part[1:-1], room - 2)}"' if cells(part) > room else part
            if room is None or cells(part) <= room:
                line = f"{line}  {part}"
                continue
            lines.append(line)
            *whole, line = fit(indent + part, width).split("\n")
            lines += whole
        lines.append(line)
        out.write("\n".join(lines) + "\n")
