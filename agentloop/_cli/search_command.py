"""``agentloop sessions search QUERY``: which conversation said it, when, and an excerpt.

The store's full-text search (:meth:`sessions.SessionStore.search_messages`) over the
conversations of a workspace (or all of them), compacted sessions included. Read-only, like the
other reading commands; a store from before the search index is upgraded once (opened for
writing: the index is built from the messages already there), as any agentloop run would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from agentloop._cli import render
from agentloop._cli.cells import cells, cut_words, wrap_cells

if TYPE_CHECKING:
    from agentloop._sessions import SearchHit, SessionStore

SEARCH_LIMIT = 20
SEARCH_MAX = 200
EXCERPT_CHARS = 240
_INDENT = "    "
_BOLD, _PLAIN = "\033[1m", "\033[0m"


def _words(query: str) -> re.Pattern[str]:
    """The query's words as they match (``deploy*`` a prefix; punctuation separates words)."""
    terms = [w for w in re.split(r"[^\w*]+", query) if w.strip("*")]
    alternatives = [
        re.escape(w.rstrip("*")) + (r"\w*" if w.endswith("*") else r"(?!\w)") for w in terms
    ]
    return re.compile(r"(?<!\w)(?:" + ("|".join(alternatives) or "(?!)") + ")", re.IGNORECASE)


def _find(store: SessionStore, query: str, workspace: str | None, limit: int) -> list[SearchHit]:
    # More than asked for: what a compaction carried over (a summary quoting the user, a
    # verbatim copy) ranks after the message as it was first said, and may fall off the end.
    hits = store.search_messages(
        query, workspace=workspace, limit=min(2 * limit, SEARCH_MAX), excerpt_chars=EXCERPT_CHARS
    )
    carried = _carried_over(store, hits)
    own = _agentloops_own(store, hits)
    kept = [hit for hit in hits if (hit.session_id, hit.seq) not in own]
    ranked = sorted(kept, key=lambda hit: (hit.session_id, hit.seq) in carried)  # stable
    return ranked[:limit]


def _agentloops_own(store: SessionStore, hits: Sequence[SearchHit]) -> set[tuple[str, int]]:
    """The hits that are agentloop's own messages (the ``role: "system"`` context a compaction
    carries: the ledger, the state, the latest request), copies of what the user and the tools
    said, which are found where they were said."""
    from agentloop._adapters.records import ROLE

    out: set[tuple[str, int]] = set()
    for session_id in {hit.session_id for hit in hits}:
        wanted = {hit.seq for hit in hits if hit.session_id == session_id}
        for message in store.get_messages(session_id):
            if message.seq in wanted and message.metadata.get(ROLE) == "system":
                out.add((session_id, message.seq))
    return out


def _carried_over(store: SessionStore, hits: Sequence[SearchHit]) -> set[tuple[str, int]]:
    """The hits that are a compaction's context in its child: its summary and the messages
    it carried over, which were said (and are found) in the parent too."""
    out: set[tuple[str, int]] = set()
    prefix: dict[str, int] = {}
    for hit in hits:
        if hit.session_id not in prefix:
            entries = store.compaction_history(hit.session_id)
            made = next((e for e in entries if e.child_id == hit.session_id), None)
            prefix[hit.session_id] = 0 if made is None else made.messages_after
        if hit.seq < prefix[hit.session_id]:
            out.add((hit.session_id, hit.seq))
    return out


def search_command(
    store: SessionStore,
    out: TextIO,
    query: str,
    *,
    workspace: str | None,
    limit: int = SEARCH_LIMIT,
    as_json: bool = False,
    location: str | None = None,
) -> None:
    """The best ``limit`` matches of ``query`` in ``workspace``'s conversations (every
    workspace if None)."""
    from agentloop._cli.store_access import open_cli_store
    from agentloop._sessions import StoreVersionError

    try:
        hits = _find(store, query, workspace, limit)
    except StoreVersionError:
        if not getattr(store, "read_only", False):
            raise
        with open_cli_store(location) as writable:  # builds the index, then searches
            hits = _find(writable, query, workspace, limit)
    if as_json:
        render.print_json([_plain(hit) for hit in hits], out)
        return
    if not hits:
        where = "in any workspace" if workspace is None else f"in {render.home_short(workspace)}"
        out.write(f"No messages match {render.one_line(query)!r} {where}.\n")
        return
    width = render.terminal_width(out)
    now = datetime.now(UTC)
    words = _words(query)
    for number, hit in enumerate(hits):
        if number:
            out.write("\n")
        head = [hit.session_id[:8], f"#{hit.seq + 1}", _what(hit), render.ago(hit.created_at, now)]
        if workspace is None:
            head.append(render.home_short(hit.workspace))
        line = "  ".join(head)
        if hit.title:
            title = f'"{render.one_line(hit.title)}"'
            room = None if width is None else width - cells(line) - 2
            line += "  " + (title if room is None else cut_words(title, max(room, 12)))
        out.write(line + "\n")
        if width is None:
            out.write(_INDENT + hit.excerpt + "\n")
            continue
        # At most two lines, the match in the first of them, its words in bold.
        room = max(width - len(_INDENT), 20)
        excerpt = hit.excerpt
        found = words.search(excerpt)
        if cells(excerpt) > 2 * room:
            excerpt = _around(excerpt, found.start() if found else 0, 2 * room - 2)
        bold = render.styled()
        for shown in wrap_cells(excerpt, room)[:2]:
            if bold:
                shown = words.sub(lambda m: f"{_BOLD}{m.group(0)}{_PLAIN}", shown)
            out.write(_INDENT + shown + "\n")


def _around(text: str, at: int, width: int) -> str:
    """About ``width`` cells of ``text`` from a word a little before position ``at``."""
    start = text.rfind(" ", 0, at - width // 4) + 1 if at > width // 4 else 0
    return cut_words(("…" if start else "") + text[start:], width)


def _what(hit: SearchHit) -> str:
    if hit.tool_name is None:
        return hit.role
    return f"{hit.tool_name} {'result' if hit.role == 'user' else 'call'}"


def _plain(hit: SearchHit) -> dict[str, object]:
    return {
        "session_id": hit.session_id,
        "seq": hit.seq,
        "message": hit.seq + 1,
        "role": hit.role,
        "tool_name": hit.tool_name,
        "created_at": render.iso(hit.created_at),
        "root_id": hit.root_id,
        "title": hit.title,
        "workspace": hit.workspace,
        "excerpt": hit.excerpt,
    }
