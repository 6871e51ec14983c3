"""The check of a whole SQLite store before a process writes to it, on a
store of about 1 GB: opening it is not slowed (the check runs in the background), how long the
check takes, and what the first write of a conversation waits for it.

    python benchmarks/bench_store_check.py [--gigabytes 1.0] [--path /tmp/big.db]

Builds the store once (bulk SQL into the real schema: about 20-60 s), keeps it for later runs.
Prints one table; the page cache is whatever the machine has (run twice for a warm figure).
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from sessions import NewMessage, SqliteSessionStore
from sessions._sqlite_check import IntegrityCheck

ROW = "x" * 1_000


def build(path: Path, gigabytes: float) -> None:
    if path.exists() and path.stat().st_size >= gigabytes * 0.9e9:
        return
    path.unlink(missing_ok=True)
    with SqliteSessionStore(path) as store:
        session = store.create_session(model="m", workspace="/bench")
    rows = int(gigabytes * 1e9 / 1_100)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    content = f'[{{"type": "text", "text": "{ROW}"}}]'
    db.executemany(
        "INSERT INTO messages (session_id, seq, role, content, metadata, created_at) "
        "VALUES (?, ?, 'user', ?, '{}', '2026-01-01T00:00:00.000000Z')",
        ((session.id, n, content) for n in range(rows)),
    )
    db.execute("UPDATE sessions SET message_count = ? WHERE id = ?", (rows, session.id))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--path", type=Path, default=Path("/tmp/agentloop-bench-check.db"))
    args = parser.parse_args()
    build(args.path, args.gigabytes)

    started = time.perf_counter()
    store = SqliteSessionStore(args.path)
    opened = time.perf_counter() - started
    (session,) = store.list_sessions(limit=1)
    started = time.perf_counter()
    store.append_messages(
        session.id, [NewMessage(role="user", content=[{"type": "text", "text": "one more"}])]
    )
    first_write = time.perf_counter() - started
    started = time.perf_counter()
    store.append_messages(
        session.id, [NewMessage(role="user", content=[{"type": "text", "text": "and another"}])]
    )
    next_write = time.perf_counter() - started
    store.close()
    check = IntegrityCheck(args.path, 5.0)
    started = time.perf_counter()
    check.require_sound(wait=True)
    alone = time.perf_counter() - started
    check.close()

    size = args.path.stat().st_size / 1e9
    print(f"store: {args.path} ({size:.2f} GB)")
    print(f"{'measure':<48} {'seconds':>8}")
    print(f"{'open for writing (the check starts, not awaited)':<48} {opened:>8.3f}")
    print(f"{'first append after open (waits for the verdict)':<48} {first_write:>8.3f}")
    print(f"{'next append':<48} {next_write:>8.3f}")
    print(f"{'the check alone (PRAGMA quick_check)':<48} {alone:>8.3f}")


if __name__ == "__main__":
    main()
