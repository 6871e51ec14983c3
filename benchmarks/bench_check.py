"""The per-turn check at a safe boundary, with and without a same-role pair.

    python benchmarks/bench_check.py [--quick]

``ConversationCompacter.should_compact`` after each turn's reply (with its usage) and the next
request, on the same history list grown turn by turn, at 500 / 4k / 10k / 50k messages. Two
histories: the corpus' coding session repeated (roles alternate), and the same with one pair of
consecutive user messages near its start (the library accepts such a pair and merges it, as
the API combines them). Target: flat in the number of messages, at most 10 µs at 50,000.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import bench_support
import bench_turns
from bench_support import Timing, print_table, verdict
from transcripts import coding_session

from agentloop import Message, TokenEstimator

SIZES = (500, 4_000, 10_000, 50_000)
TARGET_US = 10.0


def time_check(history: list[Message], estimator: TokenEstimator, repeat: int) -> Timing:
    """Milliseconds per ``should_compact`` call, a turn appended before each (the history ends
    with a reply: the first request opens the turns that follow)."""
    opening = Message.user("Next, the failing test.").with_tokens(8)
    return bench_turns.time_check([*history, opening], estimator, repeat, request_tokens=8)


def with_pair(history: list[Message]) -> list[Message]:
    """The history with a second user message right after its first one."""
    extra = Message.user("Also keep the old behaviour for callers.").with_tokens(9)
    return [history[0], extra, *history[1:]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer checks")
    args = parser.parse_args(argv)
    repeat = 300 if args.quick else 2_000
    print(f"Python {sys.version.split()[0]}; {repeat} checks per cell, median / p95\n")
    estimator = TokenEstimator()
    full, stops = bench_support.tiled_history(coding_session(5, 1_000), estimator, max(SIZES))
    assert full[0].role == "user"
    time_check(full[: stops[0]], estimator, repeat)  # warm-up: imports, caches, the CPU
    rows: list[list[str]] = []
    worst: dict[str, list[float]] = {"alternating": [], "one same-role pair": []}
    for size in SIZES:
        end = next(stop for stop in stops if stop >= size)
        history = full[:end]
        plain = time_check(history, estimator, repeat)
        paired = time_check(with_pair(history), estimator, repeat)
        worst["alternating"].append(plain.median * 1_000)
        worst["one same-role pair"].append(paired.median * 1_000)
        rows.append([f"{len(history):,}", us_cell(plain), us_cell(paired)])
    print_table(["messages", "should_compact, roles alternate", "with one same-role pair"], rows)
    print()
    ok = True
    for label, medians in worst.items():
        at_big = medians[-1]
        flat = medians[-1] / medians[0]
        hit = at_big <= TARGET_US
        ok = ok and hit
        print(
            f"- {label}: {at_big:.1f} µs at the largest size <= {TARGET_US:g} µs: "
            f"{verdict(hit)} (largest / smallest: {flat:.2f})"
        )
    return 0 if ok else 1


def us_cell(timing: Timing) -> str:
    return f"{timing.median * 1_000:.1f} / {timing.p95 * 1_000:.1f} µs"


if __name__ == "__main__":
    raise SystemExit(main())
