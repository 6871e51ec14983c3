"""What a search shows of its matches: the messages fetched, best first, each as an excerpt
naming its tool, a message copied into later sessions shown once, excluded tools' calls and
results left out (the matches themselves are :mod:`sessions._sql_search`'s)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from ._search_text import Piece, Term, best_excerpt, loads_content, pieces
from ._sql_db import Db, dt

if TYPE_CHECKING:
    from ._types import SearchHit

Match = tuple[str, int, float]
"""(session_id, seq, score) of a matching message; the lower the score, the better the match."""

_FETCH = (
    "SELECT m.session_id, m.seq, m.role, m.content, m.created_at, s.root_id, s.title, "
    "s.workspace, s.depth FROM messages m JOIN sessions s ON s.id = m.session_id WHERE "
)


def _fetch(db: Db, keys: Sequence[tuple[str, int]], columns: str) -> list[tuple[Any, ...]]:
    """Messages by (session_id, seq), in chunks."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), 200):
        chunk = keys[start : start + 200]
        condition = " OR ".join("(m.session_id = ? AND m.seq = ?)" for _ in chunk)
        flat = [value for key in chunk for value in key]
        rows += db.all(columns + condition, flat)
    return rows


def hits_of(
    db: Db,
    matches: Sequence[Match],
    terms: Sequence[Term],
    limit: int,
    excerpt_chars: int,
    exclude_tools: Collection[str],
    redact: Callable[[str], str] | None,
) -> list[SearchHit]:
    from ._types import SearchHit

    score = {(session_id, seq): value for session_id, seq, value in matches}
    rows = _fetch(db, list(score), _FETCH)
    # Best first; among equals (a message and its copies) the earliest generation first.
    rows.sort(key=lambda row: (score[(str(row[0]), int(row[1]))], int(row[8]), int(row[1])))
    found = [(row, pieces(loads_content(row[3]))) for row in rows]
    names = _tool_names(db, found)
    hits: list[SearchHit] = []
    seen: set[tuple[str, str | None, str]] = set()
    for row, parts in found:
        named = [
            Piece(p.text, p.tool_name or names.get(p.tool_use_id or ""), p.tool_use_id)
            for p in parts
        ]
        shown = [p for p in named if p.tool_name not in exclude_tools or p.tool_name is None]
        excerpt = best_excerpt(shown, terms, excerpt_chars, redact)
        if excerpt is None or (excerpt.found == 0 and len(shown) < len(named)):
            continue  # what matched was an excluded tool's call or result
        key = (str(row[2]), excerpt.piece.tool_name, excerpt.text)
        if key in seen:
            continue
        seen.add(key)
        hits.append(
            SearchHit.model_construct(
                session_id=str(row[0]),
                seq=int(row[1]),
                role=row[2],
                created_at=dt(row[4]),
                tool_name=excerpt.piece.tool_name,
                excerpt=excerpt.text,
                root_id=str(row[5]),
                title=row[6],
                workspace=str(row[7]),
            )
        )
        if len(hits) == limit:
            break
    return hits


def _tool_names(db: Db, found: Sequence[tuple[Sequence[Any], list[Piece]]]) -> dict[str, str]:
    """Tool names of the tool results among ``found``, read from the calls in the message
    before each (where a tool result's call always is)."""
    wanted = sorted(
        {
            (str(row[0]), int(row[1]) - 1)
            for row, parts in found
            if any(p.tool_use_id is not None for p in parts)
        }
    )
    names: dict[str, str] = {}
    for (content,) in _fetch(db, wanted, "SELECT m.content FROM messages m WHERE "):
        names.update(_call_ids(loads_content(content)))
    return names


def _call_ids(content: Sequence[Any]) -> dict[str, str]:
    return {
        str(block["id"]): str(block["name"])
        for block in content
        if isinstance(block, dict)
        and isinstance(block.get("id"), str)
        and isinstance(block.get("name"), str)
    }
