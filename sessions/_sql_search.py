"""Full-text search over stored messages: the index's upkeep and its queries, for both backends.

The index holds one row per message: its words (:func:`sessions._search_text.index_words`) and
its lineage's root id, written by the same transaction as the message on PostgreSQL, in batches
on SQLite (:func:`catch_up`; a search sees what waits all the same), and removed with it by the
database itself (SQLite: a trigger on ``messages``; PostgreSQL: a foreign key ``ON DELETE
CASCADE``), whatever deletes the message.

- SQLite: an FTS5 table ``message_search(body, root)`` whose rowid is the message's id. A
  conversation's search is ``root : "<root id>" AND body : (...)``: FTS5 intersects the root's
  posting list with the words', so the cost follows the conversation's matches, not the store's.
- PostgreSQL: the built-in full-text search, a table ``message_search(session_id, seq, root_id,
  terms tsvector)`` with a GIN index on ``terms``: the message's words (without positions) and
  the root id as a lexeme of its own, ranked by ``ts_rank``. No extension is needed
  (``pg_trgm`` must be installed by a superuser, its index is several times larger than a GIN
  index of words, and it ranks by similarity, not by words), and no language: words are not
  stemmed, so identifiers and any language are found alike.

A workspace's search is that of its conversations (their roots, any of them); at most
:data:`RANKED` matches are ranked, so that a word said in a third of the store costs about what
a rare one does.

Both see the same words: the text is split and lowercased here, once (:mod:`._search_text`),
and given to each backend as these words separated by spaces: FTS5's ``unicode61`` tokenizer
splits them back into exactly them; PostgreSQL takes them as lexemes as they are (its parser
would keep ``src/app.py`` whole, and sees letters by the server's locale). A query is written
in the same words. What differs between the two is in a :class:`SearchDialect`; the
rest is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._search_text import (
    Piece,
    Term,
    best_excerpt,
    index_words,
    loads_content,
    parse_query,
    pieces,
)
from ._sql_db import Db, dt
from ._store_errors import SearchQueryError, StoreVersionError

if TYPE_CHECKING:
    from ._types import SearchHit

IndexRow = tuple[str, int, Any]
"""(session_id, seq, content) of a message to index; content as blocks or as its JSON text."""
IndexParams = tuple[str, int, str, str]
"""(session_id, seq, root_id, encoded words): a message as :meth:`SearchDialect.insert` takes it."""
Match = tuple[str, int, float]
"""(session_id, seq, score) of a matching message; the lower the score, the better the match."""

_MAX_POOL = 1000
RANKED = 1000
"""At most this many matches of a query are ranked (SQLite: the newest; PostgreSQL: the first
its index scan meets): a word in a third of 100k messages is found as fast as a rare one, and
such a word ranks its messages nearly alike anyway."""


class SearchDialect:
    """What differs between the backends' search SQL: the index's table, how words and queries
    are written for it, and the statement that ranks the matches."""

    name: str
    exists: str
    """One row when the index table exists (an older store opened read-only has none)."""
    deferred = False
    """Messages are indexed in batches after their append (see :func:`catch_up`), not by it."""

    def encode(self, words: Sequence[str]) -> str:
        """A message's words as the insert's parameter: separated by spaces (each is letters
        and digits only, so that the backend's own parser finds exactly these words)."""
        return " ".join(words)

    def insert(self, count: int, stored: bool = False) -> str:
        """One statement indexing ``count`` messages; per message the parameters of an
        :data:`IndexParams`."""
        raise NotImplementedError

    def ranked(
        self, terms: Sequence[Term], any_term: bool, roots: Sequence[str] | None
    ) -> tuple[str, list[Any]]:
        """The statement (and its parameters, but for the trailing ``LIMIT ?``) of the best
        matches as :data:`Match` rows, best first, in the lineages of ``roots`` (None: in
        all)."""
        raise NotImplementedError


class SqliteSearch(SearchDialect):
    """FTS5: the words as text (the unicode61 tokenizer splits them where we did), and the
    lineage's root id in a column of its own: a conversation's search intersects the root id's
    posting list with the words' lists, so its cost follows the conversation's matches, not the
    store's."""

    name = "sqlite"
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'message_search'"
    deferred = True
    _SCORE = "bm25(message_search, 1.0, 0.0)"  # the root column does not rank

    def insert(self, count: int, stored: bool = False) -> str:
        # One statement, not one per message: FTS5 (before SQLite 3.42) writes a new segment
        # for each statement, so that an append of many messages would add as many segments,
        # and merging them would make the cost of later appends jump.
        values = ", ".join(["(?, ?, ?, ?)"] * count)
        return (
            "INSERT INTO message_search (rowid, root, body) SELECT m.id, v.column3, v.column4 "
            f"FROM (VALUES {values}) v "
            "JOIN messages m ON m.session_id = v.column1 AND m.seq = v.column2"
        )

    def ranked(
        self, terms: Sequence[Term], any_term: bool, roots: Sequence[str] | None
    ) -> tuple[str, list[Any]]:
        quoted = [f'"{t.word}"' + ("*" if t.prefix else "") for t in terms]
        query = f"body : ({(' OR ' if any_term else ' AND ').join(quoted)})"
        if roots is not None:
            ids = " OR ".join('"' + root.replace('"', '""') + '"' for root in roots)
            query = f"root : ({ids}) AND {query}"
        # FTS5 alone picks the best of the newest RANKED matches; only those are joined to
        # their messages.
        return (
            "SELECT m.session_id, m.seq, r.score FROM (SELECT id, score FROM (SELECT rowid "
            f"AS id, {self._SCORE} AS score FROM message_search WHERE message_search MATCH ? "
            f"ORDER BY rowid DESC LIMIT {RANKED}) ORDER BY score LIMIT ?) r "
            "JOIN messages m ON m.id = r.id ORDER BY r.score",
            [query],
        )


class PostgresSearch(SearchDialect):
    """The built-in full-text search: one GIN index on a ``tsvector`` of the words and of the
    lineage's root id (a lexeme ``r_<root id>``, which no word can be: ``_`` separates words),
    so that the index alone finds a conversation's matches, whatever the planner knows of the
    table. A workspace's conversations are checked by their ``root_id`` column instead: a
    ``tsquery`` of many roots costs GIN more than the rows it would spare."""

    name = "postgresql"
    exists = "SELECT 1 WHERE to_regclass('message_search') IS NOT NULL"

    def insert(self, count: int, stored: bool = False) -> str:
        # The words become the lexemes as they are (no parser, no stemming, no stop words),
        # each once, without positions: ts_rank then weighs how many of the query's words a
        # message holds against its length, and an append costs about half what positions
        # (and a tsvector several times larger, TOASTed) would.
        row = "(CAST(? AS text), CAST(? AS integer), CAST(? AS text), CAST(? AS text))"
        joined = " JOIN messages m ON m.session_id = v.column1 AND m.seq = v.column2"
        return (
            "INSERT INTO message_search (session_id, seq, root_id, terms) SELECT v.column1, "
            "v.column2, v.column3, array_to_tsvector(array_append(string_to_array(v.column4, "
            f"' '), 'r_' || v.column3)) FROM (VALUES {', '.join([row] * count)}) v"
            + (joined if stored else "")
        )

    def ranked(
        self, terms: Sequence[Term], any_term: bool, roots: Sequence[str] | None
    ) -> tuple[str, list[Any]]:
        words = (" | " if any_term else " & ").join(
            f"'{t.word}'" + (":*" if t.prefix else "") for t in terms
        )
        found, where, params = words, "", []
        if roots is not None and len(roots) == 1:
            found = f"({words}) & 'r_{roots[0]}'"
        elif roots is not None:
            where, params = " AND f.root_id = ANY(?)", [list(roots)]
        # The first RANKED matches the bitmap scan meets are ranked (no order is cheaper to
        # get: a GIN index has none, and any other would read every match), by their words.
        return (
            "SELECT session_id, seq, -ts_rank(terms, CAST(? AS tsquery), 1) AS score FROM "
            "(SELECT f.session_id, f.seq, f.terms FROM message_search f "
            f"WHERE f.terms @@ CAST(? AS tsquery){where} LIMIT {RANKED}) c "
            "ORDER BY score LIMIT ?",
            [words, found, *params],
        )


SQLITE_SEARCH = SqliteSearch()
POSTGRES_SEARCH = PostgresSearch()
SEARCH_DIALECTS: dict[str, SearchDialect] = {d.name: d for d in (SQLITE_SEARCH, POSTGRES_SEARCH)}


def dialect_of(db: Db) -> SearchDialect:
    return SEARCH_DIALECTS[db.dialect.name]


# ------------------------------------------------------------------ the index's upkeep


_INSERT_BATCH = 200
"""Messages per insert statement (4 parameters each: under SQLite's oldest limit of 999)."""


def index_params(
    dialect: SearchDialect, root_id: str, rows: Iterable[IndexRow]
) -> list[IndexParams]:
    """The insert's parameters for the messages of ``rows`` that hold a word."""
    params = []
    for session_id, seq, content in rows:
        words = index_words(loads_content(content))
        if words:
            params.append((session_id, seq, root_id, dialect.encode(words)))
    return params


def insert_statements(
    dialect: SearchDialect, params: Sequence[IndexParams], stored: bool = False
) -> Iterator[tuple[str, list[Any]]]:
    """The statements (and their parameters) indexing the messages of ``params``: one per
    :data:`_INSERT_BATCH` of them (``stored``: only those the messages table holds)."""
    for start in range(0, len(params), _INSERT_BATCH):
        batch = params[start : start + _INSERT_BATCH]
        yield dialect.insert(len(batch), stored), [value for row in batch for value in row]


def index_messages(db: Db, root_id: str, rows: Iterable[IndexRow], *, stored: bool = False) -> bool:
    """Index messages just inserted (same transaction) into the lineage rooted at ``root_id``.
    ``stored``: only those the messages table holds (a copy checks what arrived afterwards,
    and says what did not). SQLite: they wait for a batch (:func:`catch_up`); True when
    :data:`SEARCH_BATCH` messages wait (the store then indexes them in the background)."""
    dialect = dialect_of(db)
    if dialect.deferred:
        return behind(db, inserted=True) >= SEARCH_BATCH
    params = index_params(dialect, root_id, rows)
    for statement, values in insert_statements(dialect, params, stored):
        db.run(statement, values)
    return False


# SQLite indexes in batches, in the background. An FTS5 table tokenizes every word into its
# pending terms and writes a new segment at every commit that changed it, which made an append
# cost +80 %: now the messages with an id above ``search_state.upto`` wait; once SEARCH_BATCH
# wait, the store indexes them all on a thread of its own (``SqliteSessionStore``), between
# the turns; a search by a store that may write indexes them first, and a read-only one
# matches them here, in Python.
# The mark moves in the transaction that writes their index rows, so a kill -9 loses nothing:
# what was committed and not indexed still waits. Writers are serialized by SQLite, so ids
# grow in commit order; a trigger (``messages_search_upto``) lowers the mark when the newest
# messages are deleted, so that a reused id is never taken for indexed.

SEARCH_BATCH = 64
"""Messages that wait for the index before an append indexes them (SQLite)."""

_BEHIND = "SELECT coalesce((SELECT max(id) FROM messages), 0) - upto FROM search_state"
_BEHIND_INSERTED = "SELECT last_insert_rowid() - upto FROM search_state"
"""Right after messages were inserted: the newest is the connection's last row (an append reads
nothing of the messages table)."""
_WAITING = (
    "SELECT m.id, m.session_id, m.seq, s.root_id, m.content FROM messages m "
    "JOIN sessions s ON s.id = m.session_id WHERE m.id > ? ORDER BY m.id LIMIT 500"
)


def behind(db: Db, *, inserted: bool = False) -> int:
    """How many message ids are above the index's mark (0: none waits; PostgreSQL: always 0);
    ``inserted``: called right after inserting messages."""
    if not dialect_of(db).deferred:
        return 0
    row = db.one(_BEHIND_INSERTED if inserted else _BEHIND)
    return int(row[0]) if row is not None else 0


def catch_up(db: Db) -> int:
    """Index every message that waits (in the caller's write transaction); how many."""
    dialect = dialect_of(db)
    if not dialect.deferred:
        return 0
    row = db.one("SELECT upto FROM search_state")
    upto = int(row[0]) if row is not None else 0
    count = 0
    while rows := db.all(_WAITING, [upto]):
        # The rowid is the message's id, read above: no join back to the messages.
        values: list[Any] = []
        for message_id, _session_id, _seq, root_id, content in rows:
            words = index_words(loads_content(content))
            if words:
                values += (message_id, str(root_id), dialect.encode(words))
        for start in range(0, len(values), 3 * _INSERT_BATCH):
            chunk = values[start : start + 3 * _INSERT_BATCH]
            marks = ", ".join(["(?, ?, ?)"] * (len(chunk) // 3))
            db.run(f"INSERT INTO message_search (rowid, root, body) VALUES {marks}", chunk)
        upto, count = int(rows[-1][0]), count + len(rows)
    db.run("UPDATE search_state SET upto = ?", [upto])
    return count


def _waiting_matches(
    db: Db, terms: Sequence[Term], any_term: bool, roots: Sequence[str] | None
) -> list[Match]:
    """The messages not indexed yet that match (a read-only store cannot index them), ranked
    after those the index found."""
    if not dialect_of(db).deferred:
        return []
    row = db.one("SELECT upto FROM search_state")
    upto = int(row[0]) if row is not None else 0
    wanted = None if roots is None else set(roots)
    found: list[Match] = []
    while rows := db.all(_WAITING, [upto]):
        for _id, session_id, seq, root_id, content in rows:
            if wanted is not None and str(root_id) not in wanted:
                continue
            words = set(index_words(loads_content(content)))
            hits = (
                any(w.startswith(t.word) for w in words) if t.prefix else t.word in words
                for t in terms
            )
            if any(hits) if any_term else all(hits):
                found.append((str(session_id), int(seq), 0.0))
        upto = int(rows[-1][0])
    return found


BACKFILL_BATCH = (
    "SELECT m.session_id, m.seq, s.root_id, m.content FROM messages m "
    "JOIN sessions s ON s.id = m.session_id WHERE (m.session_id, m.seq) > (?, ?) "
    "ORDER BY m.session_id, m.seq LIMIT 500"
)


def backfill(
    fetch: Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]],
    run: Callable[[str, Sequence[Any]], object],
    dialect: SearchDialect,
) -> int:
    """Index every stored message (a migration building the index of an existing store), in
    batches; ``fetch``/``run`` run a statement (``?`` placeholders) on the migrating
    connection, returning its rows / not. Returns how many messages were read."""
    after: tuple[str, int] = ("", -1)
    count = 0
    while rows := fetch(BACKFILL_BATCH, after):
        params = []
        for session_id, seq, root_id, content in rows:
            params += index_params(dialect, str(root_id), [(str(session_id), int(seq), content)])
        for statement, values in insert_statements(dialect, params):
            run(statement, values)
        count += len(rows)
        after = (str(rows[-1][0]), int(rows[-1][1]))
    return count


# ------------------------------------------------------------------ searching


def search(
    db: Db,
    location: str,
    query: str,
    *,
    root_id: str | None,
    workspace: str | None,
    limit: int,
    excerpt_chars: int,
    any_term: bool,
    exclude_tools: Collection[str],
    redact: Callable[[str], str] | None,
) -> list[SearchHit]:
    """The best ``limit`` matches of ``query`` (in the lineage of ``root_id``, else in the
    conversations whose head is in ``workspace``, else everywhere), best first.

    A message copied into a later session (a compaction's verbatim tail, a fork) is shown once,
    where it was first said. ``exclude_tools``: calls of these tools and their results are not
    shown (e.g. earlier searches, which quote what they found). Of more than :data:`RANKED`
    matching messages, :data:`RANKED` are ranked.
    """
    terms = parse_query(query)
    if not terms:
        raise SearchQueryError(f"nothing to search for in {query!r}: give words or numbers")
    dialect = dialect_of(db)
    if db.one(dialect.exists) is None:
        raise StoreVersionError(
            f"session store {location} has no search index yet: it needs an upgrade "
            "(the search index) that cannot be done read-only; open it once for writing",
            location=location,
        )
    roots: list[str] | None = None
    if root_id is not None:
        roots = [root_id]
    elif workspace is not None:
        roots = [str(row[0]) for row in db.all(_ROOTS_IN, [workspace])]
        if not roots:
            return []
    statement, params = dialect.ranked(terms, any_term, roots)
    waiting = _waiting_matches(db, terms, any_term, roots)
    pool = max(4 * limit + 16, 32)
    while True:
        matches: list[Match] = [
            (str(row[0]), int(row[1]), float(row[2])) for row in db.all(statement, [*params, pool])
        ]
        matches += waiting
        hits = _hits(db, matches, terms, limit, excerpt_chars, exclude_tools, redact)
        if len(hits) >= limit or len(matches) < pool or pool >= _MAX_POOL:
            return hits
        pool = min(pool * 4, _MAX_POOL)  # copies and excluded calls took places: look further


_ROOTS_IN = "SELECT root_id FROM lineages WHERE workspace = ?"
"""The conversations of a workspace: those whose head is in it (as ``sessions list``)."""

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


def _hits(
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
