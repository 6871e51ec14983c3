"""Tokens after compaction, as the API counts them, for every strategy.

    python benchmarks/bench_tokens_after.py

Histories from the transcript corpus grown past the 85 %-of-200k trigger as the test server
(``tests/fake_api``) counts them: text-heavy coding sessions, one with a tokenizer that
charges 1.4× tiktoken, one with images and a PDF (charged by pixels and pages, not by their
base64), two on a server that charges a fixed cost per message (60 tokens, and 250 tokens:
content whose cost the local estimate cannot see). Each is
compacted by each strategy three ways: with a summarizer model that counts (``count_tokens``
= the server's count, as ``AnthropicModel`` has), with one that cannot (calibrated local
estimate, the calibration learnt from earlier replies as the loop learns it), and as the
library's default (no count, no calibration). The next request is then counted by the server:
``after / trigger`` must be below 1, and the compacter's own ``tokens_after`` (the figure the
notice shows) is compared with that count. LangChain's ``SummarizationMiddleware`` runs on the
same histories. Also run by ``bench_compaction.py``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bench_langchain
import bench_support
from bench_support import (
    MODEL,
    NOW,
    TRIGGER_FILL,
    WINDOW_200K,
    Grown,
    ServerCountingSummarizer,
    ZeroLatencySummarizer,
    print_table,
    verdict,
)
from fake_api import FakeAnthropicServer, check_request
from transcripts import (
    Transcript,
    buried_errors_session,
    coding_session,
    media_session,
    steering_session,
)

from agentloop import (
    Calibration,
    CompactionOutcome,
    CompactionSettings,
    ConversationCompacter,
    Message,
    TokenEstimator,
)
from agentloop._core.values.settings import StrategyName
from agentloop._loop.drive import drive

STRATEGIES = bench_support.STRATEGIES
MODES = ("API count", "estimate, calibrated", "estimate, library default")
TARGET_NOTICE = 0.10
"""The notice's "after" figure is within 10 % of what the API counts next."""


@dataclass(frozen=True)
class Scenario:
    label: str
    build: Callable[[int, int], Transcript]
    seed: int
    server: Callable[[], FakeAnthropicServer]


SCENARIOS = [
    Scenario("text: buried errors", buried_errors_session, 3, FakeAnthropicServer),
    Scenario(
        "text: steering, tokenizer ×1.4",
        steering_session,
        4,
        lambda: FakeAnthropicServer(token_factor=1.4),
    ),
    Scenario("media: images and a PDF", media_session, 5, FakeAnthropicServer),
    Scenario(
        "coding, 60 tokens per message, ×1.2",
        coding_session,
        6,
        lambda: FakeAnthropicServer(message_overhead=60, token_factor=1.2),
    ),
    Scenario(
        "coding, opaque cost: 250 tokens per message",
        coding_session,
        7,
        lambda: FakeAnthropicServer(message_overhead=250),
    ),
]


@dataclass
class Prepared:
    scenario: Scenario
    server: FakeAnthropicServer
    grown: Grown
    messages: list[Message]
    calibration: Calibration


@dataclass
class Result:
    label: str
    strategy: str
    mode: str
    outcome: str
    counted_ratio: float | None
    own_error: float | None
    """(own figure - server count) / server count."""
    source: str
    valid: bool | None


def prepare(scenario: Scenario, estimator: TokenEstimator) -> Prepared:
    server = scenario.server()
    grown = bench_support.grow(
        scenario.build, scenario.seed, server, int(WINDOW_200K * TRIGGER_FILL)
    )
    messages = bench_support.anchored(grown, server, estimator)
    # What the loop would have learnt from the replies before: one observation per reply
    # (the API's count of the request beside the local estimate of it).
    fixed = estimator.count_system(grown.transcript.system) + estimator.count_tools(
        grown.transcript.tools
    )
    replies = [
        i for i, m in enumerate(messages) if m.role == "assistant" and i > len(messages) // 3
    ]
    calibration = Calibration()
    for index in replies[:: max(1, len(replies) // 8)]:
        local = fixed + sum(m.tokens or 0 for m in messages[:index])
        calibration = calibration.observe(grown.prefix_counts[index], local, index)
    return Prepared(scenario, server, grown, messages, calibration)


def compact(
    prepared: Prepared, strategy: StrategyName, mode: str, estimator: TokenEstimator
) -> Result:
    counted = mode == "API count"
    model = ServerCountingSummarizer(prepared.server) if counted else ZeroLatencySummarizer()
    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=WINDOW_200K,
        model=model,
        settings=CompactionSettings(strategy=strategy),
        counter=estimator,
        calibration=None if mode.endswith("default") else prepared.calibration,
        clock=lambda: NOW,
        new_session_id=lambda: "child",
    )
    transcript = prepared.grown.transcript
    steps = compacter.steps(
        "parent", prepared.messages, system=transcript.system, tools=transcript.tools
    )
    outcome: CompactionOutcome = drive(steps, compacter.runtime.perform)
    label = prepared.scenario.label
    transition = outcome.transition
    if transition is None:
        return Result(
            label, strategy, mode, f"not committed: {outcome.explanation}", None, None, "", None
        )
    params = [dict(p) for p in transition.compacted_params]
    body = prepared.grown.body(params)
    count = prepared.server.count_input_tokens(body)
    trigger = outcome.decision.trigger_tokens
    s = transition.summary
    return Result(
        label,
        strategy,
        mode,
        f"{s.strategy}: {s.original_message_count} → {s.compacted_message_count} msgs",
        count / trigger,
        (s.tokens_after - count) / count,
        s.tokens_after_source,
        check_request(body) == [],
    )


def langchain_rows(prepared: Prepared, trigger: int) -> list[Result]:
    label = prepared.scenario.label
    if not bench_langchain.available():
        return [Result(label, "LangChain", "", bench_langchain.NOT_INSTALLED, None, None, "", None)]
    out = []
    for keep in (("messages", 20), ("fraction", 0.1)):
        mw = bench_langchain.middleware(trigger, WINDOW_200K, keep)
        messages = bench_langchain.to_langchain(prepared.messages, bench_langchain.provider_of(mw))
        result = bench_langchain.summarize(mw, messages)
        body = prepared.grown.body(result.params)
        count = prepared.server.count_input_tokens(body)
        what = (
            f"summary + {result.kept} LangChain msgs ({len(result.params)} API msgs)"
            if result.triggered
            else "not triggered"
        )
        out.append(
            Result(
                label,
                f"LangChain, keep {keep[0]} {keep[1]}",
                "its approximate counter",
                what,
                count / trigger,
                (result.own_tokens - count) / count,
                "estimate (no system/tools)",
                check_request(body) == [],
            )
        )
    return out


def run() -> tuple[list[Result], list[str]]:
    """Every scenario, strategy and mode (deterministic, not timed), and a line per history."""
    estimator = TokenEstimator()
    results: list[Result] = []
    described: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library-default compacter has no model's warning
        for scenario in SCENARIOS:
            prepared = prepare(scenario, estimator)
            described.append(describe(prepared))
            for strategy in STRATEGIES:
                for mode in MODES:
                    results.append(compact(prepared, strategy, mode, estimator))
            results += langchain_rows(prepared, int(WINDOW_200K * 0.85))
    return results, described


def pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1%}"


def report(results: Sequence[Result], described: Sequence[str]) -> bool:
    """Print the table and the targets; True when they are met."""
    print(
        "Tokens after compaction as the test server counts the next request (trigger: 85 % "
        "of 200k = 170,000), and the compacter's own `tokens_after` against that count.\n"
    )
    for line in described:
        print(line)
    print()
    rows = [
        [
            r.label,
            r.strategy,
            r.mode,
            r.outcome,
            "" if r.counted_ratio is None else f"{r.counted_ratio:.3f}",
            pct(r.own_error),
            r.source,
            "" if r.valid is None else ("yes" if r.valid else "**no**"),
        ]
        for r in results
    ]
    print_table(
        [
            "history",
            "strategy",
            "measured by",
            "result",
            "after / trigger (counted)",
            "own figure vs count",
            "own figure is",
            "valid request",
        ],
        rows,
        "llllrrlr",
    )
    ours = [r for r in results if not r.strategy.startswith("LangChain")]
    counted = [r for r in ours if r.mode == "API count"]
    committed = [r for r in counted if r.counted_ratio is not None]
    under = all(r.counted_ratio is not None and r.counted_ratio < 1 for r in committed)
    close = all(r.own_error is not None and abs(r.own_error) <= TARGET_NOTICE for r in committed)
    worst_ratio = max((r.counted_ratio or 0.0) for r in committed) if committed else 0.0
    worst_error = max((abs(r.own_error or 0.0)) for r in committed) if committed else 0.0
    print(
        f"\n- with the API count, every committed compaction is under the trigger as counted: "
        f"{verdict(under)} (worst {worst_ratio:.3f}; {len(counted) - len(committed)} of "
        f"{len(counted)} not committed)"
    )
    print(
        f"- with the API count, the notice's figure is within {TARGET_NOTICE:.0%} of the "
        f"count: {verdict(close)} (worst {worst_error:.1%})"
    )
    for mode in MODES[1:]:
        rows_ = [r for r in ours if r.mode == mode and r.counted_ratio is not None]
        if rows_:
            over = sum(1 for r in rows_ if (r.counted_ratio or 0.0) >= 1)
            err = max(abs(r.own_error or 0.0) for r in rows_)
            print(
                f"  - for information, {mode}: {over} of {len(rows_)} committed compactions at "
                f"or over the trigger as counted; own figure off by up to {err:.0%}"
            )
    all_valid = all(r.valid for r in ours if r.valid is not None)
    print(f"- every committed compaction is a valid request (server rules): {verdict(all_valid)}")
    return under and close and all_valid


def describe(prepared: Prepared) -> str:
    server = prepared.server
    count = server.count_input_tokens(prepared.grown.body())
    return (
        f"- {prepared.scenario.label}: {len(prepared.messages)} messages, {count:,} tokens as "
        f"counted (message overhead {server.message_overhead}, tokenizer ×"
        f"{server.token_factor:g}); calibration learnt: ratio "
        f"{prepared.calibration.ratio:.2f}, {prepared.calibration.per_message:.1f} per message"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="no effect: nothing is timed")
    parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}; {bench_langchain.version()}\n")
    report(*run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
