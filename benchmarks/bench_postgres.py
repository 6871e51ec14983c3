"""Benchmark of the session store on SQLite beside PostgreSQL, in one run; prints a table.

    python benchmarks/bench_postgres.py [--url postgresql://postgres@127.0.0.1:5432/test]
        [--turns 1000] [--sessions 100000]

Targets (PostgreSQL on the local server): append <= 2 ms median; `sessions list`
(list_conversations, 50 rows) <= 300 ms at 100,000 sessions; newest descendant through 50
generations <= 10 ms; 8 workers x N turns on distinct sessions >= 5x one worker's throughput.
And list_conversations <= 150 ms at 10,000 sessions on SQLite. A turn is two appends
(the user's message, then the reply), each its own durable commit. PostgreSQL runs in a fresh
schema, dropped at the end; SQLite in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sessions import (  # noqa: E402
    LineageExport,
    NewMessage,
    Session,
    SessionStore,
    StoredMessage,
    new_session_id,
    open_store,
)

TEXT = "The parser now handles nested brackets; next I will run the tests. " * 15  # ~1 kB
FORK = multiprocessing.get_context("fork")
Row = tuple[str, str, str, str, bool]


def message(n: int) -> NewMessage:
    return NewMessage(
        role="user" if n % 2 == 0 else "assistant",
        content=[{"type": "text", "text": f"{n}: {TEXT}"}],
        token_estimate=250,
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def median_p99(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


# ------------------------------------------------------------------ measures


def bench_append(store: SessionStore, runs: int) -> dict[str, tuple[float, float]]:
    small = store.create_session(model="m", workspace="/bench")
    large = store.create_session(model="m", workspace="/bench")
    store.append_messages(small.id, [message(n) for n in range(100)])
    for start in range(0, 10_000, 500):
        store.append_messages(large.id, [message(n) for n in range(start, start + 500)])
    samples: dict[str, list[float]] = {"100": [], "10,000": []}
    for n in range(runs):  # interleaved: drift in the machine's load hits both alike
        one = [message(n)]
        samples["100"].append(timed(lambda: store.append_messages(small.id, one)))  # noqa: B023
        samples["10,000"].append(timed(lambda: store.append_messages(large.id, one)))  # noqa: B023
    return {size: median_p99(values) for size, values in samples.items()}


def bench_async_append(store: SessionStore, runs: int) -> tuple[float, float] | None:
    """One-message appends awaited from asyncio: PostgreSQL's ``arun`` (the async connection,
    as the async loop uses it); None for a store without one (the loop uses a thread)."""
    arun = getattr(store, "arun", None)
    if arun is None:
        return None
    session = store.create_session(model="m", workspace="/bench")

    async def appends() -> list[float]:
        samples = []
        for n in range(runs):
            start = time.perf_counter()
            await arun(store.append_messages, session.id, [message(n)])
            samples.append(time.perf_counter() - start)
        return samples

    return median_p99(asyncio.run(appends()))


def bench_transitions(store: SessionStore, count: int) -> float:
    session = store.create_session(model="m", workspace="/bench")
    store.append_messages(session.id, [message(n) for n in range(20)])
    kept = [message(0), message(1)]
    head = session.id
    start = time.perf_counter()
    for _ in range(count):
        head = store.transition(head, messages=kept, strategy="summarize", summary="s").id
    return count / (time.perf_counter() - start)


def bench_lineage(store: SessionStore, runs: int) -> tuple[float, float]:
    root = store.create_session(model="m", workspace="/bench")
    store.append_messages(root.id, [message(0), message(1)])
    head = root.id
    chain = [root.id]
    for _ in range(49):
        head = store.transition(head, messages=[message(0), message(1)], strategy="x").id
        chain.append(head)
    middle = chain[25]
    assert store.newest_descendant(root.id).id == head == store.newest_descendant(middle).id
    from_root = [timed(lambda: store.newest_descendant(root.id)) for _ in range(runs)]
    from_middle = [timed(lambda: store.newest_descendant(middle)) for _ in range(runs)]
    return statistics.median(from_root), statistics.median(from_middle)


def worker(location: str, turns: int, start: Any, results: Any) -> None:
    with open_store(location, busy_timeout=120) as store:
        session = store.create_session(model="m", workspace="/bench")
        start.wait()
        latencies = []
        for n in range(turns):
            began = time.perf_counter()
            store.append_messages(session.id, [message(2 * n)])
            store.append_messages(session.id, [message(2 * n + 1)])
            latencies.append(time.perf_counter() - began)
        results.put(latencies)


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (zeros elsewhere)."""
    try:
        fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def bench_workers(location: str, workers: int, turns: int) -> tuple[float, float, float]:
    """Turns per second across ``workers`` processes, the p99 latency of one turn, and how
    many of the machine's CPUs were busy meanwhile (every process: workers, server, others)."""
    start = FORK.Barrier(workers + 1)
    results = FORK.Queue()
    children = [
        FORK.Process(target=worker, args=(location, turns, start, results)) for _ in range(workers)
    ]
    for child in children:
        child.start()
    start.wait()
    began = time.perf_counter()
    busy_before, total_before = cpu_times()
    latencies: list[float] = []
    for _ in children:
        latencies += results.get(timeout=3600)
    wall = time.perf_counter() - began
    busy_after, total_after = cpu_times()
    cpus = os.cpu_count() or 1
    busy = cpus * (busy_after - busy_before) / max(total_after - total_before, 1.0)
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"a worker failed with exit code {child.exitcode}")
    return workers * turns / wall, median_p99(latencies)[1], busy


def lineages(total: int) -> Iterator[LineageExport]:
    """``total`` sessions as lineages: most alone, one in ten a chain of 5 (4 compactions)."""
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    made = 0
    n = 0
    while made < total:
        size = 5 if n % 10 == 0 else 1
        size = min(size, total - made)
        sessions: list[Session] = []
        messages: dict[str, list[StoredMessage]] = {}
        for depth in range(size):
            moment += timedelta(seconds=1)
            sid = new_session_id(moment)
            sessions.append(
                Session(
                    id=sid,
                    parent_id=sessions[-1].id if sessions else None,
                    created_at=moment,
                    updated_at=moment,
                    model="claude-sonnet-4-5",
                    title=f"task {n}",
                    workspace=f"/work/project{n % 20}",
                    status="compacted" if depth < size - 1 else "active",
                    message_count=2 if n % 50 == 0 else 0,
                )
            )
            messages[sid] = [
                StoredMessage(
                    session_id=sid,
                    seq=k,
                    created_at=moment,
                    **message(k).model_dump(exclude={"created_at"}),
                )
                for k in range(sessions[-1].message_count)
            ]
        yield LineageExport(
            root_id=sessions[0].id, sessions=sessions, messages=messages, compactions=[]
        )
        made += size
        n += 1


def build(store: SessionStore, total: int) -> float:
    """Fill ``store`` with ``total`` sessions through the copy path; its seconds."""
    started = time.perf_counter()
    batch: list[LineageExport] = []
    for data in lineages(total):
        batch.append(data)
        if len(batch) == 1000:
            store.import_lineages(batch)
            batch = []
    if batch:
        store.import_lineages(batch)
    return time.perf_counter() - started


def bench_list(store: SessionStore, runs: int) -> tuple[float, float]:
    everywhere = [timed(lambda: store.list_conversations(limit=50)) for _ in range(runs)]
    one = [
        timed(lambda: store.list_conversations(workspace="/work/project7", limit=50))
        for _ in range(runs)
    ]
    return statistics.median(everywhere), statistics.median(one)


# ------------------------------------------------------------------ the run


@contextmanager
def locations(url: str) -> Iterator[dict[str, str]]:
    schema = f"agentloop_bench_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="bench-store-") as directory:
        try:
            yield {
                "SQLite": str(Path(directory) / "sessions.db"),
                "PostgreSQL": f"{url}{'&' if '?' in url else '?'}schema={schema}",
            }
        finally:
            import psycopg
            from psycopg import sql

            with psycopg.connect(url, autocommit=True) as conn:
                query = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                conn.execute(query)


def fresh(location: str, suffix: str) -> str:
    if location.startswith("postgresql"):
        return location + suffix
    return location.replace("sessions.db", f"sessions{suffix.replace('_', '-')}.db")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("AGENTLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/test"),
    )
    parser.add_argument("--turns", type=int, default=1000, help="turns per worker")
    parser.add_argument("--sessions", type=int, default=100_000)
    args = parser.parse_args()
    results: dict[str, dict[str, str]] = {}
    verdicts: dict[str, dict[str, bool]] = {}
    notes: list[str] = []
    with locations(args.url) as where:
        for backend, location in where.items():
            got = results.setdefault(backend, {})
            ok = verdicts.setdefault(backend, {})
            with open_store(location) as store:
                appends = bench_append(store, 301)
                for size, (median, p99) in appends.items():
                    got[f"append 1 msg to a {size}-msg session, median"] = ms(median)
                    got[f"append 1 msg to a {size}-msg session, p99"] = ms(p99)
                    ok[f"append 1 msg to a {size}-msg session, median"] = median <= 0.002
                awaited = bench_async_append(store, 301)
                got["append from asyncio (arun), median / p99"] = (
                    "n/a (a worker thread)"
                    if awaited is None
                    else f"{ms(awaited[0])} / {ms(awaited[1])}"
                )
                got["transitions per second"] = f"{bench_transitions(store, 200):.0f}/s"
                root, middle = bench_lineage(store, 101)
                got["newest descendant, 50 generations (root)"] = ms(root)
                got["newest descendant, 50 generations (middle)"] = ms(middle)
                ok["newest descendant, 50 generations (root)"] = root <= 0.010
                ok["newest descendant, 50 generations (middle)"] = middle <= 0.010
            one, one_p99, one_busy = bench_workers(fresh(location, "_w1"), 1, args.turns)
            eight, eight_p99, eight_busy = bench_workers(fresh(location, "_w8"), 8, args.turns)
            got[f"1 worker x {args.turns} turns"] = f"{one:.0f} turns/s"
            got[f"8 workers x {args.turns} turns"] = f"{eight:.0f} turns/s"
            got["  8 workers / 1 worker"] = f"{eight / one:.1f}x"
            ok["  8 workers / 1 worker"] = eight / one >= 5
            got["  p99 turn, 1 worker / 8 workers"] = f"{ms(one_p99)} / {ms(eight_p99)}"
            got["  CPUs busy, 1 worker / 8 workers"] = f"{one_busy:.1f} / {eight_busy:.1f}"
            for total in (10_000, args.sessions):
                with open_store(fresh(location, f"_list{total}")) as store:
                    seconds = build(store, total)
                    everywhere, one_workspace = bench_list(store, 21)
                    notes.append(f"{backend}: {total:,} sessions imported in {seconds:.1f} s")
                label = f"list_conversations(50), {total:,} sessions"
                got[label] = ms(everywhere)
                got[f"  ... in one workspace of 20, {total:,}"] = ms(one_workspace)
                limit = 0.150 if total <= 10_000 else 0.300
                ok[label] = everywhere <= limit
    labels = list(results["SQLite"])
    width = max(len(label) for label in labels)
    print(f"{'measure'.ljust(width)}  {'SQLite':>22}  {'PostgreSQL':>22}")
    print("-" * (width + 48))
    for label in labels:
        cells = []
        for backend in ("SQLite", "PostgreSQL"):
            value = results[backend][label]
            verdict = verdicts[backend].get(label)
            mark = "" if verdict is None else (" ok" if verdict else " NO")
            cells.append(f"{value}{mark}".rjust(22))
        print(f"{label.ljust(width)}  {'  '.join(cells)}")
    print()
    for note in notes:
        print(f"({note})")
    print(f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; ok/NO: a target met or not)")


if __name__ == "__main__":
    main()
