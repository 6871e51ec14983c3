"""How long a compaction holds the user up, with and without the summary prepared ahead.

Two workloads, each on both paths: ``client`` (a model without on-demand compaction:
agentloop writes the summary, continuing the cached conversation) and ``on-demand`` (the API
writes it: ``compaction`` in the request). The test server answers each reply after
``--reply`` seconds and each summary, agentloop's or the API's, after ``--summary`` seconds.

- **turns** (a conversation's workload, real time): requests and replies of a fixed number of words
  at a 60k window, through ``AgentLoop`` on the real SDK. Several sizes, so that the trigger
  falls at different points of the background request's life.
- **transcript**: the coding transcript of the test corpus replayed (tool calls, recorded
  results), latencies divided by ``--scale`` and the stalls multiplied back (the CPU part of a
  stall is then counted ``--scale`` times over).

The stall of a compaction is the time from its start to the child taking over; of it, what
was spent waiting for the request in flight in the background. "At the trigger": summary
requests made there and then (each one the user waits for). Run:
``python benchmarks/bench_latency.py [--quick] [--cli]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Sequence
from typing import Any

import bench_support  # puts the repository and tests/ on sys.path; print_table
from bench_cost import summary_for
from fake_api import FakeAnthropicServer, billed_ratio
from support.replay import PREPARE_AT, user_turns
from transcripts import coding_session
from trigger_trace import PATHS, AtTrigger, on_demand_delay, replay_traced, traced

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda"]
SYSTEM = "You are a careful assistant. Answer every request in full."


def words(label: str, count: int) -> str:
    return label + ": " + " ".join(WORDS[n % len(WORDS)] for n in range(count))


class CliScript:
    """The test server's handler for the turns: replies of ``size`` words after ``reply``
    seconds, agentloop's summaries after ``summary`` seconds."""

    def __init__(self, reply: float, summary: float, first: str, size: int = 1000) -> None:
        self.reply, self.summary, self.first, self.size = reply, summary, first, size
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from fake_api import text_reply
        from support.loop_scripts import is_summary_request

        if is_summary_request(body):
            return text_reply(
                f"## Goal\n{self.first}\n\n## Progress\nin progress", delay=self.summary
            )
        self.turn += 1
        return text_reply(words(f"answer {self.turn}", self.size), delay=self.reply)


def turns_run(
    path: str, size: int, turns: int, *, window: int, prepare: bool, reply: float, summary: float
) -> list[AtTrigger]:
    """``turns`` requests of ``size`` words, each answered with ``size`` words, in real time."""
    from agentloop import AgentLoop, AnthropicModel, CompactionSettings, ConversationCompacter

    lines = [words(f"request {n}", size) for n in range(turns)]
    with FakeAnthropicServer() as server, on_demand_delay(summary):
        server.handler = CliScript(reply, summary, lines[0][:60], size)
        model = AnthropicModel(api_key="test-key", base_url=server.base_url, max_retries=0)
        settings = CompactionSettings(
            strategy="summarize", prepare_at=PREPARE_AT if prepare else None
        )
        compacter = ConversationCompacter(
            model=model, model_name=PATHS[path], context_window=window, settings=settings
        )
        loop = AgentLoop(model=model, model_name=PATHS[path], compacter=compacter, system=SYSTEM)
        events = traced(loop)
        try:
            for line in lines:
                loop.run_turn(line)
        finally:
            loop.close()
        if server.violations:
            raise SystemExit(f"the test server saw broken requests: {server.violations[:3]}")
    return events.done


def cells(done: Sequence[AtTrigger]) -> list[str]:
    """Compactions, stall median / worst, worst wait for the background, summary requests at
    the trigger (most in one compaction), compactions with a request in flight at the trigger."""
    if not done:
        return ["0", "-", "-", "-", "-"]
    stalls = [d.stall for d in done]
    return [
        str(len(done)),
        f"{statistics.median(stalls):.2f} / {max(stalls):.2f} s",
        f"{max(d.waited for d in done):.2f} s",
        str(max(d.summary_calls for d in done)),
        str(sum(d.in_flight for d in done)),
    ]


def turns_table(paths: Sequence[str], sizes: Sequence[int], reply: float, summary: float) -> None:
    print(
        f"\nturns: a 60k window, replies {reply:g} s, summaries {summary:g} s, real time "
        "(summaries prepared ahead)\n"
    )
    header = ["path", "words a turn", "compactions", "stall, median / worst", "waited, worst"]
    header += ["summary requests at the trigger", "a request in flight at the trigger"]
    rows = []
    for path, size in itertools.product(paths, sizes):
        done = turns_run(path, size, 40, window=60_000, prepare=True, reply=reply, summary=summary)
        rows.append([path, f"{size:,}", *cells(done)])
    bench_support.print_table(header, rows, "ll")


def transcript_table(
    paths: Sequence[str],
    cases: Sequence[tuple[int, int]],
    reply: float,
    summary: float,
    scale: float,
) -> None:
    print(
        f"\ntranscript: the coding transcript, replies {reply:g} s, summaries {summary:g} s; "
        f"latencies divided by {scale:g}, stalls multiplied back\n"
    )
    header = ["path", "window", "prepared", "compactions", "stall, median / worst"]
    header += ["waited, worst", "summary requests at the trigger"]
    header += ["in flight at the trigger", "summary requests per compaction", "bill"]
    rows = []
    for path, (window, size), prepare in itertools.product(paths, cases, (False, True)):
        transcript = coding_session(0, size)
        first = str(user_turns(transcript.messages)[0][0]["text"])
        with FakeAnthropicServer() as server:
            run = replay_traced(
                server,
                transcript,
                model_name=PATHS[path],
                window=window,
                summary=summary_for(first),
                prepare_at=PREPARE_AT if prepare else None,
                reply_delay=reply / scale,
                summary_delay=summary / scale,
                scale=scale,
            )
        calls = [t.summary.summary_calls for t in run.transitions]
        per = f"{statistics.mean(calls):.2f}" if calls else "-"
        bill = f"{billed_ratio(run.bills):.3f}x"
        prepared = "yes" if prepare else "no"
        rows.append([path, f"{window // 1000}k", prepared, *cells(run.triggers), per, bill])
    bench_support.print_table(header, rows, "ll")


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
    parser.add_argument("--summary", type=float, default=4.0, help="seconds per summary")
    parser.add_argument("--scale", type=float, default=10.0, help="transcript: divide latencies")
    parser.add_argument(
        "--paths", nargs="+", choices=sorted(PATHS), default=["client", "on-demand"]
    )
    parser.add_argument("--quick", action="store_true", help="one turn size, two windows")
    parser.add_argument(
        "--cli", action="store_true", help="only the console script, at real latencies"
    )
    args = parser.parse_args(argv)

    if args.cli:
        print(
            f"The console script, 50 turns, a 60k window: replies {args.reply:g} s, summaries "
            f"{args.summary:g} s (real time)"
        )
        print(f"{'prepared':<8} {'compactions':>11} {'stalls':<40} {'worst':>8}")
        for prepare in (False, True):
            stalls = cli_run(prepare, args.reply, args.summary)
            shown = ", ".join(f"{s:.2f} s" for s in stalls)
            worst = f"{max(stalls):.2f} s" if stalls else "-"
            print(f"{'yes' if prepare else 'no':<8} {len(stalls):>11} {shown:<40} {worst:>8}")
        return 0

    sizes = [1300] if args.quick else [1000, 1300, 1600]
    turns_table(args.paths, sizes, args.reply, args.summary)
    cases = [(12_000, 120), (60_000, 240)]
    if not args.quick:
        cases = [(12_000, 120), (30_000, 120), (60_000, 240), (200_000, 600)]
    transcript_table(args.paths, cases, args.reply, args.summary, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
