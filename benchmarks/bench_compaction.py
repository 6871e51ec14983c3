"""The compaction benchmarks, all in one run, beside LangChain. Prints markdown.

    python benchmarks/bench_compaction.py [--quick]

1. Per-turn loop cost at 500 / 4k / 10k / 50k messages of history: ``AgentLoop.run_turn``
   with an instant model, with and without a SQLite store, and the per-turn trigger check
   (ours and LangChain ``SummarizationMiddleware``'s). Target: a turn at 10k messages costs
   no more than 2x a turn at 500 (``bench_turns.py``).
2. Compaction overhead with the child saved, at the 85 %-of-200k point, for every strategy,
   with a zero-latency summarizer; LangChain's ``before_model`` beside it; the slowest
   strategy profiled. Target: <= 10 ms each (``bench_overhead.py``).
3. Tokens after compaction as the test server counts the next request, for every strategy,
   with and without the API's count, on text-heavy and opaque-cost histories; LangChain
   beside it. Targets: under the trigger, and the notice's figure within 10 % of the count
   (``bench_tokens_after.py``).

LangChain is an optional extra (``pip install -e ".[bench]"``): without it its cells say n/a.
The histories are built from the project's own transcript corpus (``tests/transcripts``) and
counted by its test server (``tests/fake_api``), without HTTP. ``--quick`` runs fewer turns
and repetitions (same tables); a full run takes about a minute and a half on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import bench_langchain
import bench_overhead
import bench_tokens_after
import bench_turns
from bench_support import verdict


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and repetitions")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    installed = (
        bench_langchain.version()
        if bench_langchain.available()
        else (bench_langchain.NOT_INSTALLED)
    )
    print(
        f"Python {sys.version.split()[0]}; {installed}; {'quick' if args.quick else 'full'} run\n"
    )

    print("## 1. Per-turn loop cost\n")
    turns_ok = bench_turns.report(bench_turns.run(args.quick))

    print("\n## 2. Compaction overhead with the child saved\n")
    overhead_ok = bench_overhead.run(args.quick)

    print("\n## 3. Tokens after compaction, as the API counts them\n")
    tokens_ok = bench_tokens_after.report(*bench_tokens_after.run())

    print("\n## Targets\n")
    print(f"- per-turn cost at 10k messages <= 2x at 500: {verdict(turns_ok)}")
    print(f"- compaction with the child saved <= 10 ms for every strategy: {verdict(overhead_ok)}")
    print(
        "- after compaction, under the trigger as the API counts it, the notice's figure "
        f"within 10 % of the count, a valid request: {verdict(tokens_ok)}"
    )
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
