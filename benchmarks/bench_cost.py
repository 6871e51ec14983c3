"""What a session is billed with the prompt cache: a table.

The transcript corpus (``tests/transcripts``: a coding session, a session with steering
messages, one with errors buried in long tool outputs) is replayed through ``AgentLoop`` on the
real ``anthropic`` SDK against the test server, which bills like the Messages API's prompt cache
(reads 0.1x, 5-minute writes 1.25x, the 20-block lookback, a minimum cacheable length). Each
transcript runs three ways: no cache breakpoints at all, the system prompt alone marked (as
agentloop did first), and breakpoints that follow the conversation (as it does now); once with a
window small enough for several compactions, once with a 200k window (no compaction).

Each runs on both paths: ``client`` (a model without on-demand compaction: agentloop writes
the summaries, continuing the cached conversation) and ``on-demand`` (the API writes them:
``compaction`` in the request); summaries are prepared in the background (the default).

Columns: requests made, compactions, summary requests per compaction, billed input as a
multiple of the same requests' uncached input (all requests by cache mode, then the summary
requests alone), and dollars per session at Sonnet 4.6 prices ($3/MTok input, $3.75 write,
$0.30 read, $15 output). Run: ``python benchmarks/bench_cost.py [--size N] [--window N]
[--paths client on-demand] [--quick]`` (``--quick``: the conversation mode only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bench_support  # puts the repository and tests/ on sys.path; print_table
from fake_api import Bill, FakeAnthropicServer, billed_ratio
from support.replay import PREPARE_AT, user_turns
from transcripts import Transcript, buried_errors_session, coding_session, steering_session
from trigger_trace import PATHS, Replayed, replay_traced

from agentloop import Usage
from agentloop._core.measuring.cache import CacheMode
from agentloop._core.measuring.pricing import bill

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


def dollars(bills: list[Bill]) -> float:
    return sum(bill(usage_of(b), "claude-sonnet-4-6").dollars for b in bills)


@dataclass
class Row:
    transcript: str
    path: str
    window: int
    runs: dict[CacheMode, Replayed]


def run_one(transcript: Transcript, window: int, mode: CacheMode, path: str) -> Replayed:
    first = str(user_turns(transcript.messages)[0][0]["text"])
    with FakeAnthropicServer() as server:
        return replay_traced(
            server,
            transcript,
            model_name=PATHS[path],
            window=window,
            summary=summary_for(first),
            strategy="auto",
            prepare_at=PREPARE_AT,
            cache=mode,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", type=int, default=240, help="transcript length in messages (the long one: 2.5x)"
    )
    parser.add_argument("--window", type=int, default=60_000, help="the small window")
    parser.add_argument(
        "--paths", nargs="+", choices=sorted(PATHS), default=["client", "on-demand"]
    )
    parser.add_argument("--quick", action="store_true", help="the conversation mode only")
    args = parser.parse_args(argv)

    corpus = {
        "coding": coding_session(0, args.size),
        "steering": steering_session(1, args.size),
        "buried errors": buried_errors_session(2, args.size),
    }
    runs = [(name, t, window) for name, t in corpus.items() for window in (args.window, 200_000)]
    # A session long enough to compact in a 200k window (the replay Claude Code was billed on).
    runs.append(("coding, long", coding_session(0, args.size * 5 // 2), 200_000))
    modes: tuple[CacheMode, ...] = ("conversation",) if args.quick else MODES
    rows = [
        Row(name, path, window, {mode: run_one(t, window, mode, path) for mode in modes})
        for path in args.paths
        for name, t, window in runs
    ]

    header = ["transcript", "path", "window", "requests", "compactions"]
    header += [f"billed / uncached: {LABELS[mode]}" for mode in MODES]
    header += ["summary requests per compaction", "summary requests", "$ uncached → now"]
    table = []
    for row in rows:
        now = row.runs["conversation"]
        calls = [t.summary.summary_calls for t in now.transitions]
        per = f"{statistics.mean(calls):.2f}" if calls else "-"
        ratios = [f"{billed_ratio(r.bills):.3f}x" if (r := row.runs.get(m)) else "-" for m in MODES]
        summaries = f"{billed_ratio(now.summary_bills):.2f}x" if now.summary_bills else "-"
        uncached = sum(
            bill(Usage(b.uncached_input, b.output_tokens), "claude-sonnet-4-6").dollars
            for b in now.bills
        )
        cost = f"${uncached:.2f} → ${dollars(now.bills):.2f}"
        where = [row.transcript, row.path, f"{row.window // 1000}k"]
        table.append([*where, str(len(now.bills)), str(len(now.transitions)), *ratios])
        table[-1] += [per, summaries, cost]
    bench_support.print_table(header, table, "ll")
    print()
    print(
        "billed / uncached: what the input cost (reads 0.1x, writes 1.25x) over what the same "
        "requests cost with no cache at all; summary requests: the same, for them alone."
    )
    print(
        "LangChain's SummarizationMiddleware is not replayed for its bill here (see "
        "bench_integrations.py for what it keeps): not measured. Its summary request renders "
        "the messages into a new prompt, so it can share no prefix with the conversation."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
