"""``agentloop sessions list|show|tree|export``: read the session store, print.

Imports nothing heavy at module level (``agentloop --help`` builds this parser) and never imports
``anthropic``: the store and pydantic are loaded inside :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from sessions import CompactionEntry, Session, SqliteSessionStore, StoredMessage

EXIT_OK = 0
EXIT_USAGE = 2
DEFAULT_LIMIT = 50
_SHOW_BLOCK_CHARS = 2000
_SHOW_BLOCK_LINES = 25


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid limit {text!r}: expected a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid limit {text!r}: must be >= 0 (0 = no limit)")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sessions`` and its sub-commands to the ``agentloop`` parser."""
    store_help = (
        "the session store file (default: $AGENTLOOP_HOME/sessions.db, else the user data dir)"
    )
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sessions",
        help="list, show, tree and export stored sessions",
        description="Inspect stored sessions. A compacted session continues in a child "
        "session; both are kept. IDs may be given as a unique prefix of 4+ characters.",
    )
    parser.add_argument("--store", metavar="PATH", default=None, help=store_help)
    parser.set_defaults(
        sessions_command=None, workspace=None, all=False, limit=DEFAULT_LIMIT, json=False
    )
    # Each sub-command also takes --store (after it); SUPPRESS keeps the parent's value.
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS, help=store_help)
    commands = parser.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND")

    listing = commands.add_parser(
        "list",
        parents=[store],
        help="sessions of this workspace, most recently updated first (the default)",
        description="List sessions, most recently updated first. By default only those of "
        "the current directory's workspace.",
    )
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
        "show", parents=[store], help="a session and its messages", description="Show a session."
    )
    show.add_argument("id", metavar="ID", help="session id or unique prefix (4+ characters)")
    show.add_argument("--json", action="store_true", help="print one JSON object")

    tree = commands.add_parser(
        "tree",
        parents=[store],
        help="a session's lineage with compaction notes",
        description="Show the lineage (root and all descendants) of a session as a tree. "
        "Without ID: the most recently updated lineage of the current workspace.",
    )
    tree.add_argument("id", metavar="ID", nargs="?", help="any session of the lineage")
    tree.add_argument("--json", action="store_true", help="print the tree as nested JSON")

    export = commands.add_parser(
        "export",
        parents=[store],
        help="a session's full transcript, to stdout",
        description="Print a session's complete transcript to stdout.",
    )
    export.add_argument("id", metavar="ID", help="session id or unique prefix (4+ characters)")
    export.add_argument(
        "--format",
        choices=("markdown", "json"),
        default="markdown",
        help="markdown (default) or json (the same object as `show --json`)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a ``sessions`` sub-command. User errors: one line on stderr, exit code 2."""
    from sessions import SessionError, open_store

    handlers: dict[str | None, Callable[[SqliteSessionStore, argparse.Namespace], None]] = {
        None: _list,
        "list": _list,
        "show": _show,
        "tree": _tree,
        "export": _export,
    }
    handler = handlers[args.sessions_command]
    try:
        with open_store(args.store) as store:
            handler(store, args)
            sys.stdout.flush()
    except SessionError as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `agentloop sessions list | head`: the reader left; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    return EXIT_OK


# ---------------------------------------------------------------------------- helpers


def _out() -> TextIO:
    return sys.stdout


def _print_json(value: Any) -> None:
    json.dump(value, _out(), ensure_ascii=False, indent=2)
    _out().write("\n")


def _workspace(directory: str | None) -> str:
    from sessions import workspace_key

    return workspace_key(directory)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _plain(model: Any) -> dict[str, Any]:
    """A store value as JSON-ready data.

    Written out by hand: pydantic's serializer would build its schema on first use, which costs
    more than the whole of `sessions list` (its plugin discovery scans every installed package).
    """
    return {
        name: _iso(value) if isinstance(value, datetime) else value
        for name in type(model).model_fields
        for value in (getattr(model, name),)
    }


def _session_json(session: Session) -> dict[str, Any]:
    return _plain(session)


def _when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _ago(moment: datetime, now: datetime) -> str:
    seconds = (now - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)}d ago"
    return moment.astimezone().strftime("%Y-%m-%d")


def _home_short(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _table(rows: Sequence[Sequence[str]], *, right: Iterable[int] = ()) -> list[str]:
    aligned_right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in aligned_right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _fit(line: str, width: int | None) -> str:
    if width is None or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


def _terminal_width() -> int | None:
    # Only a person at a terminal wants lines cut to fit; pipes get everything.
    if not _out().isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


# ---------------------------------------------------------------------------- list


def _list(store: SqliteSessionStore, args: argparse.Namespace) -> None:
    workspace = None if args.all else _workspace(args.workspace)
    limit = None if args.limit == 0 else args.limit
    sessions = store.list_sessions(workspace=workspace, limit=limit)
    if args.json:
        _print_json([_session_json(session) for session in sessions])
        return
    out = _out()
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
            _ago(session.updated_at, now),
        ]
        if workspace is None:
            row.append(_home_short(session.workspace))
        row.append(_one_line(session.title) if session.title else "-")
        rows.append(row)
    width = _terminal_width()
    for line in _table(rows, right=[3]):
        out.write(_fit(line, width) + "\n")
    if limit is not None and len(sessions) == limit:
        total = store.count_sessions(workspace=workspace)
        if total > limit:
            out.write(f"({limit:,} of {total:,} shown; --limit 0 shows all)\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------- show / export


def _show_object(store: SqliteSessionStore, session: Session) -> dict[str, Any]:
    messages = store.get_messages(session.id)
    record = store.get_compaction_record(session.id)
    history = store.compaction_history(session.id)
    data = _session_json(session)
    data["children"] = [child.id for child in store.children(session.id)]
    data["newest_descendant"] = store.newest_descendant(session.id).id
    data["messages"] = [
        {
            "role": message.role,
            "content": message.content,
            "seq": message.seq,
            "created_at": _iso(message.created_at),
            "token_estimate": message.token_estimate,
            "usage": message.usage,
            "metadata": message.metadata,
        }
        for message in messages
    ]
    compaction = _plain(record)
    compaction["history"] = [_plain(entry) for entry in history]
    data["compaction"] = compaction
    return data


def _show(store: SqliteSessionStore, args: argparse.Namespace) -> None:
    session = store.get_session(args.id)
    if args.json:
        _print_json(_show_object(store, session))
        return
    out = _out()
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
        ("Created", _when(session.created_at)),
        ("Updated", f"{_when(session.updated_at)} ({_ago(session.updated_at, now)})"),
        ("Messages", f"{session.message_count:,}"),
    ]
    if record.compaction_count:
        last = _when(record.last_compacted_at) if record.last_compacted_at else "-"
        fields.append(
            (
                "Compaction",
                f"{_plural(record.compaction_count, 'compaction')} in this lineage, last {last}",
            )
        )
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        out.write(f"{name.ljust(width)}  {value}\n")
    for message in store.get_messages(session.id):
        out.write("\n" + _message_heading(message) + "\n")
        for block in message.content:
            out.write(_indent(_render_block(block, limit=True)) + "\n")


def _message_heading(message: StoredMessage) -> str:
    parts = [f"#{message.seq} {message.role}", _when(message.created_at)]
    if message.usage:
        usage = message.usage
        tokens_in = (
            usage.get("input_tokens", 0)
            + usage.get("cache_read_input_tokens", 0)
            + usage.get("cache_creation_input_tokens", 0)
        )
        parts.append(f"{tokens_in:,} in / {usage.get('output_tokens', 0):,} out tokens")
    elif message.token_estimate is not None:
        parts.append(f"~{message.token_estimate:,} tokens")
    flags = [key for key in ("pinned",) if message.metadata.get(key)]
    kind = message.metadata.get("kind")
    if isinstance(kind, str):
        flags.append(kind)
    if flags:
        parts.append(", ".join(flags))
    return "── " + " · ".join(parts)


def _indent(text: str) -> str:
    return "\n".join("   " + line if line else "" for line in text.splitlines() or [""])


def _truncate(text: str, limit: bool) -> str:
    if not limit:
        return text
    lines = text.splitlines()
    cut = "\n".join(lines[:_SHOW_BLOCK_LINES])
    cut = cut[:_SHOW_BLOCK_CHARS]
    if cut == text:
        return text
    hidden = len(text) - len(cut)
    return f"{cut}\n… {hidden:,} more characters (agentloop sessions export shows everything)"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, Mapping):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _render_block(block: Mapping[str, Any], *, limit: bool) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
        return _truncate(f"→ {block.get('name')} ({block.get('id')}) {arguments}", limit)
    if kind == "tool_result":
        error = " ERROR" if block.get("is_error") else ""
        body = _result_text(block.get("content", ""))
        return _truncate(f"← result ({block.get('tool_use_id')}){error}\n{body}", limit)
    if kind == "thinking":
        return _truncate(f"(thinking) {block.get('thinking', '')}", limit)
    if kind == "redacted_thinking":
        return "(redacted thinking)"
    if kind in ("image", "document"):
        source = block.get("source")
        described = (
            source.get("media_type") or source.get("type") if isinstance(source, Mapping) else ""
        )
        return f"[{kind}{': ' + str(described) if described else ''}]"
    return _truncate(f"[{kind}] {json.dumps(dict(block), ensure_ascii=False)}", limit)


def _export(store: SqliteSessionStore, args: argparse.Namespace) -> None:
    session = store.get_session(args.id)
    if args.format == "json":
        _print_json(_show_object(store, session))
        return
    out = _out()
    title = session.title or f"Session {session.id[:8]}"
    out.write(f"# {_one_line(title)}\n\n")
    meta = [
        ("Session", f"`{session.id}`"),
        ("Parent", f"`{session.parent_id}`" if session.parent_id else "-"),
        ("Status", session.status),
        ("Model", f"`{session.model}`"),
        ("Workspace", f"`{session.workspace}`"),
        ("Created", _when(session.created_at)),
        ("Updated", _when(session.updated_at)),
        ("Messages", f"{session.message_count:,}"),
    ]
    for name, value in meta:
        out.write(f"- **{name}:** {value}\n")
    for message in store.get_messages(session.id):
        role = "User" if message.role == "user" else "Assistant"
        out.write(f"\n## {message.seq + 1}. {role}\n")
        for block in message.content:
            out.write("\n" + _markdown_block(block) + "\n")


def _fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so the content cannot close it.
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _markdown_block(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False, indent=2)
        heading = f"**Tool call** `{block.get('name')}` (`{block.get('id')}`)"
        return f"{heading}\n\n{_fence(arguments, 'json')}"
    if kind == "tool_result":
        error = " — error" if block.get("is_error") else ""
        body = _result_text(block.get("content", ""))
        return f"**Tool result** (`{block.get('tool_use_id')}`){error}\n\n{_fence(body)}"
    if kind == "thinking":
        quoted = "\n".join("> " + line for line in str(block.get("thinking", "")).splitlines())
        return f"> *Thinking*\n>\n{quoted}"
    if kind == "redacted_thinking":
        return "> *Thinking (redacted)*"
    return _fence(json.dumps(dict(block), ensure_ascii=False, indent=2), "json")


# ---------------------------------------------------------------------------- tree


def _tree(store: SqliteSessionStore, args: argparse.Namespace) -> None:
    if args.id is None:
        latest = store.list_sessions(workspace=_workspace(None), limit=1)
        if not latest:
            if args.json:
                _print_json(None)
            else:
                _out().write(f"No sessions in {_workspace(None)}.\n")
            return
        anchor = latest[0]
    else:
        anchor = store.get_session(args.id)
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

    if args.json:

        def node(session: Session) -> dict[str, Any]:
            data = _session_json(session)
            entry = created_by.get(session.id)
            data["compaction"] = _plain(entry) if entry else None
            data["resume"] = session.id == resume
            data["children"] = [node(child) for child in by_parent.get(session.id, [])]
            return data

        _print_json(node(root))
        return

    out = _out()
    width = _terminal_width()

    def describe(session: Session) -> str:
        parts = [session.id[:8], session.status, _plural(session.message_count, "msg")]
        entry = created_by.get(session.id)
        if entry is not None:
            parts.append(_compaction_note(entry))
        if in_place.get(session.id):
            parts.append(f"(+{_plural(in_place[session.id], 'no-op compaction')})")
        if session.parent_id is None or session.parent_id not in {s.id for s in lineage}:
            parts.append(f'"{_one_line(session.title)}"' if session.title else "")
            parts.append(session.model)
        marks = []
        if session.id == anchor.id and args.id is not None:
            marks.append("◀ this")
        if session.id == resume:
            marks.append("◀ resume continues here")
        return "  ".join(part for part in parts + marks if part)

    def walk(session: Session, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        out.write(_fit(prefix + branch + describe(session), width) + "\n")
        kids = by_parent.get(session.id, [])
        deeper = prefix if top else prefix + ("    " if last else "│   ")
        for index, child in enumerate(kids):
            walk(child, deeper, index == len(kids) - 1, False)

    walk(root, "", True, True)


def _compaction_note(entry: CompactionEntry) -> str:
    note = f"← compacted {entry.messages_before:,} → {_plural(entry.messages_after, 'msg')}"
    if entry.tokens_before is not None and entry.tokens_after is not None:
        note += f" ({entry.tokens_before:,} → {entry.tokens_after:,} tokens)"
    elif entry.tokens_before is not None:
        note += f" ({entry.tokens_before:,} tokens before)"
    return f"{note} by {entry.strategy}"
