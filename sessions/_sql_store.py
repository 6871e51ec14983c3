"""The :class:`SessionStore` methods, written once for both SQL backends, composed of their
concerns: sessions and lineage (:mod:`._sql_lineage`), messages and search
(:mod:`._sql_messages`), transitions and compactions (:mod:`._sql_transitions`), leases
(:mod:`._sql_leases`), deletion (:mod:`._sql_deletion`), export and import
(:mod:`._sql_transfer`), listing (:mod:`._sql_listing`).

A backend (:class:`~sessions.SqliteSessionStore`, :class:`~sessions.PostgresSessionStore`)
provides :meth:`SqlSessionStore._transaction`: one transaction on its connection, seen as a
:class:`~sessions._sql_transaction.SqlTransaction`. Every public call is one transaction:
arguments are checked first (a bad call never waits for a lock), a write is committed, and so
durable, before the call returns.
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Self

from ._sql_deletion import DeletionMethods
from ._sql_leases import LeaseMethods
from ._sql_lineage import LineageMethods
from ._sql_listing import ListingMethods
from ._sql_messages import MessageMethods
from ._sql_transaction import SqlTransaction
from ._sql_transfer import TransferMethods
from ._sql_transitions import TransitionMethods


class SqlSessionStore(
    LineageMethods,
    ListingMethods,
    MessageMethods,
    TransitionMethods,
    LeaseMethods,
    DeletionMethods,
    TransferMethods,
):
    """What both SQL backends share: every :class:`SessionStore` method."""

    @abc.abstractmethod
    def _transaction(
        self, *, write: bool, lease: bool = False
    ) -> AbstractContextManager[SqlTransaction]:
        """One transaction of the backend (a write transaction holds the write lock). ``lease``:
        a write of leases only, which need not wait for a check of the whole store."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection(s); further calls fail."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
