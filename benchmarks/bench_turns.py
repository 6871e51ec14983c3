"""Per-turn cost of the agent loop at 500 / 4k / 10k / 50k messages of history.

    python benchmarks/bench_turns.py [--quick]

``AgentLoop.run_turn`` with an instant model (a tool call, the tool's result, a text reply:
two model calls per turn), a ``ConversationCompacter`` whose window is far too large to
compact, with and without a SQLite store (in a temp dir, the history already stored, as for
a resumed session). The history is the transcript corpus' coding session repeated (tool ids
made unique), every message with its cached estimate. Beside it, the raw per-turn check
``should_compact`` and LangChain's ``SummarizationMiddleware`` trigger check. Also run by
``bench_compaction.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bench_langchain
import bench_support
from bench_support import MODEL, InstantModel, Timing, gc_paused, ms, print_table, verdict
from transcripts import SYSTEM, TOOLS, coding_session

import sessions
from agentloop import (
    AgentLoop,
    Calibration,
    ConversationCompacter,
    FunctionTool,
    Message,
    TokenEstimator,
    Usage,
)
from agentloop._adapters.records import to_record

SIZES = (500, 4_000, 10_000, 50_000)
NO_COMPACTION_WINDOW = 10**9
TARGET_RATIO = 2.0
TOOL_OUTPUT = "\n".join(f"{n:4} | value_{n} = compute({n}, retries=3)" for n in range(1, 60))


@dataclass
class SizeRow:
    messages: int
    local_tokens: int
    loop: Timing
    loop_store: Timing
    check: Timing
    langchain: Timing | None


def read_file(_input: object) -> str:
    return TOOL_OUTPUT


def tools() -> list[FunctionTool]:
    """The corpus' client tools (its server tool, web search, is not a loop ``Tool``)."""
    return [
        FunctionTool(t["name"], t["description"], t["input_schema"], read_file)
        for t in TOOLS
        if "input_schema" in t
    ]


def make_loop(
    history: list[Message], estimator: TokenEstimator, store_path: Path | None
) -> AgentLoop:
    fixed = estimator.count_system(SYSTEM) + estimator.count_tools(TOOLS)
    model = InstantModel(fixed)
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=NO_COMPACTION_WINDOW,
        model=model,
        counter=estimator,
        calibration=Calibration(),
    )
    store = None
    session_id = None
    if store_path is not None:
        store = sessions.open_store(store_path)
        session_id = sessions.new_session_id()
        store.create_session(session_id=session_id, model=MODEL, workspace="/bench", title=None)
        for start in range(0, len(history), 2_000):
            store.append_messages(
                session_id, [to_record(m) for m in history[start : start + 2_000]]
            )
    return AgentLoop(
        model=model,
        model_name=MODEL,
        compacter=compacter,
        store=store,
        session_id=session_id,
        messages=history,
        system=SYSTEM,
        tools=tools(),
        workspace="/bench",
    )


def time_turns(loop: AgentLoop, turns: int, warmup: int = 2) -> Timing:
    for n in range(warmup):  # the first turn validates and sums the whole history once
        loop.run_turn(f"Warm-up request {n}: check src/app/db.py.")
    samples: list[float] = []
    with gc_paused():
        for n in range(turns):
            start = time.perf_counter()
            loop.run_turn(f"Request {n}: check src/app/db.py again.")
            samples.append((time.perf_counter() - start) * 1_000)
    return Timing(tuple(samples))


def time_check(
    history: list[Message],
    estimator: TokenEstimator,
    repeat: int,
    request_tokens: int | None = None,
) -> Timing:
    """Milliseconds per ``should_compact`` after each turn's reply (with its usage) and new
    request (``history`` ends with a request); ``request_tokens``: each new request's figure
    given, as a caller's own count (None: the compacter estimates it)."""
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=NO_COMPACTION_WINDOW,
        model=InstantModel(),
        counter=estimator,
        calibration=Calibration(),
    )
    messages = list(history)
    total = sum(m.tokens or 0 for m in messages)
    compacter.should_compact(messages, system=SYSTEM, tools=TOOLS)  # the first sees everything
    samples: list[float] = []
    with gc_paused():
        for n in range(repeat):
            reply = Message.assistant(
                f"Done with step {n}.", usage=Usage(input_tokens=total, output_tokens=20)
            ).with_tokens(8)
            request = Message.user(f"Now step {n + 1}, please.")
            if request_tokens is not None:
                request = request.with_tokens(request_tokens)
            messages += (reply, request)
            start = time.perf_counter()
            compacter.should_compact(messages, system=SYSTEM, tools=TOOLS)
            samples.append((time.perf_counter() - start) * 1_000)
    return Timing(tuple(samples))


def time_langchain_check(history: list[Message], total: int, budget_s: float) -> Timing | None:
    """LangChain's trigger check per turn (its counter walks the whole history each time)."""
    if not bench_langchain.available():
        return None
    mw = bench_langchain.middleware(10**12, NO_COMPACTION_WINDOW)
    provider = bench_langchain.provider_of(mw)
    messages = bench_langchain.to_langchain(history, provider)
    bench_langchain.check(mw, messages)  # ids assigned once, as LangGraph's reducer would
    samples: list[float] = []
    started = time.perf_counter()
    with gc_paused():
        for n in range(200):
            messages += bench_langchain.next_turn(provider, n, total)
            start = time.perf_counter()
            bench_langchain.check(mw, messages)
            samples.append((time.perf_counter() - start) * 1_000)
            if len(samples) >= 3 and time.perf_counter() - started > budget_s:
                break
    return Timing(tuple(samples))


def run(quick: bool, sizes: Sequence[int] = SIZES) -> list[SizeRow]:
    turns, checks, lc_budget = (12, 60, 0.5) if quick else (40, 300, 2.0)
    estimator = TokenEstimator()
    full, stops = bench_support.tiled_history(coding_session(5, 1_000), estimator, max(sizes))
    rows: list[SizeRow] = []
    # Warm up (imports, caches) on a short history, so the first size is not charged for it.
    time_turns(make_loop(full[: stops[0]], estimator, None), 5)
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as tmp:
        for size in sizes:
            end = next(stop for stop in stops if stop >= size)
            history = full[:end]
            local = sum(m.tokens or 0 for m in history)
            loop = time_turns(make_loop(history, estimator, None), turns)
            with_store = make_loop(history, estimator, Path(tmp) / f"turns-{size}.db")
            loop_store = time_turns(with_store, turns)
            assert with_store.store is not None
            with_store.store.close()
            check = time_check(history, estimator, checks)
            langchain = time_langchain_check(history, local, lc_budget)
            rows.append(SizeRow(len(history), local, loop, loop_store, check, langchain))
    return rows


def report(rows: Sequence[SizeRow]) -> bool:
    """Print the table and the 10k/500 targets; True when they are met."""
    print(
        "Per-turn cost (median / p95): `AgentLoop.run_turn` with an instant model (2 model calls,"
        " 1 tool call per turn, no compaction), and the per-turn trigger check alone. History:"
        " the corpus' coding session repeated, cached estimates. The model is a zero-latency"
        " double on the public seam: `agentloop.testing`'s doubles re-tokenize the whole"
        " request for their usage figure on every call (about 0.1 s at 500 messages, 1 s at"
        " 4k), which would time the double, not the loop.\n"
    )
    table = []
    for row in rows:
        lc = bench_langchain.NOT_INSTALLED if row.langchain is None else row.langchain.cell()
        table.append(
            [
                f"{row.messages:,}",
                f"{row.local_tokens:,}",
                row.loop.cell(),
                row.loop_store.cell(),
                row.check.cell(),
                lc,
            ]
        )
    print_table(
        [
            "messages",
            "history tokens (estimate)",
            "run_turn, no store",
            "run_turn, SQLite store",
            "should_compact (ours)",
            "SummarizationMiddleware check (LangChain)",
        ],
        table,
    )
    by_size = {row.messages: row for row in rows}
    small = min(by_size.values(), key=lambda r: r.messages)
    ten_k = min(by_size.values(), key=lambda r: abs(r.messages - 10_000))
    ok = True
    print()
    for label, pick in (("no store", "loop"), ("SQLite store", "loop_store")):
        a: Timing = getattr(small, pick)
        b: Timing = getattr(ten_k, pick)
        ratio = b.median / a.median
        ok = ok and ratio <= TARGET_RATIO
        print(
            f"- turn at {ten_k.messages:,} / turn at {small.messages:,} messages ({label}) <= "
            f"{TARGET_RATIO:g}: {verdict(ratio <= TARGET_RATIO)} ({ms(b.median)} / "
            f"{ms(a.median)} = {ratio:.2f})"
        )
    big = max(by_size.values(), key=lambda r: r.messages)
    print(
        f"  - for information: {big.messages:,} / {small.messages:,} messages: "
        f"{big.loop.median / small.loop.median:.2f} (no store), "
        f"{big.loop_store.median / small.loop_store.median:.2f} (store); should_compact "
        f"{statistics.median(r.check.median for r in rows):.3f} ms median over the sizes"
    )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}; {bench_langchain.version()}\n")
    report(run(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
