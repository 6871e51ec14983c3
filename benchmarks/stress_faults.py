"""The fault figures at full count: ``kill -9`` of the console script at
random points on both backends, and second writers on one session. The fault suite
(``tests/test_faults_*.py``) runs a sample of the same machinery; this script runs the numbers.

    python benchmarks/stress_faults.py [--sqlite-runs 120] [--postgres-runs 40]
        [--chains 2] [--seed 10] [--writer-rounds 30] [--writers 4] [--fork]

Kill runs (:mod:`fault_kill_chains`): ``--chains`` chains side by side per backend, each run
killed at a seeded random point (six kinds, two of them aimed at compactions); after every run
the store's integrity, the API's rules on every stored session, every printed reply stored, no
orphaned command; after every chain the killed tool calls repaired and one conversation; the
fake API saw no request that breaks the API's rules ("requests cut short": a run killed while
it sent a request, which never reached the API as a whole one). Second writers
(``test_faults_concurrency``): ``--writers`` processes of ``--continue`` released together on
one session, ``--writer-rounds`` times: one holds it, every other is refused in one line.

Each run is an exec of the console script (``--fork``: forked from a zygote that imported it
once, as most of the suite's runs are: the same figures in a fraction of the CPU).
Prints one table; exits 1 if any invariant failed (the failure is printed). Needs the
PostgreSQL server of the tests (``AGENTLOOP_TEST_POSTGRES``) for the PostgreSQL rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import support.store_contract as store_contract  # noqa: E402
from fake_api import FakeAnthropicServer  # noqa: E402
from support.kill_chains import KINDS, Backend, chains, run_chains  # noqa: E402
from support.processes import EXEC_ENV  # noqa: E402
from test_faults_concurrency import (  # noqa: E402
    Place,
    answer,
    test_one_writer_per_session_the_others_are_refused_in_one_line,
)


def kill_row(backend: Backend, runs: int, chain_count: int, seed: int) -> tuple[list[str], bool]:
    """One backend's kill runs: the table row, and whether every invariant held."""
    started = time.perf_counter()
    kills: dict[str, int] = {}
    aimed = 0
    violations = 0
    cut_short = 0
    failure = ""
    with tempfile.TemporaryDirectory(prefix=f"stress-kill-{backend}-") as root:
        try:
            with chains(Path(root), [backend] * chain_count, seed, forked=True) as made:
                try:
                    kills = run_chains(made, runs)
                finally:
                    aimed = sum(
                        n
                        for chain in made
                        for kind, n in chain.planned.items()
                        if "summary" in kind
                    )
                    violations = sum(len(chain.server.violations) for chain in made)
                    cut_short = sum(chain.server.abandoned for chain in made)
                    for chain in made:
                        for violation in chain.server.violations:
                            print(f"  {backend} chain {chain.number}: {violation}")
        except AssertionError:
            failure = traceback.format_exc(limit=3)
    if failure:
        print(f"{backend}: an invariant failed:\n{failure}", file=sys.stderr)
    killed = {kind: kills.get(f"killed {kind}", 0) for kind in KINDS}
    in_compaction = killed["summary-waiting"] + killed["summary-racing"]
    row = [
        backend,
        str(runs),
        *(str(killed[kind]) for kind in KINDS),
        str(sum(killed.values())),
        str(aimed),
        str(in_compaction),
        str(cut_short),
        str(violations),
        "FAILED" if failure else "ok",
        f"{time.perf_counter() - started:.0f}",
    ]
    return row, not failure and violations == 0


def writers_row(rounds: int, count: int) -> tuple[list[str], bool]:
    """``rounds`` times ``count`` processes on one session: the second writers refused."""
    started = time.perf_counter()
    failure = ""
    done = 0
    with tempfile.TemporaryDirectory(prefix="stress-writers-") as root:
        for number in range(rounds):
            place_root = Path(root, f"round{number}").resolve()
            place_root.mkdir()
            with FakeAnthropicServer(handler=answer) as server:
                place = Place(place_root, server)
                place.workspace.mkdir()
                try:
                    test_one_writer_per_session_the_others_are_refused_in_one_line(place, count)
                    assert server.violations == [], server.violations
                except AssertionError:
                    failure = traceback.format_exc(limit=3)
                    print(f"writers round {number}: failed:\n{failure}", file=sys.stderr)
                    break
            done += 1
    row = [
        f"{count} writers",
        str(rounds),
        str(done * (count - 1)),
        "FAILED" if failure else "ok",
        f"{time.perf_counter() - started:.0f}",
    ]
    return row, not failure


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [header, ["-" * width for width in widths], *rows]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sqlite-runs", type=int, default=120)
    parser.add_argument("--postgres-runs", type=int, default=40)
    parser.add_argument("--chains", type=int, default=2, help="chains side by side per backend")
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--writer-rounds", type=int, default=30)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument(
        "--fork",
        action="store_true",
        help="fork runs from a pre-imported zygote, as the suite does (default: exec each run)",
    )
    args = parser.parse_args()
    if not args.fork:
        os.environ[EXEC_ENV] = "1"

    ok = True
    kill_rows: list[list[str]] = []
    legs: list[tuple[Backend, int, int]] = [
        ("sqlite", args.sqlite_runs, args.seed),
        ("postgresql", args.postgres_runs, args.seed + 1),
    ]
    for backend, runs, seed in legs:
        if runs <= 0:
            continue
        if backend == "postgresql" and (reason := store_contract.postgres_unavailable()):
            print(f"postgresql: skipped: {reason}", file=sys.stderr)
            continue
        row, held = kill_row(backend, runs, args.chains, seed)
        kill_rows.append(row)
        ok = ok and held
    if kill_rows:
        total = [
            "total",
            *(str(sum(int(row[n]) for row in kill_rows)) for n in range(1, len(kill_rows[0]) - 2)),
            "ok" if all(row[-2] == "ok" for row in kill_rows) else "FAILED",
            str(sum(int(row[-1]) for row in kill_rows)),
        ]
        header = [
            "kill -9",
            "runs",
            *KINDS,
            "killed",
            "aimed at compaction",
            "killed in compaction",
            "requests cut short",
            "violations",
            "",
            "s",
        ]
        print(table(header, [*kill_rows, total]))
        print()
    if args.writer_rounds > 0:
        row, held = writers_row(args.writer_rounds, args.writers)
        ok = ok and held
        print(table(["second writers", "rounds", "refused", "", "s"], [row]))
    print(
        "\n(stream faults, hostile input, secrets, a full disk, leases: every case in the suite;"
        " hostile session ids: tests/test_sessions_ids.py; workspace races:"
        " tests/test_agent_security.py)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
