"""Moving a store: :func:`copy_store` copies every lineage from one store to another, in either
direction between SQLite and PostgreSQL, idempotently, and checks what arrived."""

from __future__ import annotations

from ._ids import SHORT_LENGTH
from ._protocol import SessionStore
from ._store_errors import StoreError
from ._types import CopyReport, LineageExport

BATCH = 200
"""Lineages per transaction on the target (and per read of the source)."""


def copy_store(source: SessionStore, target: SessionStore, *, batch: int = BATCH) -> CopyReport:
    """Copy every lineage of ``source`` into ``target`` (ids, times, statuses, messages and
    compaction history as they are) and return the counts copied and already present.

    Idempotent: what ``target`` already holds is kept, so copying again copies nothing, and a
    copy that was interrupted resumes where it stopped. Each batch of lineages is one
    transaction on ``target``, read back and compared with ``source`` (sessions, messages
    per session, compactions): a difference raises a one-line :class:`StoreError`. Leases are
    not copied (they belong to running processes). A session that ``target`` holds with
    another parent, or with more messages, is refused (one line; that batch is not written).
    """
    if source is target:
        raise StoreError("cannot copy a store onto itself")
    report = CopyReport()
    after: str | None = None
    while page := source.export_lineages(after=after, limit=batch):
        report = report + target.import_lineages(page)
        _verify(page, target.export_lineages(after=after, upto=page[-1].root_id, limit=len(page)))
        after = page[-1].root_id
    return report


def _verify(sent: list[LineageExport], arrived: list[LineageExport]) -> None:
    """Everything sent is in the target: the same sessions, message counts, compactions."""
    found = {data.root_id: data for data in arrived}
    for data in sent:
        there = found.get(data.root_id)
        short = data.root_id[:SHORT_LENGTH]
        if there is None:
            raise StoreError(f"copy check failed: conversation {short} is missing in the target")
        counts = {s.id: len(there.messages.get(s.id, [])) for s in there.sessions}
        for session in data.sessions:
            expected = len(data.messages.get(session.id, []))
            if counts.get(session.id) != expected:
                raise StoreError(
                    f"copy check failed: session {session.id[:SHORT_LENGTH]} has "
                    f"{counts.get(session.id, 0)} messages in the target, {expected} in the source"
                )
        if len(there.compactions) < len(data.compactions):
            raise StoreError(
                f"copy check failed: conversation {short} has {len(there.compactions)} "
                f"compactions in the target, {len(data.compactions)} in the source"
            )
