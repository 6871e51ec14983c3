"""Benchmark of the compaction core on a synthetic coding history. Prints a markdown table.

    python benchmarks/bench_compaction.py [--quick]

The history is what a coding agent accumulates: user requests, assistant text with tool calls
(often parallel), ~2 KB tool results. Every stored message already carries its cached token
estimate and every assistant reply carries the API usage it was produced with, as the agent
loop stores them. Measured (medians):

1. the per-turn check: append one tool_result (not yet estimated) and call ``should_compact``;
2. a naive per-turn check that re-counts the whole history with tiktoken;
3. LangChain's ``SummarizationMiddleware`` trigger check, the way its ``before_model`` does it
   (message ids, its default approximate token counter, the trigger test), if ``langchain``
   is installed (``pip install -e .[bench]``);
4. a compaction without model latency at the 85 %-of-200k trigger: the digest (no model) and a
   zero-latency summarizer, including building the summarizer input and validating the result;
5. tokens after compaction / tokens at the trigger.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentloop._adapters.tokens import TokenEstimator
from agentloop._core.compacter import CompactionSettings
from agentloop._core.messages import ContentBlock, Message, Usage, validate_messages
from agentloop._core.model import ModelRequest, ModelResponse, TextCallback
from agentloop._core.results import CompactionOutcome
from agentloop._loop.compacter import ConversationCompacter
from agentloop._loop.drive import drive
from agentloop.testing import FunctionModel

SIZES = (500, 1_000, 2_000, 4_000)
WINDOW_200K = 200_000
SYSTEM = "You are a careful coding agent working in a Python repository. " * 20
TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{name} tool for the workspace",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("read_file", "write_file", "edit_file", "bash", "grep")
]

TARGET_CHECK_MS = 1.0
TARGET_COMPACT_MS = 10.0
TARGET_RATIO = 0.25

_IDENTS = (
    "config", "session", "retry", "parser", "token", "window", "request", "response", "cache",
    "handler", "router", "schema", "client", "result", "value", "index", "buffer", "logger",
)  # fmt: skip
_PATHS = ("src/app.py", "src/db.py", "src/http/client.py", "tests/test_api.py", "README.md")


# -- the synthetic history -----------------------------------------------------------------------


class Synth:
    """Deterministic generator of coding-agent messages."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.ids = 0

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(_IDENTS) for _ in range(n))

    def code(self, chars: int) -> str:
        """Python-looking file content of about ``chars`` characters."""
        lines: list[str] = []
        size = 0
        while size < chars:
            a, b, c = (self.rng.choice(_IDENTS) for _ in range(3))
            line = self.rng.choice(
                (
                    f"def {a}_{b}(self, {c}: int = {self.rng.randrange(100)}) -> str:",
                    f"    {a} = self.{b}.get({c!r}, None)",
                    f"    if {a} is None:  # {self.words(4)}",
                    f"        raise ValueError(f'{b} {{{c}}} missing')",
                    f"    return {a}.{b}({c}, timeout={self.rng.randrange(60)})",
                    f"{a.upper()}_{b.upper()} = {self.rng.randrange(10_000)}",
                )
            )
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    def tool_use(self) -> ContentBlock:
        self.ids += 1
        name = self.rng.choice(("read_file", "read_file", "grep", "bash", "edit_file"))
        tool_input: dict[str, Any] = {"path": self.rng.choice(_PATHS)}
        if name == "bash":
            tool_input = {"command": f"pytest -q -k {self.rng.choice(_IDENTS)}"}
        elif name == "edit_file":
            tool_input["old"] = self.words(6)
            tool_input["new"] = self.words(6)
        return {
            "type": "tool_use",
            "id": f"toolu_{self.ids:07d}",
            "name": name,
            "input": tool_input,
        }

    def tool_result(self, tool_id: str) -> ContentBlock:
        block: ContentBlock = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": self.code(self.rng.randint(1_600, 2_400)),
        }
        if self.rng.random() < 0.05:
            block["is_error"] = True
            block["content"] = f"Traceback: {self.words(5)}\n" + str(block["content"])[:400]
        return block


@dataclass
class History:
    messages: list[Message]
    estimator: TokenEstimator

    @property
    def tokens(self) -> int:
        last = next(m for m in reversed(self.messages) if m.usage is not None)
        assert last.usage is not None
        return last.usage.context_tokens


def build_history(target_messages: int | None, *, until_tokens: int | None = None) -> History:
    """A history ending with an assistant tool_use (the per-turn check appends its result).

    Messages carry cached estimates (tiktoken); assistant replies carry the usage the API would
    have reported: everything before them (system and tools included) plus their own output.
    """
    synth = Synth()
    est = TokenEstimator()
    fixed = est.count_system(SYSTEM) + est.count_tools(TOOLS)
    messages: list[Message] = []
    running = fixed

    def add(message: Message) -> None:
        nonlocal running
        counted = est.estimate(message)
        if counted.role == "assistant":
            assert counted.tokens is not None
            usage = Usage(input_tokens=running, output_tokens=counted.tokens)
            counted = Message(counted.role, counted.content, tokens=counted.tokens, usage=usage)
        assert counted.tokens is not None
        running += counted.tokens
        messages.append(counted)

    def done() -> bool:
        if until_tokens is not None:
            return running >= until_tokens
        assert target_messages is not None
        return len(messages) >= target_messages - 1

    while True:
        add(Message.user(f"Please {synth.words(12)} in {synth.rng.choice(_PATHS)}."))
        for _ in range(synth.rng.randint(2, 6)):  # tool rounds in this user turn
            calls = [synth.tool_use() for _ in range(synth.rng.choice((1, 1, 2, 3)))]
            text: list[ContentBlock] = [{"type": "text", "text": f"I will {synth.words(10)}."}]
            add(Message("assistant", (*text, *calls)))
            if done():
                return History(messages, est)
            add(Message("user", tuple(synth.tool_result(str(c["id"])) for c in calls)))
        add(Message.assistant(f"Done: {synth.words(30)}."))


def fresh_results(history: History, count: int) -> list[Message]:
    """Distinct, not yet estimated tool_result messages answering the pending tool_use."""
    pending = history.messages[-1].tool_use_ids
    synth = Synth(seed=99)
    return [Message("user", tuple(synth.tool_result(tid) for tid in pending)) for _ in range(count)]


# -- timing --------------------------------------------------------------------------------------


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then keep the cyclic GC out of the timed loop (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times: list[float] = []
    with gc_paused():
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1_000)
    return statistics.median(times)


def bench_check(history: History, repeat: int) -> float:
    """Our per-turn check: one new tool_result appended, then ``should_compact``."""
    compacter = ConversationCompacter(
        model_name="claude-sonnet-4-5",
        context_window=1_000_000 if history.tokens > WINDOW_200K else WINDOW_200K,
        counter=history.estimator,
    )
    messages = history.messages
    results = iter(fresh_results(history, repeat + 1))
    compacter.should_compact(messages, system=SYSTEM, tools=TOOLS)  # warm the system/tool cache
    times: list[float] = []
    with gc_paused():
        for _ in range(repeat):
            messages.append(next(results))
            start = time.perf_counter()
            compacter.should_compact(messages, system=SYSTEM, tools=TOOLS)
            times.append((time.perf_counter() - start) * 1_000)
            messages.pop()
    return statistics.median(times)


def bench_naive(history: History, repeat: int) -> float:
    """A loop without cached estimates: re-count everything with tiktoken every turn."""
    est = TokenEstimator()
    messages = [*history.messages, fresh_results(history, 1)[0]]

    def run() -> int:
        return (
            est.count_system(SYSTEM)
            + est.count_tools(TOOLS)
            + sum(est.count_message(m) for m in messages)
        )

    return median_ms(run, repeat)


def langchain_messages(messages: Sequence[Message]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for message in messages:
        if message.role == "assistant":
            calls = [
                {"name": b["name"], "args": b["input"], "id": b["id"], "type": "tool_call"}
                for b in message.content
                if b.get("type") == "tool_use"
            ]
            usage = message.usage or Usage()
            out.append(
                AIMessage(
                    content=message.text,
                    tool_calls=calls,
                    usage_metadata={
                        "input_tokens": usage.input_tokens,
                        "output_tokens": usage.output_tokens,
                        "total_tokens": usage.context_tokens,
                    },
                    response_metadata={"model_provider": "anthropic"},
                )
            )
        elif message.is_tool_result:
            for block in message.content:
                out.append(ToolMessage(content=block["content"], tool_call_id=block["tool_use_id"]))
        else:
            out.append(HumanMessage(content=message.text))
    return out


def bench_langchain(history: History, repeat: int) -> float | None:
    """``SummarizationMiddleware``'s trigger check, as in its ``before_model``."""
    try:
        from langchain.agents.middleware.summarization import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
    except ImportError:
        return None

    class FakeAnthropic(GenericFakeChatModel):
        @property
        def _llm_type(self) -> str:  # selects the counter LangChain uses for Anthropic models
            return "anthropic-chat-fake"

    model = FakeAnthropic(messages=iter([AIMessage(content="summary")]))
    middleware = SummarizationMiddleware(model, trigger=("tokens", 10**9))
    base = langchain_messages(history.messages)
    new = iter(langchain_messages(fresh_results(history, repeat + 1)))
    times: list[float] = []
    with gc_paused():
        for _ in range(repeat):
            messages = [*base, next(new)]
            start = time.perf_counter()
            middleware._ensure_message_ids(messages)
            total = middleware.token_counter(messages)
            middleware._should_summarize(messages, total)
            times.append((time.perf_counter() - start) * 1_000)
    return statistics.median(times)


class ZeroLatencyModel:
    """A summarizer that answers at once with a fixed structured summary (no token counting)."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        text = (
            "## Goal\nfix the client\n## Constraints and decisions\nnone\n## Progress\nmost done\n"
            "## Files read and modified\n- src/app.py\n## Open todos\nnone\n"
            "## Errors and their state\nnone\n## Next steps\nrun the tests"
        )
        self.requests.append(request)
        return ModelResponse(content=({"type": "text", "text": text},), usage=Usage(1_000, 100))


@dataclass
class CompactionFigures:
    label: str
    ms: float
    ratio: float
    strategy: str
    calls: int


def time_compaction(
    label: str,
    strategy: str,
    make_model: Callable[[], Any],
    messages: list[Message],
    counter: TokenEstimator,
    repeat: int,
) -> CompactionFigures:
    """Median time of ``compact`` with a fresh compacter (and model) per run."""
    times: list[float] = []
    outcome: CompactionOutcome | None = None
    with gc_paused():
        for _ in range(repeat):
            model = make_model()
            compacter = ConversationCompacter(
                model_name="claude-sonnet-4-5",
                context_window=WINDOW_200K,
                model=model,
                settings=CompactionSettings(strategy=strategy),  # type: ignore[arg-type]
                counter=counter,
            )
            start = time.perf_counter()
            steps = compacter.steps("bench", messages, system=SYSTEM, tools=TOOLS)
            outcome = drive(steps, compacter.runtime.perform)
            times.append((time.perf_counter() - start) * 1_000)
            assert outcome.transition is not None, outcome.explanation
    assert outcome is not None and outcome.transition is not None
    result, decision = outcome.transition, outcome.decision
    return CompactionFigures(
        label,
        statistics.median(times),
        result.summary.tokens_after / decision.trigger_tokens,
        result.summary.strategy,
        len(model.requests) if model is not None else 0,
    )


def bench_compaction(repeat: int) -> tuple[History, list[CompactionFigures]]:
    """Compaction at the 85 %-of-200k trigger (tail budget and summarizer input included)."""
    history = build_history(None, until_tokens=int(WINDOW_200K * 0.85) + 2_000)
    messages = [*history.messages, fresh_results(history, 1)[0]]
    validate_messages(messages, allow_pending_tool_use=False)
    shared = history.estimator
    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("summarize, no model (digest)", "summarize", lambda: None),
        ("summarize, zero-latency model", "summarize", ZeroLatencyModel),
        ("auto, no model (prune attempt, then digest)", "auto", lambda: None),
        ("summarize, FunctionModel (counts its input)", "summarize",
         lambda: FunctionModel(lambda r: ZeroLatencyModel().complete(r).text)),
    ]  # fmt: skip
    figures = [
        time_compaction(label, strategy, make_model, messages, shared, repeat)
        for label, strategy, make_model in cases
    ]
    return history, figures


# -- report ---------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    check_repeat, naive_repeat, lc_repeat, compact_repeat = (
        (50, 3, 20, 5) if args.quick else (400, 7, 100, 31)
    )

    print(f"Python {sys.version.split()[0]}; medians over {check_repeat} (check), "
          f"{naive_repeat} (naive), {lc_repeat} (LangChain), "
          f"{compact_repeat} (compaction) runs\n")  # fmt: skip
    print("| messages | history tokens | per-turn check (ours) | LangChain trigger check "
          "| naive tiktoken re-count |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|")
    checks: list[float] = []
    for size in SIZES:
        history = build_history(size)
        ours = bench_check(history, check_repeat)
        checks.append(ours)
        lc = bench_langchain(history, lc_repeat)
        naive = bench_naive(history, naive_repeat)
        lc_cell = "not installed" if lc is None else f"{lc:.2f} ms"
        print(f"| {len(history.messages) + 1:,} | {history.tokens:,} | {ours:.3f} ms | {lc_cell} "
              f"| {naive:.1f} ms |")  # fmt: skip

    at_trigger, figures = bench_compaction(compact_repeat)
    print(f"\nCompaction at the 85 %-of-200k trigger ({len(at_trigger.messages) + 1:,} messages, "
          f"{at_trigger.tokens:,} reported tokens before the last tool result):\n")  # fmt: skip
    print(
        "| case | result strategy | summarizer calls | time (median) | tokens after / at trigger |"
    )
    print("|---|---|---:|---:|---:|")
    for f in figures:
        print(f"| {f.label} | {f.strategy} | {f.calls} | {f.ms:.2f} ms | {f.ratio:.3f} |")

    flat = max(checks) <= 3 * min(checks)
    spec_cases = figures[:2]  # the digest and the zero-latency summarizer
    print("\nTargets:")
    print(f"- per-turn check median <= {TARGET_CHECK_MS} ms at every size: "
          f"{verdict(max(checks) <= TARGET_CHECK_MS)} (max {max(checks):.3f} ms)")  # fmt: skip
    print(f"- per-turn check flat in history length (max <= 3x min): {verdict(flat)} "
          f"({min(checks):.3f}–{max(checks):.3f} ms)")  # fmt: skip
    worst = max(f.ms for f in spec_cases)
    print(f"- compaction without model latency (digest, zero-latency model) <= "
          f"{TARGET_COMPACT_MS} ms: {verdict(worst <= TARGET_COMPACT_MS)} "
          f"(worst {worst:.2f} ms)")  # fmt: skip
    auto, function_model = figures[2], figures[3]
    print(f"  - for information: the default 'auto' strategy {auto.ms:.2f} ms "
          f"({verdict(auto.ms <= TARGET_COMPACT_MS)}): it first tries pruning, which tokenizes "
          "every pruned tool_result message; here pruning lands just above the target ratio, "
          "so the digest runs too")  # fmt: skip
    print(f"  - for information: FunctionModel {function_model.ms:.2f} ms: the test double "
          "tokenizes its whole input to report plausible usage (model-side cost)")  # fmt: skip
    worst_ratio = max(f.ratio for f in figures)
    print(f"- tokens after / tokens at trigger <= {TARGET_RATIO}: "
          f"{verdict(worst_ratio <= TARGET_RATIO)} (worst {worst_ratio:.3f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
