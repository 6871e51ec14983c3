"""How long a compaction holds the user up, with and without the summary prepared ahead (issue 18).

The coding transcript of the test corpus is replayed through ``AgentLoop`` on the real
``anthropic`` SDK against the test server, which answers each reply after ``--reply`` seconds
and each summary after ``--summary`` seconds. The stall of a compaction is the time from its
start to the child taking over (what the user waits for on the turn that crosses the trigger).

Columns: the stall (median and worst), summary requests per compaction, summary requests made
in the background and thrown away, and the session's bill (billed input over uncached input)
with the extra input of the discarded ones as a share of it. ``--scale`` divides every latency
(the figures printed are multiplied back, and say so): at the default of 10 a run with 1 s
replies takes a tenth of the time. Run: ``python benchmarks/bench_latency.py [--scale 1]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from typing import Any

import bench_support  # noqa: F401  (puts the repository and tests/ on sys.path)
from bench_cost import summary_for
from fake_api import FakeAnthropicServer, billed_ratio
from support.replay import PREPARE_AT, ReplayRun, replay, user_turns
from transcripts import coding_session


def run_one(
    window: int, size: int, prepare: bool, reply: float, summary: float, scale: float
) -> ReplayRun:
    transcript = coding_session(0, size)
    first = str(user_turns(transcript.messages)[0][0]["text"])
    with FakeAnthropicServer() as server:
        run = replay(
            server,
            transcript,
            window=window,
            summary=summary_for(first),
            strategy="summarize",
            prepare_at=PREPARE_AT if prepare else None,
            reply_delay=reply / scale,
            summary_delay=summary / scale,
        )
        if server.violations:
            raise SystemExit(f"the test server saw broken requests: {server.violations[:3]}")
    return run


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda"]


def words(label: str, count: int) -> str:
    return label + ": " + " ".join(WORDS[n % len(WORDS)] for n in range(count))


class CliScript:
    """The test server's handler for the CLI run: replies after ``reply`` seconds, summaries
    (the first request and, in the background, its refreshes) after ``summary`` seconds."""

    def __init__(self, reply: float, summary: float, first: str) -> None:
        self.reply, self.summary, self.first = reply, summary, first
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from fake_api import text_reply
        from support.loop_scripts import is_summary_request

        if is_summary_request(body):
            return text_reply(
                f"## Goal\n{self.first}\n\n## Progress\nin progress", delay=self.summary
            )
        self.turn += 1
        return text_reply(words(f"answer {self.turn}", 1000), delay=self.reply)


def cli_run(prepare: bool, reply: float, summary: float, turns: int = 50) -> list[float]:
    """The stall of each compaction through the console script (a 60k window): the duration
    of each turn that compacted, less the median duration of the turns that did not."""
    import os
    import subprocess
    import tempfile
    import threading
    import time
    from pathlib import Path

    lines = [words(f"request {n}", 1000) for n in range(turns)]
    with FakeAnthropicServer() as server, tempfile.TemporaryDirectory() as home:
        server.handler = CliScript(reply, summary, lines[0][:60])
        server.context_window = 60_000
        env = dict(os.environ)
        env.update(
            ANTHROPIC_BASE_URL=server.base_url,
            ANTHROPIC_API_KEY="test-key",
            AGENTLOOP_HOME=home,
            AGENTLOOP_PREPARE_SUMMARIES="on" if prepare else "off",
        )
        agentloop = Path(sys.executable).parent / "agentloop"
        process = subprocess.Popen(
            [str(agentloop), "--context-window", "60000", "--compaction-strategy", "summarize"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=home,
            env=env,
        )
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        notices: list[float] = []

        def watch_errors() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                if line.startswith("Conversation compacted"):
                    notices.append(time.perf_counter())

        watcher = threading.Thread(target=watch_errors)
        watcher.start()
        start = time.perf_counter()

        def feed() -> None:
            # From a thread: the lines are more than a pipe holds, and the replies must be read.
            assert process.stdin is not None
            process.stdin.write("\n".join(lines) + "\n")
            process.stdin.close()

        feeder = threading.Thread(target=feed)
        feeder.start()
        replies = [start]
        for line in process.stdout:
            if line.startswith("answer "):
                replies.append(time.perf_counter())
        process.wait()
        watcher.join()
        feeder.join()
    durations = [b - a for a, b in itertools.pairwise(replies)]
    compacted = {next(i for i, t in enumerate(replies[1:]) if t >= n) for n in notices}
    usual = statistics.median(d for i, d in enumerate(durations) if i not in compacted)
    return [max(0.0, durations[i] - usual) for i in sorted(compacted)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reply", type=float, default=1.0, help="seconds per reply")
    parser.add_argument(
        "--summaries", type=float, nargs="+", default=[4.0, 30.0], help="seconds per summary"
    )
    parser.add_argument("--scale", type=float, default=10.0, help="divide every latency by this")
    parser.add_argument(
        "--cli", action="store_true", help="only the console script, at real latencies"
    )
    args = parser.parse_args(argv)

    if args.cli:
        summary = args.summaries[0]
        print(
            f"The console script, 50 turns, a 60k window: replies {args.reply:g} s, summaries "
            f"{summary:g} s (real time)"
        )
        print(f"{'prepared':<8} {'compactions':>11} {'stalls':<40} {'worst':>8}")
        for prepare in (False, True):
            stalls = cli_run(prepare, args.reply, summary)
            shown = ", ".join(f"{s:.2f} s" for s in stalls)
            worst = f"{max(stalls):.2f} s" if stalls else "-"
            print(f"{'yes' if prepare else 'no':<8} {len(stalls):>11} {shown:<40} {worst:>8}")
        return 0

    cases = [(30_000, 120), (60_000, 240), (200_000, 600)]
    header = (
        f"{'window':>7} {'summary':>8} {'prepared':<8} {'compactions':>11} {'stall median':>12} "
        f"{'stall worst':>11} {'calls/compaction':>16} {'discarded':>9} {'billed':>8} "
        f"{'discarded share':>15}"
    )
    print(f"replies {args.reply:g} s; latencies divided by {args.scale:g}, stalls multiplied back")
    print(header)
    print("-" * len(header))
    for window, size in cases:
        for summary in args.summaries:
            for prepare in (False, True):
                run = run_one(window, size, prepare, args.reply, summary, args.scale)
                stalls = [s * args.scale for s in run.stalls]
                median = f"{statistics.median(stalls):.2f} s" if stalls else "-"
                worst = f"{max(stalls):.2f} s" if stalls else "-"
                summaries = [t.summary for t in run.transitions]
                calls = [s.summary_calls for s in summaries]
                per = f"{statistics.mean(calls):.2f}" if calls else "-"
                discarded = sum(s.discarded_calls for s in summaries)
                wasted = sum(s.discarded_usage.prompt_tokens for s in summaries)
                billed = sum(b.billed_input for b in run.bills)
                extra = sum(
                    (s.discarded_usage.input_tokens)
                    + 1.25 * s.discarded_usage.cache_creation_input_tokens
                    + 0.1 * s.discarded_usage.cache_read_input_tokens
                    for s in summaries
                )
                share = f"{extra / billed:.1%}" if billed and wasted else "0"
                print(
                    f"{window:>7,} {summary:>7g}s {'yes' if prepare else 'no':<8} "
                    f"{len(run.transitions):>11} {median:>12} {worst:>11} {per:>16} "
                    f"{discarded:>9} {billed_ratio(run.bills):>7.3f}x {share:>15}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
