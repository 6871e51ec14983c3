"""What a session is billed with the prompt cache (issue 17): a table.

The transcript corpus (``tests/transcripts``: a coding session, a session with steering
messages, one with errors buried in long tool outputs) is replayed through ``AgentLoop`` on the
real ``anthropic`` SDK against the test server, which bills like the Messages API's prompt cache
(reads 0.1x, 5-minute writes 1.25x, the 20-block lookback, a minimum cacheable length). Each
transcript runs three ways: no cache breakpoints at all, the system prompt alone marked (the
state before issue 17), and breakpoints that follow the conversation (this issue); once with a
window small enough for several compactions, once with a 200k window (no compaction).

Columns: requests made, compactions, summarizer calls per compaction, billed input as a
multiple of the same requests' uncached input (all requests, then the summary requests alone),
and dollars per session at Sonnet 4.6 prices ($3/MTok input, $3.75 write, $0.30 read,
$15 output). Run: ``python benchmarks/bench_cost.py [--size N] [--window N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bench_support  # noqa: F401  (puts the repository and tests/ on sys.path)
from fake_api import Bill, FakeAnthropicServer, billed_ratio
from support.replay import ReplayRun, replay, user_turns
from transcripts import Transcript, buried_errors_session, coding_session, steering_session

from agentloop import Usage
from agentloop._core.cache import CacheMode
from agentloop._core.pricing import bill

MODES: tuple[CacheMode, ...] = ("off", "system", "conversation")
LABELS = {"off": "no cache", "system": "system only", "conversation": "conversation"}


def summary_for(first: str) -> Callable[[dict[str, Any]], str]:
    """A fixed structured summary that keeps the first request (the replies are recorded too)."""

    def summary(_body: dict[str, Any]) -> str:
        return (
            f"## Goal\n{first}\n\n## Constraints and decisions\nsmall, tested edits\n\n"
            "## Progress\nthe work is under way; see the recent messages\n\n"
            "## Files read and modified\n- src/app/webhooks.py\n\n## Open todos\nnone\n\n"
            "## Errors and their state\nnone open\n\n## Next steps\ncontinue the task"
        )

    return summary


def usage_of(b: Bill) -> Usage:
    return Usage(
        input_tokens=b.input_tokens,
        output_tokens=b.output_tokens,
        cache_creation_input_tokens=b.cache_write_5m + b.cache_write_1h,
        cache_read_input_tokens=b.cache_read,
    )


@dataclass
class Row:
    transcript: str
    window: int
    mode: CacheMode
    run: ReplayRun

    @property
    def dollars(self) -> float:
        return sum(bill(usage_of(b), "claude-sonnet-4-6").dollars for b in self.run.bills)


def run_one(transcript: Transcript, window: int, mode: CacheMode) -> ReplayRun:
    first = str(user_turns(transcript.messages)[0][0]["text"])
    with FakeAnthropicServer() as server:
        run = replay(server, transcript, window=window, summary=summary_for(first), cache=mode)
        if server.violations:
            raise SystemExit(f"the test server saw broken requests: {server.violations[:3]}")
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", type=int, default=240, help="transcript length in messages (the long one: 2.5x)"
    )
    parser.add_argument("--window", type=int, default=60_000, help="the small window")
    args = parser.parse_args(argv)

    corpus = {
        "coding": coding_session(0, args.size),
        "steering": steering_session(1, args.size),
        "buried errors": buried_errors_session(2, args.size),
    }
    runs = [(name, t, window) for name, t in corpus.items() for window in (args.window, 200_000)]
    # A session long enough to compact in a 200k window (the replay Claude Code was billed on).
    runs.append(("coding (long)", coding_session(0, args.size * 5 // 2), 200_000))
    rows = [
        Row(name, window, mode, run_one(transcript, window, mode))
        for name, transcript, window in runs
        for mode in MODES
    ]

    header = (
        f"{'transcript':<14} {'window':>7} {'cache':<13} {'requests':>8} {'compactions':>11} "
        f"{'calls/compaction':>16} {'billed/uncached':>15} {'summaries':>9} {'$/session':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        run = row.run
        calls = [c for c in run.summary_calls if c > 0]
        per = f"{statistics.mean(calls):.2f}" if calls else "-"
        summaries = f"{billed_ratio(run.summary_bills):.2f}x" if run.summary_bills else "-"
        print(
            f"{row.transcript:<14} {row.window:>7,} {LABELS[row.mode]:<13} {len(run.bills):>8} "
            f"{len(run.transitions):>11} {per:>16} {run.ratio:>14.3f}x {summaries:>9} "
            f"{row.dollars:>9.3f}"
        )
    print()
    print(
        "billed/uncached: what the input cost (reads 0.1x, writes 1.25x) over what the same "
        "requests cost with no cache at all; summaries: the same, for the summary requests alone."
    )
    print(
        "LangChain's SummarizationMiddleware is not replayed for its bill here (see "
        "bench_integrations.py for what it keeps): not measured. Its summary request renders "
        "the messages into a new prompt, so it can share no prefix with the conversation."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
