"""``agentloop sessions list|show|tree|export``: read the session store, print.

Each sub-command is a function of an open store and an output stream (``list_command``,
``show_command``, ``tree_command``, ``export_command``), so the REPL and the demo call them
directly; :func:`run` maps the parsed command line onto them. The text itself is made in
:mod:`agentloop._cli.render`.

Imports nothing heavy at module level (``agentloop --help`` builds this parser) and never imports
``anthropic``: the store and pydantic are loaded inside :func:`run`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, TextIO, TypeVar

from agentloop._cli import render
from agentloop._core.validation import parse_positive_int
from agentloop._errors import ConfigurationError

if TYPE_CHECKING:
    from sessions import Session, SessionStore

EXIT_OK = 0
EXIT_USAGE = 2
DEFAULT_LIMIT = 50
_STORE_HELP = (
    "the session store file (default: $AGENTLOOP_HOME/sessions.db, else the user data dir)"
)

ExportFormat = Literal["markdown", "json"]
P = TypeVar("P", bound=argparse.ArgumentParser)


def _limit(text: str) -> int:
    """``--limit N``: a positive number, or 0 for no limit."""
    if text.strip() == "0":
        return 0
    try:
        return parse_positive_int(text, what="limit")
    except ConfigurationError:
        raise argparse.ArgumentTypeError(
            f"invalid limit {text!r}: expected a positive number (0 = no limit)"
        ) from None


def add_parser(subparsers: argparse._SubParsersAction[P]) -> P:
    """Add ``sessions`` and its sub-commands to the ``agentloop`` parser."""
    parser = subparsers.add_parser(
        "sessions",
        help="list, show, tree and export stored sessions",
        description="Inspect stored sessions. A compacted session continues in a child "
        "session; both are kept. IDs may be given as a unique prefix of 4+ characters.",
    )
    parser.add_argument("--store", metavar="PATH", default=None, help=_STORE_HELP)
    parser.set_defaults(
        sessions_command=None, workspace=None, all=False, limit=DEFAULT_LIMIT, json=False
    )
    commands = parser.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND")

    listing = commands.add_parser(
        "list",
        help="sessions of this workspace, most recently updated first (the default)",
        description="List sessions, most recently updated first. By default only those of "
        "the current directory's workspace.",
    )
    _store_option(listing)
    where = listing.add_mutually_exclusive_group()
    where.add_argument(
        "--workspace", metavar="DIR", help="sessions of this directory (default: the current one)"
    )
    where.add_argument("--all", action="store_true", help="sessions of every workspace")
    listing.add_argument(
        "--limit",
        metavar="N",
        type=_limit,
        default=DEFAULT_LIMIT,
        help=f"show at most N sessions (default {DEFAULT_LIMIT}; 0 = all)",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array")

    show = commands.add_parser(
        "show", help="a session and its messages", description="Show a session."
    )
    _store_option(show)
    show.add_argument("id", metavar="ID", help="session id or unique prefix (4+ characters)")
    show.add_argument("--json", action="store_true", help="print one JSON object")

    tree = commands.add_parser(
        "tree",
        help="a session's lineage with compaction notes",
        description="Show the lineage (root and all descendants) of a session as a tree. "
        "Without ID: the most recently updated lineage of the current workspace.",
    )
    _store_option(tree)
    tree.add_argument("id", metavar="ID", nargs="?", help="any session of the lineage")
    tree.add_argument("--json", action="store_true", help="print the tree as nested JSON")

    export = commands.add_parser(
        "export",
        help="a session's full transcript, to stdout",
        description="Print a session's complete transcript to stdout.",
    )
    _store_option(export)
    export.add_argument("id", metavar="ID", help="session id or unique prefix (4+ characters)")
    export.add_argument(
        "--format",
        choices=("markdown", "json"),
        default="markdown",
        help="markdown (default) or json (the same object as `show --json`)",
    )
    return parser


def _store_option(command: argparse.ArgumentParser) -> None:
    # Each sub-command also takes --store (after it); SUPPRESS keeps the parent's value.
    command.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS, help=_STORE_HELP)


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``sessions`` sub-command. User errors: one line on stderr, exit code 2."""
    from sessions import SessionError, open_store

    out = sys.stdout
    command = _command(args)
    try:
        with open_store(args.store) as store:
            command(store, out)
            out.flush()
    except SessionError as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `agentloop sessions list | head`: the reader left; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        return EXIT_OK
    return EXIT_OK


def _command(args: argparse.Namespace) -> Callable[[SessionStore, TextIO], None]:
    """The parsed sub-command as a call on an open store and the output stream."""
    name: str | None = args.sessions_command
    as_json: bool = args.json
    if name is None or name == "list":
        workspace = None if args.all else current_workspace(args.workspace)
        limit = None if args.limit == 0 else args.limit
        return lambda store, out: list_command(
            store, out, workspace=workspace, limit=limit, as_json=as_json
        )
    if name == "show":
        return lambda store, out: show_command(store, out, args.id, as_json=as_json)
    if name == "tree":
        return lambda store, out: tree_command(store, out, args.id, as_json=as_json)
    if name == "export":
        return lambda store, out: export_command(store, out, args.id, format=args.format)
    raise AssertionError(f"unknown sessions command {name!r}")


def current_workspace(directory: str | None = None) -> str:
    """The workspace key of ``directory`` (default: the current directory)."""
    from sessions import workspace_key

    return workspace_key(directory)


# ---------------------------------------------------------------------------- list


def list_command(
    store: SessionStore,
    out: TextIO,
    *,
    workspace: str | None,
    limit: int | None = DEFAULT_LIMIT,
    as_json: bool = False,
) -> None:
    """Sessions of ``workspace`` (every workspace if None), most recently updated first."""
    sessions = store.list_sessions(workspace=workspace, limit=limit)
    if as_json:
        render.print_json([render.plain(session) for session in sessions], out)
        return
    if not sessions:
        where = "any workspace" if workspace is None else workspace
        hint = "" if workspace is None else " (--all lists every workspace)"
        out.write(f"No sessions in {where}{hint}.\n")
        return
    now = datetime.now(UTC)
    header = ["ID", "PARENT", "STATUS", "MSGS", "MODEL", "UPDATED"]
    if workspace is None:
        header.append("WORKSPACE")
    header.append("TITLE")
    rows = [header]
    for session in sessions:
        row = [
            session.id[:8],
            session.parent_id[:8] if session.parent_id else "-",
            session.status,
            f"{session.message_count:,}",
            session.model,
            render.ago(session.updated_at, now),
        ]
        if workspace is None:
            row.append(render.home_short(session.workspace))
        row.append(render.one_line(session.title) if session.title else "-")
        rows.append(row)
    width = render.terminal_width(out)
    for line in render.table(rows, right=[3]):
        out.write(render.fit(line, width) + "\n")
    if limit is not None and len(sessions) == limit:
        total = store.count_sessions(workspace=workspace)
        if total > limit:
            out.write(f"({limit:,} of {total:,} shown; --limit 0 shows all)\n")


# ---------------------------------------------------------------------------- show / export


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
    compaction["history"] = [render.plain(entry) for entry in history]
    data["compaction"] = compaction
    return data


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
    if record.compaction_count:
        last = render.when(record.last_compacted_at) if record.last_compacted_at else "-"
        count = render.plural(record.compaction_count, "compaction")
        fields.append(("Compaction", f"{count} in this lineage, last {last}"))
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        out.write(f"{name.ljust(width)}  {value}\n")
    for message in store.get_messages(session.id):
        out.write("\n" + render.message_heading(message) + "\n")
        for block in message.content:
            out.write(render.indent(render.render_block(block, limit=True)) + "\n")


def export_command(
    store: SessionStore, out: TextIO, ref: str, *, format: ExportFormat = "markdown"
) -> None:
    """A session's complete transcript: Markdown, or the object of ``show --json``."""
    session = store.get_session(ref)
    if format == "json":
        render.print_json(_show_object(store, session), out)
        return
    title = session.title or f"Session {session.id[:8]}"
    out.write(f"# {render.one_line(title)}\n\n")
    meta = [
        ("Session", f"`{session.id}`"),
        ("Parent", f"`{session.parent_id}`" if session.parent_id else "-"),
        ("Status", session.status),
        ("Model", f"`{session.model}`"),
        ("Workspace", f"`{session.workspace}`"),
        ("Created", render.when(session.created_at)),
        ("Updated", render.when(session.updated_at)),
        ("Messages", f"{session.message_count:,}"),
    ]
    for name, value in meta:
        out.write(f"- **{name}:** {value}\n")
    for message in store.get_messages(session.id):
        role = "User" if message.role == "user" else "Assistant"
        out.write(f"\n## {message.seq + 1}. {role}\n")
        for block in message.content:
            out.write("\n" + render.markdown_block(block) + "\n")


# ---------------------------------------------------------------------------- tree


def tree_command(
    store: SessionStore, out: TextIO, ref: str | None = None, *, as_json: bool = False
) -> None:
    """The lineage of ``ref`` (default: the latest of the current workspace) as a tree."""
    if ref is None:
        latest = store.list_sessions(workspace=current_workspace(), limit=1)
        if not latest:
            if as_json:
                render.print_json(None, out)
            else:
                out.write(f"No sessions in {current_workspace()}.\n")
            return
        anchor = latest[0]
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
            data["compaction"] = render.plain(entry) if entry else None
            data["resume"] = session.id == resume
            data["children"] = [node(child) for child in by_parent.get(session.id, [])]
            return data

        render.print_json(node(root), out)
        return

    width = render.terminal_width(out)
    members = {s.id for s in lineage}

    def describe(session: Session) -> str:
        parts = [session.id[:8], session.status, render.plural(session.message_count, "msg")]
        entry = created_by.get(session.id)
        if entry is not None:
            parts.append(render.compaction_note(entry))
        if in_place.get(session.id):
            parts.append(f"(+{render.plural(in_place[session.id], 'no-op compaction')})")
        if session.parent_id is None or session.parent_id not in members:
            parts.append(f'"{render.one_line(session.title)}"' if session.title else "")
            parts.append(session.model)
        marks = []
        if session.id == anchor.id and ref is not None:
            marks.append("◀ this")
        if session.id == resume:
            marks.append("◀ resume continues here")
        return "  ".join(part for part in parts + marks if part)

    def walk(session: Session, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        out.write(render.fit(prefix + branch + describe(session), width) + "\n")
        kids = by_parent.get(session.id, [])
        deeper = prefix if top else prefix + ("    " if last else "│   ")
        for index, child in enumerate(kids):
            walk(child, deeper, index == len(kids) - 1, False)

    walk(root, "", True, True)
