"""Full-text search over stored messages: the index's upkeep and its queries, for both backends.

The index holds one row per message: its words (:func:`sessions._search_text.index_words`) and
its lineage's root id, written in batches after the message's append (:func:`catch_up`; a
search sees what waits all the same; a PostgreSQL import or copy indexes at once), and removed
with it by the
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
rest is written once. What a search shows of its matches is :mod:`._search_hits`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._search_hits import Match, hits_of
from ._search_text import Term, index_words, loads_content, parse_query
from ._sql_db import Db
from ._store_errors import SearchQueryError, StoreVersionError

if TYPE_CHECKING:
    from ._types import SearchHit

IndexRow = tuple[str, int, Any]
"""(session_id, seq, content) of a message to index; content as blocks or as its JSON text."""
IndexParams = tuple[str, int, str, str]
"""(session_id, seq, root_id, encoded words): a message as :meth:`SearchDialect.insert` takes it."""

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
    """One row when the index table exists (an older store opened read-only has none), its
    value true when messages may wait for it (a PostgreSQL store written before they did has
    no queue)."""
    queued = False
    """Appends queue their messages for the index (PostgreSQL), rather than leave them above a
    mark (SQLite, whose writers commit in the order of the ids): see :func:`catch_up`."""

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
    exists = (
        "SELECT to_regclass('search_waiting') IS NOT NULL "
        "WHERE to_regclass('message_search') IS NOT NULL"
    )
    queued = True

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


def index_at_once(db: Db, root_id: str, rows: Iterable[IndexRow], *, stored: bool = False) -> None:
    """Write the index rows of messages just inserted (same transaction), in the lineage rooted
    at ``root_id`` (``stored``: only those the messages table holds). What a PostgreSQL import
    or copy does; appends did it too before their messages waited for a batch."""
    dialect = dialect_of(db)
    params = index_params(dialect, root_id, rows)
    for statement, values in insert_statements(dialect, params, stored):
        db.run(statement, values)


def index_messages(db: Db, root_id: str, rows: Sequence[IndexRow], *, stored: bool = False) -> bool:
    """Have messages just inserted (same transaction) indexed, into the lineage rooted at
    ``root_id``: they wait for a batch (:func:`catch_up`; a search sees them meanwhile). True
    when a batch waits (the store then indexes it in the background). ``stored``: an import or
    a copy, which PostgreSQL indexes at once, only the messages the table holds (a copy checks
    what arrived afterwards, and says what did not)."""
    dialect = dialect_of(db)
    if not dialect.queued:
        return behind(db, inserted=True) >= SEARCH_BATCH
    if stored:
        index_at_once(db, root_id, rows, stored=True)
        return False
    return _queue(db, rows)


# Both backends index in batches, in the background: written in the append's transaction, the
# index made an append cost up to +80 % (SQLite: FTS5 takes every word into its pending terms
# and writes a segment at each commit; PostgreSQL: a tsvector and its GIN entries, +17 % to
# +48 % for a turn). A batch is written on a thread of the store, between the turns; a search
# by a store that may write indexes what waits first (what it cannot take, and a read-only
# store, it matches here, in Python). What waits and its index rows change in one
# transaction, so a kill -9 loses nothing: what was committed and not indexed still waits.
#
# SQLite: the messages with an id above ``search_state.upto`` wait. Writers are serialized by
# SQLite, so ids grow in commit order; a trigger (``messages_search_upto``) lowers the mark
# when the newest messages are deleted, so that a reused id is never taken for indexed.
#
# PostgreSQL: writers commit in any order, so an append queues its messages instead: a row
# (session, first seq, last seq) of ``search_waiting`` (no foreign key, no index but its key:
# one small insert). A batch takes the oldest queue rows ``FOR UPDATE SKIP LOCKED`` and deletes
# them with writing their index rows: workers sharing a database never index a message twice,
# nor wait for each other. The batch commits without waiting for the disk: a crash that loses
# it loses its deletes too, so the messages wait again. A queue row whose messages were deleted
# is dropped.

SEARCH_BATCH = 64
"""Messages that wait for the index before an append indexes them (SQLite)."""
POSTGRES_BATCH = 32
"""Appends between two batches (PostgreSQL): the append whose queue row's id is a multiple of
it starts one (ids are shared by every worker of the database)."""
_TAKE = 64
"""Queue rows (appends) a PostgreSQL batch takes per statement."""

_BEHIND = "SELECT coalesce((SELECT max(id) FROM messages), 0) - upto FROM search_state"
_BEHIND_INSERTED = "SELECT last_insert_rowid() - upto FROM search_state"
"""Right after messages were inserted: the newest is the connection's last row (an append reads
nothing of the messages table)."""
_WAITING = (
    "SELECT m.id, m.session_id, m.seq, s.root_id, m.content FROM messages m "
    "JOIN sessions s ON s.id = m.session_id WHERE m.id > ? ORDER BY m.id LIMIT 500"
)
_QUEUED = "SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM search_waiting"
_QUEUED_MESSAGES = (
    "SELECT m.session_id, m.seq, s.root_id, m.content FROM search_waiting w JOIN messages m "
    "ON m.session_id = w.session_id AND m.seq BETWEEN w.first_seq AND w.last_seq "
    "JOIN sessions s ON s.id = m.session_id"
)
_TAKE_QUEUED = (
    "WITH taken AS (DELETE FROM search_waiting WHERE id = ANY(ARRAY(SELECT id FROM "
    f"search_waiting ORDER BY id LIMIT {_TAKE} FOR UPDATE SKIP LOCKED)) RETURNING session_id, "
    "first_seq, last_seq) SELECT t.session_id, m.seq, s.root_id, m.content FROM taken t "
    "LEFT JOIN messages m ON m.session_id = t.session_id "
    "AND m.seq BETWEEN t.first_seq AND t.last_seq LEFT JOIN sessions s ON s.id = m.session_id"
)
"""A PostgreSQL batch's share of the queue, deleted, with its messages (a row with no message
for a queue row whose messages are gone)."""


def _queue(db: Db, rows: Sequence[IndexRow]) -> bool:
    """Queue the messages of ``rows`` (PostgreSQL): a row per run of consecutive seqs of a
    session (an append: one); True when a batch is due."""
    runs: list[list[Any]] = []
    for session_id, seq, _content in rows:
        if runs and runs[-1][0] == session_id and runs[-1][2] == seq - 1:
            runs[-1][2] = seq
        else:
            runs.append([session_id, seq, seq])
    if not runs:
        return False
    marks = ", ".join(["(?, ?, ?)"] * len(runs))
    ids = db.all(
        f"INSERT INTO search_waiting (session_id, first_seq, last_seq) VALUES {marks} RETURNING id",
        [value for run in runs for value in run],
    )
    return any(int(row[0]) % POSTGRES_BATCH == 0 for row in ids)


def behind(db: Db, *, inserted: bool = False) -> int:
    """How many messages wait for the index (SQLite: how many message ids are above its
    mark); ``inserted``: called right after inserting messages."""
    if dialect_of(db).queued:
        row = db.one(_QUEUED)
    else:
        row = db.one(_BEHIND_INSERTED if inserted else _BEHIND)
    return int(row[0]) if row is not None else 0


def catch_up(db: Db, *, rounds: int | None = None) -> int:
    """Index the messages that wait (in the caller's write transaction): all of them, or
    ``rounds`` times a share (SQLite: 500 messages; PostgreSQL: :data:`_TAKE` appends, none
    another worker is taking). How many were taken (a queue row whose messages are gone
    counts as one)."""
    dialect = dialect_of(db)
    if dialect.queued:
        return _catch_up_queue(db, rounds)
    row = db.one("SELECT upto FROM search_state")
    upto = int(row[0]) if row is not None else 0
    count = 0
    while (rounds is None or rounds > 0) and (rows := db.all(_WAITING, [upto])):
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
        rounds = None if rounds is None else rounds - 1
    db.run("UPDATE search_state SET upto = ?", [upto])
    return count


def _catch_up_queue(db: Db, rounds: int | None) -> int:
    # Derived data: a crash that loses this commit loses the queue rows' deletes with it.
    db.run("SET LOCAL synchronous_commit = off")
    count = 0
    while (rounds is None or rounds > 0) and (rows := db.all(_TAKE_QUEUED)):
        params: list[IndexParams] = []
        for session_id, seq, root_id, content in rows:
            if seq is not None:  # (else its messages were deleted)
                params += index_params(
                    POSTGRES_SEARCH, str(root_id), [(str(session_id), int(seq), content)]
                )
        for statement, values in insert_statements(POSTGRES_SEARCH, params):
            # (a message deleted and written again under its key may be indexed already)
            db.run(statement + " ON CONFLICT DO NOTHING", values)
        count += len(rows)
        rounds = None if rounds is None else rounds - 1
    return count


def _waiting_rows(db: Db, roots: Sequence[str] | None) -> Iterator[tuple[Any, ...]]:
    """(session_id, seq, root_id, content) of the messages that wait for the index (in the
    lineages of ``roots``, and maybe others: PostgreSQL's queue, shared by many conversations,
    is read for those alone)."""
    if dialect_of(db).queued:
        if roots is None:
            yield from db.all(_QUEUED_MESSAGES)
        else:
            yield from db.all(f"{_QUEUED_MESSAGES} WHERE s.root_id = ANY(?)", [list(roots)])
        return
    row = db.one("SELECT upto FROM search_state")
    upto = int(row[0]) if row is not None else 0
    while rows := db.all(_WAITING, [upto]):
        for row in rows:
            yield row[1:]
        upto = int(rows[-1][0])


def _waiting_matches(
    db: Db, terms: Sequence[Term], any_term: bool, roots: Sequence[str] | None
) -> list[Match]:
    """The messages not indexed yet that match (a read-only store cannot index them, nor a
    store what another worker is indexing), ranked after those the index found."""
    wanted = None if roots is None else set(roots)
    found: list[Match] = []
    for session_id, seq, root_id, content in _waiting_rows(db, roots):
        if wanted is not None and str(root_id) not in wanted:
            continue
        words = set(index_words(loads_content(content)))
        hits = (
            any(w.startswith(t.word) for w in words) if t.prefix else t.word in words for t in terms
        )
        if any(hits) if any_term else all(hits):
            found.append((str(session_id), int(seq), 0.0))
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
    found = db.one(dialect.exists)
    if found is None:
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
    waiting = _waiting_matches(db, terms, any_term, roots) if found[0] else []
    pool = max(4 * limit + 16, 32)
    while True:
        matches: list[Match] = [
            (str(row[0]), int(row[1]), float(row[2])) for row in db.all(statement, [*params, pool])
        ]
        matches += waiting
        hits = hits_of(db, matches, terms, limit, excerpt_chars, exclude_tools, redact)
        if len(hits) >= limit or len(matches) < pool or pool >= _MAX_POOL:
            return hits
        pool = min(pool * 4, _MAX_POOL)  # copies and excluded calls took places: look further


_ROOTS_IN = "SELECT root_id FROM lineages WHERE workspace = ?"
"""The conversations of a workspace: those whose head is in it (as ``sessions list``)."""
