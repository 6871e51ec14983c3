"""Shared pieces of the compaction benchmarks: timing, zero-latency models, histories.

Not a benchmark itself: ``bench_compaction.py`` and its sections import it. Histories come
from the project's transcript corpus (``tests/transcripts``) and, for the P3 figure,
from the synthetic history the first compaction benchmark used. Every message carries its
cached token estimate (``Message.with_tokens``), as the loop stores them.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from fake_api import FakeAnthropicServer  # noqa: E402
from transcripts import Transcript  # noqa: E402

from agentloop import Message, TokenEstimator, Usage, as_messages, to_params  # noqa: E402
from agentloop._core.values.messages import ContentBlock  # noqa: E402
from agentloop._core.values.model import ModelRequest, ModelResponse, TextCallback  # noqa: E402
from agentloop._core.values.settings import StrategyName  # noqa: E402

MODEL = "claude-sonnet-4-5"
STRATEGIES: tuple[StrategyName, ...] = ("auto", "summarize", "sliding_window", "prune")
"""The strategies that compact locally (what the compaction benchmarks compare)."""
WINDOW_200K = 200_000
TRIGGER_FILL = 0.88
"""Histories for the compaction tables are grown to this fraction of the window as the test
server counts it: past the 85 % trigger, as when an automatic compaction fires."""
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SUMMARY = (
    "## Goal\nKeep the shop backend healthy and finish the current task.\n\n"
    "## Constraints and decisions\nsmall edits; run the tests after every change\n\n"
    "## Progress\nmost of the work is done; see the recent messages\n\n"
    "## Files read and modified\n- src/app/db.py\n- src/app/worker.py\n\n"
    "## Open todos\nnone\n\n## Errors and their state\nnone open\n\n"
    "## Next steps\nrun the tests and report"
)


# -- timing ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then keep the cyclic GC out of the timed region (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True)
class Timing:
    """Milliseconds of repeated runs."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]

    def cell(self) -> str:
        """``median / p95`` in ms."""
        return f"{ms(self.median)} / {ms(self.p95)}"


def ms(value: float) -> str:
    return (
        f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"
    )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> None:
    """A markdown table; ``align`` is one letter per column (``l`` or ``r``, default ``r``)."""
    marks = [":---" if (align[i : i + 1] or "r") == "l" else "---:" for i in range(len(header))]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(marks) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


# -- zero-latency models (the public model seam) --------------------------------------------------


class InstantModel:
    """A conversation model that answers at once: a ``read_file`` call for a request, a short
    text reply after the tool result. Its usage figure is kept from the messages' cached
    estimates, summed over what was appended since its previous request (a model double must
    not re-tokenize the history, or the benchmark measures the double)."""

    def __init__(self, fixed_tokens: int = 0) -> None:
        self.fixed_tokens = fixed_tokens
        self._seen = 0
        self._sum = 0
        self._ids = itertools.count(1)

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        messages = request.messages
        if len(messages) < self._seen:
            self._seen = self._sum = 0
        self._sum += sum(m.tokens or 0 for m in messages[self._seen :])
        self._seen = len(messages)
        text: ContentBlock = {"type": "text", "text": "Done: the module reads cleanly."}
        content: tuple[ContentBlock, ...] = (text,)
        stop = "end_turn"
        if not messages[-1].is_tool_result:
            call: ContentBlock = {
                "type": "tool_use",
                "id": f"toolu_bench_{next(self._ids):07d}",
                "name": "read_file",
                "input": {"path": "src/app/db.py"},
            }
            content, stop = ({"type": "text", "text": "Reading the module."}, call), "tool_use"
        if on_text is not None:
            on_text(str(content[0]["text"]))
        usage = Usage(input_tokens=self.fixed_tokens + self._sum, output_tokens=24)
        return ModelResponse(content=content, usage=usage, stop_reason=stop, model=request.model)


class ZeroLatencySummarizer:
    """Answers a summary request at once with a fixed structured summary; cannot count."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        self.calls += 1
        return ModelResponse(
            content=({"type": "text", "text": SUMMARY},), usage=Usage(1_000, 150), model=MODEL
        )


class ServerCountingSummarizer(ZeroLatencySummarizer):
    """The zero-latency summarizer whose ``count_tokens`` is the test server's count (what the
    Messages API's ``count_tokens`` endpoint would answer), without HTTP."""

    def __init__(self, server: FakeAnthropicServer) -> None:
        super().__init__()
        self.server = server
        self.counts = 0

    def count_tokens(self, request: ModelRequest) -> int:
        self.counts += 1
        return self.server.count_input_tokens(request_body(request))


def request_body(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body of a request (what ``count_tokens`` receives)."""
    body: dict[str, Any] = {"model": request.model, "messages": to_params(list(request.messages))}
    if request.system.strip():
        body["system"] = request.system
    if request.tools:
        body["tools"] = [dict(tool) for tool in request.tools]
    return body


# -- histories from the transcript corpus ---------------------------------------------------------


@dataclass
class Grown:
    """A transcript cut where the test server's count first reaches a target."""

    transcript: Transcript
    params: list[dict[str, Any]]
    """The messages as the API takes them, ending with a user message (a model call is next)."""
    prefix_counts: list[int]
    """``prefix_counts[i]``: the server's count of a request holding ``params[:i]``."""

    def body(self, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return self.transcript.body(messages=self.params if messages is None else messages)


def grow(
    build: Callable[[int, int], Transcript], seed: int, server: FakeAnthropicServer, tokens: int
) -> Grown:
    """The shortest prefix of ``build(seed, size)`` (size doubled until it is long enough)
    ending with a user message whose count reaches ``tokens``."""
    size = 160
    while True:
        transcript = build(seed, size)
        running = server.count_input_tokens(transcript.body(messages=[]))
        counts = [running]
        for index, message in enumerate(transcript.messages):
            running += server.count_message_tokens([message])
            counts.append(running)
            if running >= tokens and message["role"] == "user" and index >= 2:
                return Grown(transcript, transcript.messages[: index + 1], counts)
        size *= 2


def anchored(grown: Grown, server: FakeAnthropicServer, estimator: TokenEstimator) -> list[Message]:
    """The history as the loop keeps it: cached estimates on every message, and on the last
    reply the usage the API reported for the request that produced it."""
    messages = [m.with_tokens(estimator.count_message(m)) for m in as_messages(grown.params)]
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    prompt = server.count_input_tokens(grown.body(grown.params[:last]))
    output = server.count_output_tokens(grown.params[last]["content"])
    messages[last] = replace(messages[last], usage=Usage(input_tokens=prompt, output_tokens=output))
    return messages


def retagged(message: Message, tag: int) -> Message:
    """The message with every tool id made unique for copy ``tag`` of a tiled history."""
    if tag == 0:
        return message
    blocks: list[ContentBlock] = []
    for block in message.content:
        if "id" in block or "tool_use_id" in block:
            block = dict(block)
            for key in ("id", "tool_use_id"):
                if key in block:
                    block[key] = f"{block[key]}_{tag}"
        blocks.append(block)
    return replace(message, content=tuple(blocks))


def tiled_history(
    transcript: Transcript, estimator: TokenEstimator, size: int
) -> tuple[list[Message], list[int]]:
    """At least ``size`` messages: the transcript's finished tasks repeated (tool ids made
    unique), with cached estimates; and the indices after which the history may stop (an
    assistant reply that calls no tool: the state between two user turns)."""
    messages = as_messages(transcript.messages)
    end = max(i for i, m in enumerate(messages) if m.role == "assistant" and not m.tool_use_ids)
    piece = [m.with_tokens(estimator.count_message(m)) for m in messages[: end + 1]]
    out: list[Message] = []
    stops: list[int] = []
    for tag in itertools.count():
        for message in piece:
            out.append(retagged(message, tag))
            if message.role == "assistant" and not message.tool_use_ids:
                stops.append(len(out))
        if len(out) >= size:
            return out, stops
    raise AssertionError("unreachable")


# -- the synthetic history of the first benchmark (the P3 figure) ---------------------------------

SYNTH_SYSTEM = "You are a careful coding agent working in a Python repository. " * 20
SYNTH_TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"{name} tool for the workspace",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("read_file", "write_file", "edit_file", "bash", "grep")
]
_IDENTS = (
    "config", "session", "retry", "parser", "token", "window", "request", "response", "cache",
    "handler", "router", "schema", "client", "result", "value", "index", "buffer", "logger",
)  # fmt: skip
_PATHS = ("src/app.py", "src/db.py", "src/http/client.py", "tests/test_api.py", "README.md")


class Synth:
    """Deterministic generator of coding-agent messages with ~2 KB tool results."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.ids = 0

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(_IDENTS) for _ in range(n))

    def code(self, chars: int) -> str:
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


def synthetic_history(until_tokens: int, estimator: TokenEstimator) -> list[Message]:
    """Tasks of 2-6 tool rounds until ``until_tokens``; every reply carries the usage the API
    would have reported; the history ends with the tool results a model call would answer."""
    synth = Synth()
    running = estimator.count_system(SYNTH_SYSTEM) + estimator.count_tools(SYNTH_TOOLS)
    messages: list[Message] = []

    def add(message: Message) -> None:
        nonlocal running
        tokens = estimator.count_message(message)
        if message.role == "assistant":
            message = replace(message, usage=Usage(input_tokens=running, output_tokens=tokens))
        running += tokens
        messages.append(message.with_tokens(tokens))

    while True:
        add(Message.user(f"Please {synth.words(12)} in {synth.rng.choice(_PATHS)}."))
        for _ in range(synth.rng.randint(2, 6)):
            calls = [synth.tool_use() for _ in range(synth.rng.choice((1, 1, 2, 3)))]
            add(
                Message(
                    "assistant", ({"type": "text", "text": f"I will {synth.words(10)}."}, *calls)
                )
            )
            add(Message("user", tuple(synth.tool_result(str(c["id"])) for c in calls)))
            if running >= until_tokens:
                return messages
        add(Message.assistant(f"Done: {synth.words(30)}."))
