"""One open transaction with every query of the SQL written once, composed of its concerns:
sessions and lineage (:mod:`._sql_lineage`), leases (:mod:`._sql_leases`), messages
(:mod:`._sql_messages`), transitions and compaction entries (:mod:`._sql_transitions`),
deletion (:mod:`._sql_deletion`), export and import (:mod:`._sql_transfer`).

The stores run each public call through one; the seed's compaction layer runs in one as its
``LineageTransaction``.
"""

from __future__ import annotations

from ._sql_deletion import SqlDeletion
from ._sql_transfer import SqlTransfer


class SqlTransaction(SqlTransfer, SqlDeletion):
    """Every query of one open transaction."""
