"""Benchmark of the sessions store and the `agentloop sessions` commands; prints a table.

    python benchmarks/bench_sessions.py [--sessions 10000] [--runs 9]

Targets: append one message to a 10,000-message session vs a 100-message one, ratio
<= 1.5 and each <= 1 ms median; `agentloop sessions list` over 10,000 sessions <= 300 ms wall
(start-up included); newest descendant through a 10-generation lineage <= 100 ms;
`agentloop --help` <= 300 ms wall.

Commands run through the installed `agentloop` console script with the working tree first on
PYTHONPATH. Start-up is measured twice: with Python's bytecode cache (how an installed package
runs) and with PYTHONDONTWRITEBYTECODE=1 (every module of the working tree compiled each run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sessions import NewMessage, open_store, workspace_key  # noqa: E402

TEXT = "The parser now handles nested brackets; next I will run the tests. " * 15  # ~1 kB


def message(n: int) -> NewMessage:
    return NewMessage(
        role="user" if n % 2 == 0 else "assistant",
        content=[{"type": "text", "text": f"{n}: {TEXT}"}],
        token_estimate=250,
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def bench_append(directory: Path, runs: int) -> tuple[float, float]:
    with open_store(directory / "append.db") as store:
        small = store.create_session(model="m", workspace="/bench")
        large = store.create_session(model="m", workspace="/bench")
        store.append_messages(small.id, [message(n) for n in range(100)])
        for start in range(0, 10_000, 500):
            store.append_messages(large.id, [message(n) for n in range(start, start + 500)])
        small_times: list[float] = []
        large_times: list[float] = []
        for n in range(runs):
            # Interleaved so that drift in the machine's load hits both alike.
            one = [message(n)]
            small_times.append(timed(lambda: store.append_messages(small.id, one)))  # noqa: B023
            large_times.append(timed(lambda: store.append_messages(large.id, one)))  # noqa: B023
    return median_ms(small_times), median_ms(large_times)


def build_big_store(path: Path, workspace: str, sessions: int) -> str:
    """``sessions`` sessions in ``workspace`` (the last 10 a compaction chain); returns the root."""
    with open_store(path) as store:
        for n in range(sessions - 10):
            session = store.create_session(
                model="claude-sonnet-4-5", workspace=workspace, title=f"task {n}"
            )
            if n % 50 == 0:
                store.append_messages(session.id, [message(0), message(1)])
        root = store.create_session(model="claude-sonnet-4-5", workspace=workspace, title="long")
        store.append_messages(root.id, [message(n) for n in range(40)])
        current = root
        for _ in range(9):
            current = store.transition(
                current.id, messages=[message(0), message(1)], strategy="summarize", summary="s"
            )
    return root.id


def bench_descendant(path: Path, root_id: str, runs: int) -> float:
    with open_store(path) as store:
        assert len(store.lineage(root_id)) == 10
        samples = [timed(lambda: store.newest_descendant(root_id)) for _ in range(runs)]
    return median_ms(samples)


def bench_command(argv: list[str], *, cwd: Path, env: dict[str, str], runs: int) -> float:
    def once() -> None:
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
        if result.returncode != 0:
            raise SystemExit(f"{argv} failed: {result.stderr.decode()}")

    once()  # warm the file cache (and the bytecode cache when allowed)
    return median_ms([timed(once) for _ in range(runs)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9, help="runs per command timing")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "agentloop"
    rows: list[tuple[str, str, str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as temporary:
        directory = Path(temporary)
        small, large = bench_append(directory, 301)
        ratio = large / small
        rows.append(
            ("append 1 msg, 100-msg session (median)", f"{small:.3f} ms", "<= 1 ms", small <= 1)
        )
        rows.append(
            ("append 1 msg, 10,000-msg session (median)", f"{large:.3f} ms", "<= 1 ms", large <= 1)
        )
        rows.append(("  ratio 10,000 / 100", f"{ratio:.2f}", "<= 1.5", ratio <= 1.5))

        workspace_dir = directory / "workspace"
        workspace_dir.mkdir()
        home = directory / "home"
        started = time.perf_counter()
        root_id = build_big_store(home / "sessions.db", workspace_key(workspace_dir), args.sessions)
        build_seconds = time.perf_counter() - started
        descendant = bench_descendant(home / "sessions.db", root_id, 101)
        rows.append(
            (
                "newest descendant, 10 generations (median)",
                f"{descendant:.3f} ms",
                "<= 100 ms",
                descendant <= 100,
            )
        )

        base = dict(os.environ, AGENTLOOP_HOME=str(home), PYTHONPATH=str(REPO))
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        nocache = dict(base, PYTHONDONTWRITEBYTECODE="1")
        commands = [
            ("agentloop --help", [str(script), "--help"]),
            (
                f"agentloop sessions list ({args.sessions:,} sessions)",
                [str(script), "sessions", "list"],
            ),
            (
                "agentloop sessions list --all --json",
                [str(script), "sessions", "list", "--all", "--json"],
            ),
        ]
        for label, argv in commands:
            for mode, env in (("bytecode cache", base), ("no bytecode cache", nocache)):
                ms = bench_command(argv, cwd=workspace_dir, env=env, runs=args.runs)
                rows.append((f"{label}, {mode}", f"{ms:.0f} ms", "<= 300 ms", ms <= 300))
        python_ms = bench_command(
            [sys.executable, "-c", "pass"], cwd=workspace_dir, env=base, runs=args.runs
        )
        rows.append(("  (reference: bare python start-up)", f"{python_ms:.0f} ms", "", True))

    width = max(len(row[0]) for row in rows)
    print(f"{'measure'.ljust(width)}  {'measured':>11}  {'target':>9}  ok")
    print("-" * (width + 30))
    for label, value, target, good in rows:
        verdict = ("yes" if good else "NO") if target else ""
        print(f"{label.ljust(width)}  {value:>11}  {target:>9}  {verdict}")
    print(
        f"\n(store of {args.sessions:,} sessions built in {build_seconds:.1f} s; "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
