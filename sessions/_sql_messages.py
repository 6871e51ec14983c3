"""Messages, for both SQL backends: reading a session's messages, appending after its last one
(left waiting for the search index, written in batches), and searching them (the queries
themselves are :mod:`sessions._sql_search`'s).

:class:`SqlMessages` is the transaction's part, :class:`MessageMethods` the store's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC
from typing import Any

from ._checks import as_new_message, dumps, require_int, require_str
from ._ids import SHORT_LENGTH, validate_session_ref
from ._sql_db import MESSAGE_COLUMNS, SqlStoreBase, dt
from ._sql_leases import LE_COLUMNS, SqlLeases, lease_from, require_lease
from ._sql_lineage import UPKEEP_COLUMNS
from ._sql_search import behind, catch_up, index_messages, search
from ._store_errors import SessionCompactedError, SessionNotFoundError, StoreError
from ._types import Lease, NewMessage, SearchHit, StoredMessage


def message_from(row: Sequence[Any]) -> StoredMessage:
    """A message row (:data:`MESSAGE_COLUMNS`) as a :class:`StoredMessage`."""
    return StoredMessage.model_construct(
        session_id=row[0],
        seq=row[1],
        role=row[2],
        content=json.loads(row[3]),
        token_estimate=row[4],
        usage=json.loads(row[5]) if row[5] is not None else None,
        metadata=json.loads(row[6]),
        created_at=dt(row[7]),
    )


class SqlMessages(SqlLeases):
    """The messages of one open transaction (the caller resolved, and so locked, the lineage)."""

    batch_waits = False
    """A batch of messages waits for the search index, since this transaction."""

    def messages(self, session_id: str) -> list[StoredMessage]:
        rows = self.db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [message_from(row) for row in rows]

    def insert_messages(
        self,
        session_id: str,
        first_seq: int,
        messages: Sequence[NewMessage],
        *,
        root_id: str,
        returning: bool = True,
    ) -> list[StoredMessage]:
        """Insert ``messages`` from position ``first_seq`` (and index them for search, in the
        lineage of ``root_id``); the stored values when ``returning`` (a transition's child
        needs none)."""
        stored: list[StoredMessage] = []
        rows = []
        now = self.now.astimezone(UTC)
        for offset, message in enumerate(messages):
            created = now if message.created_at is None else message.created_at.astimezone(UTC)
            rows.append(
                (
                    session_id,
                    first_seq + offset,
                    message.role,
                    dumps(message.content),
                    message.token_estimate,
                    dumps(message.usage) if message.usage is not None else None,
                    dumps(message.metadata) if message.metadata else "{}",
                    created,
                )
            )
            if not returning:
                continue
            stored.append(
                StoredMessage.model_construct(
                    session_id=session_id,
                    seq=first_seq + offset,
                    role=message.role,
                    content=message.content,
                    token_estimate=message.token_estimate,
                    usage=message.usage,
                    metadata=message.metadata,
                    created_at=created,
                )
            )
        if rows:
            self.db.many(
                f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            if index_messages(
                self.db,
                root_id,
                [(session_id, first_seq + n, m.content) for n, m in enumerate(messages)],
            ):
                self.batch_waits = True
        return stored

    def append(
        self, session_id: str, messages: Sequence[NewMessage], lease: Lease | None
    ) -> list[StoredMessage]:
        """Append after the last message; the count on the session row gives the next seq, so
        nothing here reads or counts the session's existing messages. One read gathers the
        session, its lease and its lineage row; then the inserts and two updates."""
        row = self.db.one(
            f"SELECT t.status, t.message_count, t.root_id, {LE_COLUMNS}, {UPKEEP_COLUMNS} "
            "FROM sessions t LEFT JOIN leases le ON le.session_id = t.id "
            "LEFT JOIN lineages l ON l.root_id = t.root_id "
            "LEFT JOIN sessions h ON h.id = l.head_id WHERE t.id = ?",
            (session_id,),
        )
        if row is None:  # deleted since it was resolved (only without row locks)
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.location}", ref=session_id
            )
        status, count, root_id = row[0], int(row[1]), str(row[2])
        if status == "compacted":
            head = self.newest_descendant(session_id)
            raise SessionCompactedError(
                f"session {session_id[:SHORT_LENGTH]} was compacted and continues in "
                f"{head.id[:SHORT_LENGTH]}; append there instead",
                session_id=session_id,
                continue_in=head.id,
            )
        held = lease_from(row[3:8]) if row[3] is not None else None
        self.check_lease(session_id, held, lease or self.book.get(session_id))
        if not messages:
            return []
        stored = self.insert_messages(session_id, count, messages, root_id=root_id)
        self.db.run(
            "UPDATE sessions SET message_count = ?, updated_at = ? WHERE id = ?",
            (count + len(messages), self.now, session_id),
        )
        self.upkeep(root_id, session_id, state=row[8:] if row[8] is not None else None)
        return stored


class MessageMethods(SqlStoreBase[SqlMessages]):
    """The store's calls on messages."""

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[NewMessage | Mapping[str, Any]],
        *,
        lease: Lease | None = None,
    ) -> list[StoredMessage]:
        """Append ``messages`` after the session's last one, in ONE short transaction: a turn's
        messages appended in one call cost one durable commit (one WAL flush), and are stored
        all or none.

        The cost does not depend on the session's length. :class:`SessionCompactedError` (naming
        the session to continue instead) if a child already continues the session;
        :class:`SessionLeasedError` if another writer's lease on it is live. A handle that
        acquired the session's lease writes under it when ``lease`` is not given.
        """
        validate_session_ref(session_id)
        require_lease(lease)
        checked = [as_new_message(message) for message in messages]
        for message in checked:  # serialize before taking the write lock
            dumps(message.metadata)
        with self._transaction(write=True) as tx:
            stored = tx.append(tx.resolve(session_id), checked, lease)
        if tx.batch_waits:
            self._index_waiting()
        return stored

    def _index_waiting(self) -> None:
        """Index the messages that wait for the search index (a store: in the background)."""
        with self._transaction(write=True) as tx:
            catch_up(tx.db)

    def get_messages(self, session_id: str) -> list[StoredMessage]:
        """All messages of the session, in order."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.messages(tx.resolve(session_id))

    def search_messages(
        self,
        query: str,
        *,
        session_id: str | None = None,
        workspace: str | None = None,
        limit: int = 10,
        excerpt_chars: int = 300,
        any_term: bool = False,
        exclude_tools: Collection[str] = (),
        redact: Callable[[str], str] | None = None,
    ) -> list[SearchHit]:
        """Full-text search of the stored messages, best match first, each as an excerpt.

        Scope: the whole lineage of ``session_id`` (every session of its conversation, the
        compacted ones included); without it, the conversations whose head is in
        ``workspace``; without either, every conversation. A message matches when it holds
        every word of ``query`` (``any_term``: any of them); ``word*`` matches a prefix.
        Text blocks, tool calls (name and input) and tool results are searched; a message
        copied into a later session is shown once. ``exclude_tools`` hides the calls of these
        tools and their results; ``redact`` is applied to a matching text before the excerpt is
        cut from it. :class:`SearchQueryError` if ``query`` holds no word.
        """
        require_str("query", query)
        require_int("limit", limit, minimum=1)
        require_int("excerpt_chars", excerpt_chars, minimum=20)
        if session_id is not None:
            validate_session_ref(session_id)
        if not getattr(self, "read_only", False):
            # What waits for the index (it is written in batches) is indexed first.
            with self._transaction(write=False) as tx:
                late = behind(tx.db)
            if late:
                # Refused (busy, the disk full, a message deleted meanwhile): what waits is
                # matched where it waits, in Python, as what another worker is indexing.
                with contextlib.suppress(StoreError), self._transaction(write=True) as tx:
                    catch_up(tx.db)
        with self._transaction(write=False) as tx:
            root_id = tx.root(tx.resolve(session_id)) if session_id is not None else None
            return search(
                tx.db,
                self.location,
                query,
                root_id=root_id,
                workspace=workspace,
                limit=limit,
                excerpt_chars=excerpt_chars,
                any_term=any_term,
                exclude_tools=frozenset(exclude_tools),
                redact=redact,
            )
