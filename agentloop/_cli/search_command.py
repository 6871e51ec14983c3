"""``agentloop sessions search QUERY``: which conversation said it, when, and an excerpt.

The store's full-text search (:meth:`sessions.SessionStore.search_messages`) over the
conversations of a workspace (or all of them), compacted sessions included. Read-only, like the
other reading commands; a store from before the search index is upgraded once (opened for
writing: the index is built from the messages already there), as any agentloop run would.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from agentloop._cli import render

if TYPE_CHECKING:
    from agentloop._sessions import SearchHit, SessionStore

SEARCH_LIMIT = 20
SEARCH_MAX = 200
EXCERPT_CHARS = 240
_INDENT = "    "


def _find(store: SessionStore, query: str, workspace: str | None, limit: int) -> list[SearchHit]:
    return store.search_messages(
        query, workspace=workspace, limit=limit, excerpt_chars=EXCERPT_CHARS
    )


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
    for number, hit in enumerate(hits):
        if number:
            out.write("\n")
        head = [hit.session_id[:8], f"#{hit.seq + 1}", _what(hit), render.ago(hit.created_at, now)]
        if workspace is None:
            head.append(render.home_short(hit.workspace))
        if hit.title:
            head.append(f'"{render.one_line(hit.title)}"')
        out.write(render.fit("  ".join(head), width) + "\n")
        if width is None:
            out.write(_INDENT + hit.excerpt + "\n")
        else:
            from agentloop._cli.cells import wrap_cells  # measured in cells: CJK, emoji

            lines = wrap_cells(hit.excerpt, max(width - len(_INDENT), 20))
            out.writelines(_INDENT + line + "\n" for line in lines)


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
