"""Compaction overhead with the child saved, at the 85 %-of-200k point.

    python benchmarks/bench_overhead.py [--quick]

``AgentLoop.compact()`` on a loop with a SQLite store (temp dir) whose session already holds
the history: measuring, the strategy, the summarizer input, validation, and the store
transition (child + parent marked compacted, one transaction with its fsync). The summarizer
answers at once with a fixed summary, so what is timed is agentloop's own work. Two
histories past the trigger: the synthetic one of the first benchmark (the P3 figure)
and a coding session of the transcript corpus. Beside it, LangChain's
``SummarizationMiddleware.before_model`` with a zero-latency summarizer (no store: LangGraph
persists its state elsewhere). What is over the target is profiled (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_langchain
import bench_support
from bench_support import (
    MODEL,
    SYNTH_SYSTEM,
    SYNTH_TOOLS,
    TRIGGER_FILL,
    WINDOW_200K,
    Timing,
    ZeroLatencySummarizer,
    gc_paused,
    ms,
    print_table,
    verdict,
)
from fake_api import FakeAnthropicServer
from transcripts import coding_session

import sessions
from agentloop import (
    AgentLoop,
    Calibration,
    CompactionOutcome,
    CompactionSettings,
    ConversationCompacter,
    Message,
    TokenEstimator,
)
from agentloop._adapters.records import to_record
from agentloop._core.values.settings import StrategyName
from agentloop.testing import FunctionModel

TARGET_MS = 10.0
STRATEGIES = bench_support.STRATEGIES


@dataclass
class History:
    label: str
    messages: list[Message]
    system: str
    tools: list[dict[str, Any]]


@dataclass
class Case:
    label: str
    strategy: StrategyName
    model: Callable[[], Any]
    targeted: bool
    """One of the four strategies the ≤ 10 ms target is about."""


@dataclass
class Row:
    history: str
    case: Case
    saved: Timing
    unsaved: Timing
    outcome: str
    calls: int


CASES = [
    *(Case(s, s, ZeroLatencySummarizer, True) for s in STRATEGIES),
    Case("summarize, no model (digest)", "summarize", lambda: None, False),
    Case(
        "summarize, FunctionModel (tokenizes its input for its usage figure)",
        "summarize",
        lambda: FunctionModel(lambda _request: bench_support.SUMMARY),
        False,
    ),
]


def histories(estimator: TokenEstimator) -> list[History]:
    tokens = int(WINDOW_200K * TRIGGER_FILL)
    synthetic = bench_support.synthetic_history(tokens, estimator)
    server = FakeAnthropicServer()
    grown = bench_support.grow(coding_session, 11, server, tokens)
    transcript = bench_support.anchored(grown, server, estimator)
    return [
        History("synthetic (P3)", synthetic, SYNTH_SYSTEM, SYNTH_TOOLS),
        History(
            "coding transcript",
            transcript,
            grown.transcript.system,
            grown.transcript.tools,
        ),
    ]


class Runner:
    """Fresh loops over one history: a new parent session per run when a store is used."""

    def __init__(self, history: History, estimator: TokenEstimator, store_path: Path) -> None:
        self.history = history
        self.estimator = estimator
        self.store = sessions.open_store(store_path)
        self.records = [to_record(m) for m in history.messages]

    def loop(self, case: Case, *, saved: bool) -> tuple[AgentLoop, Any]:
        """A loop over the history (and its summarizer model) ready to compact."""
        model = case.model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the digest case has no model, on purpose
            compacter = ConversationCompacter(
                model_name=MODEL,
                context_window=WINDOW_200K,
                model=model,
                settings=CompactionSettings(strategy=case.strategy),
                counter=self.estimator,
                calibration=Calibration(),
            )
        session_id = sessions.new_session_id()
        if saved:
            self.store.create_session(
                session_id=session_id, model=MODEL, workspace="/bench", title=None
            )
            self.store.append_messages(session_id, self.records)
        loop = AgentLoop(
            model=ZeroLatencySummarizer(),
            model_name=MODEL,
            compacter=compacter,
            store=self.store if saved else None,
            session_id=session_id,
            messages=self.history.messages,
            system=self.history.system,
            workspace="/bench",
        )
        loop.tool_definitions = list(self.history.tools)  # the corpus' own definitions
        return loop, model

    def time(self, case: Case, runs: int, *, saved: bool) -> tuple[Timing, CompactionOutcome, int]:
        samples: list[float] = []
        outcome: CompactionOutcome | None = None
        calls = 0
        for _ in range(runs + 1):  # the first run warms caches and is not counted
            loop, model = self.loop(case, saved=saved)
            with gc_paused():
                start = time.perf_counter()
                outcome = loop.compact()
                samples.append((time.perf_counter() - start) * 1_000)
            calls = len(getattr(model, "requests", ())) or int(getattr(model, "calls", 0))
        assert outcome is not None
        return Timing(tuple(samples[1:])), outcome, calls

    def profile(self, case: Case, runs: int) -> pstats.Stats:
        profiler = cProfile.Profile()
        for _ in range(runs):
            loop, _model = self.loop(case, saved=True)
            profiler.enable()
            loop.compact()
            profiler.disable()
        return pstats.Stats(profiler)


def describe(outcome: CompactionOutcome, trigger: int) -> str:
    transition = outcome.transition
    if transition is None:
        return f"skipped: {outcome.explanation}"
    s = transition.summary
    return (
        f"{s.strategy}: {s.original_message_count} → {s.compacted_message_count} msgs, "
        f"~{s.tokens_after / trigger:.3f} of trigger"
    )


def langchain_timing(history: History, runs: int) -> tuple[Timing, str] | None:
    if not bench_langchain.available():
        return None
    trigger = int(WINDOW_200K * 0.85)
    mw = bench_langchain.middleware(trigger, WINDOW_200K)
    messages = bench_langchain.to_langchain(history.messages, bench_langchain.provider_of(mw))
    samples: list[float] = []
    result = None
    for _ in range(runs + 1):
        with gc_paused():
            start = time.perf_counter()
            result = bench_langchain.summarize(mw, messages)
            samples.append((time.perf_counter() - start) * 1_000)
    assert result is not None
    what = (
        f"kept {result.kept} of {len(messages)} LangChain msgs"
        if result.triggered
        else "not triggered"
    )
    return Timing(tuple(samples[1:])), what


def print_profile(stats: pstats.Stats, runs: int, top: int = 12) -> None:
    """The top functions by own time, and agentloop's and the store's by cumulative time."""
    profile = stats.get_stats_profile()
    total = profile.total_tt * 1_000 / runs
    print(f"cProfile over {runs} runs: {ms(total)} per run under the profiler.\n")
    items = list(profile.func_profiles.items())

    def where(file_name: str, line: int) -> str:
        if file_name == "~":
            return "builtin"
        path = Path(file_name)
        return f"{path.parent.name}/{path.name}:{line}"

    def table(ranked: list[tuple[str, Any]], title: str) -> None:
        rows = [
            [
                f"`{name}`",
                where(fp.file_name, fp.line_number),
                fp.ncalls,
                ms(fp.tottime * 1_000 / runs),
                ms(fp.cumtime * 1_000 / runs),
                f"{fp.cumtime * 1_000 / runs / total:.0%}",
            ]
            for name, fp in ranked[:top]
        ]
        print(f"{title}:\n")
        print_table(
            ["function", "where", "calls", "own / run", "cumulative / run", "cumulative share"],
            rows,
            "ll",
        )
        print()

    table(sorted(items, key=lambda kv: kv[1].tottime, reverse=True), "By own time")
    ours = [
        kv
        for kv in items
        if any(f"/{room}/" in kv[1].file_name for room in ("agentloop", "sessions"))
        and kv[0] not in _DRIVERS
    ]
    table(
        sorted(ours, key=lambda kv: kv[1].cumtime, reverse=True),
        "agentloop and sessions functions by cumulative time (the drivers left out)",
    )


_DRIVERS = {"compact", "drive", "perform", "_compaction_steps", "steps"}
"""The frames every effect passes through (100 % each): left out of the cumulative table."""
_FAMILIES: tuple[tuple[StrategyName, ...], ...] = (("summarize",), ("auto", "prune"))
"""Profiled separately when over the target: summarizing, and pruning (its child is big)."""


def run(quick: bool) -> bool:
    """Print the table, the target and the profiles; True when the target is met."""
    runs = 5 if quick else 15
    estimator = TokenEstimator()
    trigger = int(WINDOW_200K * 0.85)
    rows: list[Row] = []
    langchain_rows: list[list[str]] = []
    runners: dict[str, Runner] = {}
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        for index, history in enumerate(histories(estimator)):
            runner = Runner(history, estimator, Path(tmp) / f"overhead-{index}.db")
            runners[history.label] = runner
            for case in CASES:
                saved, outcome, calls = runner.time(case, runs, saved=True)
                unsaved, _, _ = runner.time(case, runs, saved=False)
                rows.append(
                    Row(history.label, case, saved, unsaved, describe(outcome, trigger), calls)
                )
            lc = langchain_timing(history, runs)
            langchain_rows.append(
                [
                    history.label,
                    "LangChain SummarizationMiddleware.before_model (keep 20 msgs)",
                    "n/a (no store)",
                    bench_langchain.NOT_INSTALLED if lc is None else lc[0].cell(),
                    "" if lc is None else lc[1],
                    "1" if lc is not None and "kept" in lc[1] else "0",
                ]
            )
        print(
            f"Compaction overhead at the 85 %-of-200k point (trigger {trigger:,} tokens), "
            f"zero-latency summarizer; median / p95 of {runs} runs.\n"
        )
        table = [
            [
                row.history,
                row.case.label,
                row.saved.cell(),
                row.unsaved.cell(),
                row.outcome,
                str(row.calls),
            ]
            for row in rows
        ]
        print_table(
            [
                "history",
                "strategy",
                "compact(), child saved (SQLite)",
                "compact(), no store",
                "result",
                "summarizer calls",
            ],
            table + langchain_rows,
            "llrrlr",
        )
        targeted = [r for r in rows if r.case.targeted]
        worst = max(targeted, key=lambda r: r.saved.median)
        ok = worst.saved.median <= TARGET_MS
        print(
            f"\n- compaction with the child saved <= {TARGET_MS:g} ms for every strategy: "
            f"{verdict(ok)} (worst: {worst.case.label} on the {worst.history} history, "
            f"{ms(worst.saved.median)})"
        )
        for r in targeted:
            if r.saved.median > TARGET_MS:
                print(f"  - over: {r.case.label} on {r.history}: {ms(r.saved.median)}")
        for family in _FAMILIES:
            over = [r for r in targeted if r.case.strategy in family]
            slowest = max(over, key=lambda r: r.saved.median)
            if slowest.saved.median <= TARGET_MS:
                continue
            print(f"\n### Profile: {slowest.case.label} on the {slowest.history} history\n")
            print_profile(runners[slowest.history].profile(slowest.case, runs), runs)
        for runner in runners.values():
            runner.store.close()
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}; {bench_langchain.version()}\n")
    run(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
