"""Leases (one writer per session), for both SQL backends: acquiring, renewing, releasing and
reading one, the check every write makes against them, and moving a lease to the child a
transition creates.

:class:`SqlLeases` is the transaction's part, :class:`LeaseMethods` the store's.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ._checks import require_str
from ._ids import SHORT_LENGTH, validate_session_ref
from ._sql_db import SqlStoreBase, dt
from ._sql_lineage import SqlLineage
from ._store_errors import SessionLeasedError
from ._types import Lease

LEASE_COLUMNS = "session_id, owner, token, expires_at, ttl"
"""A lease as :func:`lease_from` reads it (the table also has ``acquired_at``)."""
LE_COLUMNS = ", ".join(f"le.{c.strip()}" for c in LEASE_COLUMNS.split(","))


def lease_from(row: Sequence[Any]) -> Lease:
    """A row of :data:`LEASE_COLUMNS` as a :class:`Lease`."""
    return Lease.model_construct(
        session_id=row[0], owner=row[1], token=row[2], expires_at=dt(row[3]), ttl=float(row[4])
    )


def leased_error(session_id: str, holder: Lease) -> SessionLeasedError:
    until = holder.expires_at.strftime("%Y-%m-%d %H:%M:%S")
    return SessionLeasedError(
        f"session {session_id[:SHORT_LENGTH]} is in use by {holder.owner} "
        f"(its lease runs until {until} UTC unless renewed)",
        session_id=session_id,
        owner=holder.owner,
        expires_at=holder.expires_at,
    )


def require_lease(lease: object) -> None:
    if lease is not None and not isinstance(lease, Lease):
        raise TypeError(f"lease must be a Lease, not {type(lease).__name__}")


class SqlLeases(SqlLineage):
    """The leases of one open transaction (the caller resolved, and so locked, the lineage)."""

    def lease_row(self, session_id: str) -> Lease | None:
        """The session's lease as stored, live or expired."""
        row = self.db.one(f"SELECT {LEASE_COLUMNS} FROM leases WHERE session_id = ?", (session_id,))
        return lease_from(row) if row is not None else None

    def live_lease(self, session_id: str) -> Lease | None:
        held = self.lease_row(session_id)
        return held if held is not None and held.expires_at > self.now else None

    def check_lease(self, session_id: str, held: Lease | None, lease: Lease | None) -> None:
        """Refuse a write to ``session_id`` unless no live lease is held on it by another."""
        if held is None or (lease is not None and held.token == lease.token):
            return
        if held.expires_at <= self.now:
            return  # stale: its holder is gone
        raise leased_error(session_id, held)

    def acquire_lease(self, session_id: str, owner: str, ttl: float) -> Lease:
        """``session_id`` is resolved (its lineage locked): no other writer runs meanwhile."""
        self.place(session_id)  # still there after the lock (raises if it was deleted)
        held = self.lease_row(session_id)
        if held is not None and held.owner != owner and held.expires_at > self.now:
            raise leased_error(session_id, held)
        lease = Lease.model_construct(
            session_id=session_id,
            owner=owner,
            token=secrets.token_hex(16),
            expires_at=self.now + timedelta(seconds=ttl),
            ttl=ttl,
        )
        self.db.run("DELETE FROM leases WHERE session_id = ?", (session_id,))
        self.db.run(
            f"INSERT INTO leases ({LEASE_COLUMNS}, acquired_at) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, owner, lease.token, lease.expires_at, ttl, self.now),
        )
        self.on_commit.append(lambda: self.book.put(lease))
        return lease

    def renew_lease(self, lease: Lease) -> Lease:
        row = self.db.one(
            "UPDATE leases SET expires_at = ? WHERE token = ? RETURNING session_id, owner",
            (self.now + timedelta(seconds=lease.ttl), lease.token),
        )
        if row is None:
            held = self.lease_row(lease.session_id) if self.exists(lease.session_id) else None
            if held is not None and held.expires_at > self.now:
                raise leased_error(lease.session_id, held)
            raise SessionLeasedError(
                f"the lease on session {lease.session_id[:SHORT_LENGTH]} was lost "
                "(released, or taken over after it expired); acquire it again",
                session_id=lease.session_id,
            )
        renewed = Lease.model_construct(
            session_id=str(row[0]),
            owner=str(row[1]),
            token=lease.token,
            expires_at=self.now + timedelta(seconds=lease.ttl),
            ttl=lease.ttl,
        )
        self.on_commit.append(lambda: self.book.refresh(renewed))
        return renewed

    def release_lease(self, lease: Lease) -> None:
        self.db.run("DELETE FROM leases WHERE token = ?", (lease.token,))
        self.on_commit.append(lambda: self.book.forget(lease.token))

    def move_lease(self, lease: Lease, held: Lease | None, child_id: str) -> None:
        """A transition made under ``lease`` hands it to the child (same token, same expiry);
        the store handle's book follows once committed."""
        mine = held if held is not None and held.token == lease.token else lease
        self.db.run("DELETE FROM leases WHERE token = ?", (lease.token,))
        self.db.run(
            f"INSERT INTO leases ({LEASE_COLUMNS}, acquired_at) VALUES (?, ?, ?, ?, ?, ?)",
            (child_id, mine.owner, mine.token, mine.expires_at, mine.ttl, self.now),
        )
        token = lease.token
        self.on_commit.append(lambda: self.book.move(token, child_id))


class LeaseMethods(SqlStoreBase[SqlLeases]):
    """The store's calls on leases."""

    def acquire_lease(self, session_id: str, *, owner: str, ttl: float = 30.0) -> Lease:
        """Claim the session for ``owner`` (say who you are: ``default_lease_owner()`` gives
        ``"pid 1234 on host x"``) for ``ttl`` seconds; renew it well before it runs out.

        :class:`SessionLeasedError` (naming the holder) if another owner's lease is live. An
        expired lease (its holder crashed) is taken over; the same owner gets a fresh lease.
        Waits for a write in progress on the lineage, so what you read after acquiring is
        complete.
        """
        validate_session_ref(session_id)
        require_str("owner", owner)
        if not owner:
            raise ValueError("owner must describe the lease holder")
        _require_ttl(ttl)
        with self._transaction(write=True, lease=True) as tx:
            return tx.acquire_lease(tx.resolve(session_id), owner, float(ttl))

    def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now and return it as it stands: after a transition
        made with it, ``session_id`` is the child's. :class:`SessionLeasedError` if the lease
        was lost (released, or taken over after it expired)."""
        require_lease(lease)
        with self._transaction(write=True, lease=True) as tx:
            return tx.renew_lease(lease)

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up; nothing happens if it was already lost."""
        require_lease(lease)
        with self._transaction(write=True, lease=True) as tx:
            tx.release_lease(lease)

    def get_lease(self, session_id: str) -> Lease | None:
        """The live lease on the session, or None (none, or expired)."""
        validate_session_ref(session_id)
        with self._transaction(write=False) as tx:
            return tx.live_lease(tx.resolve(session_id))


def _require_ttl(ttl: object) -> None:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ValueError(f"ttl must be a number of seconds > 0, not {ttl!r}")
