"""``agentloop sessions list|show|search|tree|export|fork|delete|prune|copy``: the session
store, by hand.

The reading commands (:mod:`agentloop._cli.list_commands`, :mod:`agentloop._cli.transcript`) open
the store read-only: they never create or write one ("no sessions yet" when there is none; ``[]``
for ``--json`` listings), and read a store that may not be written. The writing ones (``fork``,
``delete``, ``prune``) do not create a missing store either. :func:`run` maps the parsed command
line onto them; ``delete`` and ``prune`` say what they would delete and ask first unless
``--yes``; ``copy`` moves everything to another store.

Imports nothing heavy at module level (``agentloop --help`` builds this parser) and never imports
``anthropic``: the store and pydantic are loaded inside :func:`run`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TextIO, TypeVar

from agentloop._cli.list_commands import DEFAULT_LIMIT
from agentloop._cli.search_command import SEARCH_LIMIT, SEARCH_MAX
from agentloop._core.measuring.figures import plural
from agentloop._core.values.validation import parse_positive_int
from agentloop._errors import AgentloopError, ConfigurationError

if TYPE_CHECKING:
    from agentloop._sessions import Session, SessionStore

EXIT_OK = 0
EXIT_USAGE = 2
_STORE_HELP = (
    "the session store: a path, sqlite:///PATH or postgresql://… (default $AGENTLOOP_STORE, "
    "else sessions.db in $AGENTLOOP_HOME or the user data dir)"
)
_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]+)\s*$")
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "seconds"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "minutes"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "hours"),
    **dict.fromkeys(("d", "day", "days"), "days"),
    **dict.fromkeys(("w", "week", "weeks"), "weeks"),
}
DURATION_HELP = "a number and a unit: s (seconds), m (minutes), h (hours), d (days), w (weeks)"
SUBCOMMANDS = "list, show, search, tree, export, fork, delete, prune and copy"
READING = frozenset({None, "list", "show", "tree", "export", "copy", "search"})

P = TypeVar("P", bound=argparse.ArgumentParser)
Command = Callable[["SessionStore", TextIO], None]


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


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``, ``90m``, ``45s`` (or the units' names: ``3 days``)."""
    match = _DURATION.match(text)
    unit = _UNITS.get(match.group(2).lower()) if match is not None else None
    if match is None or unit is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: expected {DURATION_HELP}, e.g. 30d, 12h, 90m, 45s"
        )
    return timedelta(**{unit: int(match.group(1))})


def _store_option(command: argparse.ArgumentParser) -> None:
    # Also after the sub-command; SUPPRESS keeps a value given earlier on the line.
    command.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help=_STORE_HELP)


def _ids(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument("id", metavar="ID", help=f"{what} (id or unique prefix, 4+ characters)")


def add_parser(subparsers: argparse._SubParsersAction[P]) -> P:
    """Add ``sessions`` and its sub-commands to the ``agentloop`` parser."""
    parser = subparsers.add_parser(
        "sessions",
        help=f"{SUBCOMMANDS} stored sessions",
        description="Inspect and manage stored sessions. A compacted conversation continues "
        "in a child session; both are kept. IDs may be given as a unique prefix of 4+ "
        "characters.",
    )
    _store_option(parser)
    parser.set_defaults(
        sessions_command=None,
        workspace=None,
        all=False,
        limit=DEFAULT_LIMIT,
        json=False,
        all_generations=False,
    )
    # Each sub-command's usage line is its own (`agentloop sessions export [-h] ...`), not the
    # top-level usage with the sub-command glued to its end.
    commands = parser.add_subparsers(
        dest="sessions_command", metavar="SUBCOMMAND", prog="agentloop sessions"
    )

    listing = commands.add_parser(
        "list",
        help="conversations of this workspace, most recent first (the default)",
        description="List conversations, most recently active first: one row each, its newest "
        "session (where --resume continues) and its generation (1: never compacted). By "
        "default only those of the current directory's workspace.",
    )
    _store_option(listing)
    where = listing.add_mutually_exclusive_group()
    where.add_argument(
        "--workspace", metavar="DIR", help="sessions of this directory (default: the current one)"
    )
    where.add_argument("--all", action="store_true", help="sessions of every workspace")
    listing.add_argument(
        "--all-generations",
        action="store_true",
        help="one row per session: every generation of every conversation",
    )
    listing.add_argument(
        "--limit",
        metavar="N",
        type=_limit,
        default=DEFAULT_LIMIT,
        help=f"show at most N rows (default {DEFAULT_LIMIT}; 0 = all)",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON array")

    show = commands.add_parser(
        "show", help="a session and its messages", description="Show a session."
    )
    _store_option(show)
    _ids(show, "the session")
    show.add_argument("--json", action="store_true", help="print one JSON object")

    search = commands.add_parser(
        "search",
        help="find what a conversation said, compacted parts included",
        description="Full-text search of the stored messages (tool inputs and results too, "
        "and the sessions a compaction replaced): which conversation said it, when, and an "
        "excerpt. A message matches when it holds every word; end a word with * to match its "
        "prefix. By default only the conversations of the current directory's workspace.",
    )
    _store_option(search)
    search.add_argument("query", metavar="QUERY", help="the words to look for")
    where = search.add_mutually_exclusive_group()
    where.add_argument(
        "--workspace",
        metavar="DIR",
        help="conversations of this directory (default: the current one)",
    )
    where.add_argument("--all", action="store_true", help="conversations of every workspace")
    search.add_argument(
        "--limit",
        metavar="N",
        type=_limit,
        default=SEARCH_LIMIT,
        help=f"show at most N matches (default {SEARCH_LIMIT}; 0 = {SEARCH_MAX})",
    )
    search.add_argument("--json", action="store_true", help="print a JSON array")

    tree = commands.add_parser(
        "tree",
        help="a conversation's lineage with compaction notes",
        description="Show the lineage (root and all descendants) of a session: a chain of "
        "compactions as a list, indented where it forks. Without ID: the most recent "
        "conversation of the current workspace.",
    )
    _store_option(tree)
    tree.add_argument("id", metavar="ID", nargs="?", help="any session of the lineage")
    tree.add_argument("--json", action="store_true", help="print the tree as nested JSON")

    export = commands.add_parser(
        "export",
        help="a conversation's complete transcript, to stdout",
        description="Print the complete transcript of the conversation ID belongs to: every "
        "session of its lineage in order, from the first to where resuming ID continues, each "
        "message once (what a compaction carried over is not repeated; its summary is shown).",
    )
    _store_option(export)
    _ids(export, "any session of the conversation")
    export.add_argument(
        "--format",
        choices=("markdown", "json"),
        default="markdown",
        help="markdown (default) or json",
    )
    export.add_argument("--json", action="store_true", help="the same as --format json")

    delete = commands.add_parser(
        "delete",
        help="delete a session (a leaf) or, with --lineage, its whole conversation",
        description="Delete a session that no later generation continues, or with --lineage "
        "every session of its conversation. Asks first unless --yes.",
    )
    _store_option(delete)
    _ids(delete, "the session")
    delete.add_argument(
        "--lineage", action="store_true", help="delete the whole conversation ID belongs to"
    )
    delete.add_argument("--yes", action="store_true", help="do not ask")

    prune = commands.add_parser(
        "prune",
        help="delete conversations not used for a while",
        description="Delete whole conversations whose last activity is older than the given "
        "age: by default those of the current directory's workspace (as `list` shows them). "
        "Says how many would go and asks first unless --yes.",
    )
    _store_option(prune)
    prune.add_argument(
        "--older-than",
        metavar="AGE",
        type=parse_duration,
        required=True,
        help=f"{DURATION_HELP}, e.g. 30d, 12h, 90m, 45s",
    )
    where = prune.add_mutually_exclusive_group()
    where.add_argument(
        "--workspace",
        metavar="DIR",
        help="conversations of this directory (default: the current one)",
    )
    where.add_argument("--all", action="store_true", help="conversations of every workspace")
    prune.add_argument("--yes", action="store_true", help="do not ask")

    fork = commands.add_parser(
        "fork",
        help="a new branch continuing from a session as it is (e.g. before a compaction)",
        description="Start a new branch of the conversation from session ID as it is: to undo "
        "a compaction, fork its parent. ID and its other branches stay as they are; resuming "
        "the conversation then continues in the most recently active branch.",
    )
    _store_option(fork)
    _ids(fork, "the session to continue from")

    copy = commands.add_parser(
        "copy",
        help="copy every session to another store (e.g. PostgreSQL)",
        description="Copy every conversation of the store (--store, else the default) to "
        "the store at --to, idempotently: what the target already holds is kept.",
    )
    _store_option(copy)
    copy.add_argument("--to", metavar="URL", required=True, help="the target store")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``sessions`` sub-command. User errors: one line on stderr, exit code 2."""
    from agentloop._cli.store_access import NoStoreYet, open_cli_store
    from agentloop._sessions import SessionError

    out = sys.stdout
    name: str | None = args.sessions_command
    location: str | None = getattr(args, "store", None)
    try:
        if name is None or name == "list":
            _list(args, location, out)
        else:
            command = _command(args)
            if name not in READING:
                _require_store(location)
            with open_cli_store(location, read_only=name in READING) as store:
                command(store, out)
        out.flush()
    except NoStoreYet:
        # What lists finds nothing (JSON: an empty array); what names a session, an error.
        finds = name in (None, "list", "search") or (name == "tree" and args.id is None)
        if finds and args.json:
            out.write("[]\n")
            return EXIT_OK
        if finds or name == "prune":
            out.write("No sessions yet.\n")
            return EXIT_OK
        print("agentloop: error: no sessions yet (there is no session store)", file=sys.stderr)
        return EXIT_USAGE
    except (SessionError, AgentloopError) as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `agentloop sessions list | head`: the reader left; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        return EXIT_OK
    return EXIT_OK


def _require_store(location: str | None) -> None:
    """:class:`NoStoreYet` when there is no store at ``location``: a command that writes
    (delete, prune, fork) has nothing to do there, and must not create one to find out."""
    from agentloop._cli.store_access import open_cli_store
    from agentloop._sessions import SessionError

    # (An older store cannot be read read-only: opening it to write says the rest.)
    with contextlib.suppress(SessionError):
        open_cli_store(location, read_only=True).close()


def _list(args: argparse.Namespace, location: str | None, out: TextIO) -> None:
    """``sessions list`` through the store's read-only listing handle, which loads neither the
    store classes nor pydantic (most of the command's start-up otherwise)."""
    from agentloop._cli import list_commands as listing
    from agentloop._cli.store_access import NoStoreYet
    from agentloop._sessions import StoreMissingError, open_listing

    workspace = None if args.all else current_workspace(args.workspace)
    limit = None if args.limit == 0 else args.limit
    try:
        lister = open_listing(location)
    except StoreMissingError:
        raise NoStoreYet() from None
    with lister:
        listing.list_command(
            lister,
            out,
            workspace=workspace,
            limit=limit,
            as_json=args.json,
            all_generations=args.all_generations,
        )


def _command(args: argparse.Namespace) -> Command:
    """The parsed sub-command as a call on an open store and the output stream."""
    from agentloop._cli import list_commands as listing
    from agentloop._cli import search_command as search
    from agentloop._cli import transcript

    name: str | None = args.sessions_command
    as_json: bool = args.json
    if name == "show":
        return lambda store, out: transcript.show_command(store, out, args.id, as_json=as_json)
    if name == "search":
        workspace = None if args.all else current_workspace(args.workspace)
        return lambda store, out: search.search_command(
            store,
            out,
            args.query,
            workspace=workspace,
            limit=args.limit or SEARCH_MAX,
            as_json=as_json,
            location=getattr(args, "store", None),
        )
    if name == "tree":
        here = current_workspace()
        return lambda store, out: listing.tree_command(
            store, out, args.id, workspace=here, as_json=as_json
        )
    if name == "export":
        from agentloop._cli.conversation_export import ExportFormat, export_conversation

        export_format: ExportFormat = "json" if args.json else args.format
        return lambda store, out: export_conversation(store, out, args.id, format=export_format)
    if name == "delete":
        return lambda store, out: delete_command(
            store, out, args.id, lineage=args.lineage, yes=args.yes
        )
    if name == "prune":
        workspace = None if args.all else current_workspace(args.workspace)
        return lambda store, out: prune_command(
            store, out, older_than=args.older_than, workspace=workspace, yes=args.yes
        )
    if name == "copy":
        return lambda store, out: copy_command(store, out, args.to)
    if name == "fork":
        return lambda store, out: fork_command(store, out, args.id)
    raise AssertionError(f"unknown sessions command {name!r}")


def current_workspace(directory: str | None = None) -> str:
    """The workspace key of ``directory`` (default: the current directory)."""
    from agentloop._sessions import workspace_key

    return workspace_key(directory)


def fork_command(store: SessionStore, out: TextIO, ref: str) -> None:
    """Fork ``ref``: print the new session's id and how to continue in it."""
    from agentloop._adapters.records import fork_session

    source = store.get_session(ref)
    fork = fork_session(store, source.id)
    out.write(
        f"Forked {source.id[:8]} ({source.message_count} messages) into {fork[:8]}: "
        f"continue with `agentloop --resume {fork[:8]}`\n"
    )


# ---------------------------------------------------------------------------- delete / prune


def confirm(question: str, *, yes: bool, subject: str = "") -> bool:
    """``--yes``, or the user's "y" on a terminal; without a terminal, a one-line error
    (naming ``subject``, what would be deleted)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        what = f" {subject}" if subject else ""
        raise AgentloopError(
            f"not deleting{what} without confirmation: add --yes (no terminal to ask)"
        )
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def delete_command(
    store: SessionStore, out: TextIO, ref: str, *, lineage: bool = False, yes: bool = False
) -> None:
    """Delete a leaf session, or (``lineage``) every session of its conversation."""
    from agentloop._cli import render

    session = store.get_session(ref)
    if lineage:
        members = store.lineage(session.id)
        count = sum(member.message_count for member in members)
        question = (
            f"Delete conversation {members[0].id[:8]}: "
            f"{plural(len(members), 'session')}, {plural(count, 'message')}?"
        )
    else:
        members = store.lineage(session.id)
        later = _descendants(session.id, members)
        if later:
            raise AgentloopError(
                f"session {session.id[:8]} continues in "
                f"{plural(later, 'later session')}; --lineage deletes the whole "
                f"conversation ({plural(len(members), 'session')})"
            )
        title = f' "{render.one_line(session.title)}"' if session.title else ""
        question = (
            f"Delete session {session.id[:8]}{title} ({plural(session.message_count, 'message')})?"
        )
    if not confirm(question, yes=yes):
        out.write("Nothing deleted.\n")
        return
    deleted = store.delete_session(session.id, lineage=lineage)
    out.write(f"Deleted {plural(deleted, 'session')}.\n")


def _descendants(session_id: str, lineage: Sequence[Session]) -> int:
    """How many sessions of ``lineage`` continue ``session_id``: children, theirs, forks."""
    children: dict[str | None, list[str]] = {}
    for member in lineage:
        children.setdefault(member.parent_id, []).append(member.id)
    count, todo = 0, list(children.get(session_id, []))
    while todo:
        count += 1
        todo.extend(children.get(todo.pop(), []))
    return count


def age_text(delta: timedelta) -> str:
    """A duration in its largest whole unit: ``30 days``, ``90 minutes``, ``1 second``."""

    seconds = int(delta.total_seconds())
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            return plural(seconds // size, unit)
    return plural(seconds, "second")


def prune_command(
    store: SessionStore,
    out: TextIO,
    *,
    older_than: timedelta,
    workspace: str | None = None,
    yes: bool = False,
) -> None:
    """Delete every conversation of ``workspace`` (None: of every workspace) not active for
    ``older_than``, saying first how many conversations and sessions that is."""

    where = "in every workspace" if workspace is None else f"in {workspace}"
    age = age_text(older_than)
    cutoff = datetime.now(UTC) - older_than
    idle = [
        row
        for row in store.list_conversations(workspace=workspace, limit=None)
        if row.updated_at < cutoff
    ]
    if not idle:
        out.write(f"No conversation {where} is older than {age}; nothing deleted.\n")
        return
    sessions = sum(row.sessions for row in idle)
    what = f"{plural(len(idle), 'conversation')} ({plural(sessions, 'session')})"
    question = f"Delete {what} {where} not active in the last {age}?"
    if not confirm(question, yes=yes, subject=what):
        out.write("Nothing deleted.\n")
        return
    deleted = store.prune(older_than=older_than, workspace=workspace)
    out.write(f"Deleted {plural(deleted, 'session')}")
    kept = sessions - deleted
    if kept > 0:
        out.write(f" ({plural(kept, 'session')} in use or active meanwhile kept)")
    out.write(".\n")


# ---------------------------------------------------------------------------- copy


def copy_command(store: SessionStore, out: TextIO, target: str) -> None:
    """Copy everything in ``store`` to the store at ``target``; print what was done."""
    from agentloop._cli.store_access import open_cli_store
    from agentloop._sessions import copy_store

    with open_cli_store(target) as destination:
        report = copy_store(store, destination)
    copied = ", ".join(
        f"{copied:,} {kind} copied ({present:,} already there)"
        for kind, copied, present in (
            ("sessions", report.sessions_copied, report.sessions_present),
            ("messages", report.messages_copied, report.messages_present),
            ("compactions", report.compactions_copied, report.compactions_present),
        )
    )
    shown = re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", target)  # never print a password
    conversations = plural(report.lineages, "conversation")
    out.write(f"Copied {conversations} to {shown}: {copied}.\n")
