"""What a compaction holds the user up for, traced in-process (``bench_latency``, ``bench_cost``).

Not a benchmark itself. A loop's runtime is swapped for a :class:`TracedRuntime`, which notes,
between a compaction's start and the child taking over, every wait for the summary prepared in
the background, every summary request and every token count: what the user waits for at the
trigger, on either path (agentloop's own summaries, or the API's on-demand compaction).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import bench_support  # noqa: F401  (puts the repository and tests/ on sys.path)
from fake_api import FakeAnthropicServer
from transcripts import Transcript

from agentloop import AgentLoop, LoopEvents
from agentloop._core.compaction.effects import CallModel, CollectBackground, CountTokens, Effect
from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.measuring.cache import CacheMode
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.model import ModelRequest
from agentloop._core.values.settings import StrategyName
from agentloop._loop.drive import Runtime

CLIENT_MODEL = "claude-sonnet-4-5"
"""A model without on-demand compaction: agentloop writes its summaries (the client path)."""
ON_DEMAND_MODEL = "claude-sonnet-4-6"
"""A model with on-demand compaction: the API writes its summaries (the on-demand path)."""
PATHS = {"client": CLIENT_MODEL, "on-demand": ON_DEMAND_MODEL}


@dataclass
class AtTrigger:
    """What one compaction did between its start and the child taking over."""

    in_flight: bool
    """A summary request was running in the background when the trigger came."""
    stall: float = 0.0
    """Seconds the user waited (multiplied back by the run's scale)."""
    waited: float = 0.0
    """Of the stall, seconds spent waiting for the background request."""
    summary_calls: int = 0
    """Summary requests made there and then (the user waits for each)."""
    counts: int = 0
    """Token counts asked of the API there and then."""
    prepared: bool = False
    """The child was made from a summary prepared in the background."""


def is_summary(request: ModelRequest) -> bool:
    """A summary request: agentloop's own or the API's (on-demand compaction)."""
    compaction = getattr(request, "compaction", None)  # older trees: no on-demand path
    return request.metadata.get("purpose") == "summary" or compaction is not None


def is_summary_body(body: Mapping[str, Any]) -> bool:
    """A summary request as the server saw it."""
    from support.loop_scripts import is_summary_request

    return "compaction" in body or is_summary_request(body)


class TracedRuntime(Runtime):
    """A loop's runtime that notes what the compaction under way (``active``) waits for."""

    active: AtTrigger | None = None

    def perform(self, effect: Effect[Any]) -> object:
        start = time.perf_counter()
        try:
            return super().perform(effect)
        finally:
            took, now = time.perf_counter() - start, self.active
            if now is not None:
                if isinstance(effect, CollectBackground) and effect.wait:
                    now.waited += took
                elif isinstance(effect, CallModel) and is_summary(effect.request):
                    now.summary_calls += 1
                elif isinstance(effect, CountTokens):
                    now.counts += 1


@dataclass
class TriggerEvents(LoopEvents):
    """Times each compaction from its start to the transition, on a :class:`TracedRuntime`."""

    runtime: TracedRuntime
    scale: float = 1.0
    done: list[AtTrigger] = field(default_factory=list)
    transitions: list[CompactionTransition] = field(default_factory=list)
    started: float = 0.0

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        self.started = time.perf_counter()
        background = self.runtime.background
        self.runtime.active = AtTrigger(background is not None and background.busy)

    def on_transition(self, transition: CompactionTransition) -> None:
        now, self.runtime.active = self.runtime.active, None
        self.transitions.append(transition)
        if now is not None:
            now.stall = (time.perf_counter() - self.started) * self.scale
            now.waited *= self.scale
            now.prepared = transition.summary.prepared
            self.done.append(now)

    def on_compaction_skipped(self, reason: str) -> None:
        self.runtime.active = None

    def on_warning(self, message: str) -> None:
        pass


def traced(loop: AgentLoop, scale: float = 1.0) -> TriggerEvents:
    """Put ``loop`` on a :class:`TracedRuntime` (a copy of its own) and listen to it."""
    runtime = TracedRuntime(**{f.name: getattr(loop.runtime, f.name) for f in fields(Runtime)})
    loop.runtime = runtime
    events = TriggerEvents(runtime, scale)
    loop.subscribe(events)
    return events


@contextlib.contextmanager
def on_demand_delay(seconds: float) -> Iterator[None]:
    """The test server's on-demand compactions answered after ``seconds`` (it answers them at
    once; the API takes as long as any summary)."""
    import fake_api.handler as handler
    from fake_api import Reply

    summarize = getattr(handler, "summarize", None)  # not exported: patched for a run
    if summarize is None:  # a test server without on-demand compaction
        yield
        return

    def slow(fake: Any, body: Any) -> Any:
        reply = summarize(fake, body)
        return replace(reply, delay=seconds) if isinstance(reply, Reply) else reply

    setattr(handler, "summarize", slow)  # noqa: B010
    try:
        yield
    finally:
        setattr(handler, "summarize", summarize)  # noqa: B010


@dataclass
class Replayed:
    """One transcript replayed: the server's bills and what each compaction did."""

    bills: list[Any]
    transitions: list[CompactionTransition]
    triggers: list[AtTrigger]

    @property
    def summary_bills(self) -> list[Any]:
        return [b for b in self.bills if is_summary_body(b.body)]


def replay_traced(
    server: FakeAnthropicServer,
    transcript: Transcript,
    *,
    model_name: str,
    window: int,
    summary: Callable[[dict[str, Any]], str],
    strategy: StrategyName = "summarize",
    prepare_at: float | None,
    cache: CacheMode = "conversation",
    reply_delay: float = 0.0,
    summary_delay: float = 0.0,
    scale: float = 1.0,
) -> Replayed:
    """The transcript's turns through ``AgentLoop`` on the real SDK (as ``support.replay``
    does, on ``model_name``), every compaction traced; delays already divided by ``scale``."""
    from support.replay import Replayer, recorded_results, user_turns

    from agentloop import (
        AnthropicModel,
        CompactionSettings,
        ConversationCompacter,
        FunctionTool,
        ToolResult,
    )

    server.handler = Replayer(transcript, summary, reply_delay, summary_delay)
    results = recorded_results(transcript.messages)

    def recorded(_input: Mapping[str, Any]) -> ToolResult:
        return results.popleft() if results else ToolResult("(no output)")

    tools = [
        FunctionTool(t["name"], t.get("description", ""), t["input_schema"], recorded)
        for t in transcript.tools
        if "input_schema" in t
    ]
    model = AnthropicModel(
        api_key="test-key",
        base_url=server.base_url,
        max_retries=0,
        prompt_cache=cache,
    )
    settings = CompactionSettings(strategy=strategy, prepare_at=prepare_at)
    compacter = ConversationCompacter(
        model=model, model_name=model_name, context_window=window, settings=settings
    )
    loop = AgentLoop(
        model=model,
        model_name=model_name,
        compacter=compacter,
        system=transcript.system,
        tools=tools,
        max_tool_rounds=200,
    )
    events = traced(loop, scale)
    with on_demand_delay(summary_delay):
        try:
            for turn in user_turns(transcript.messages):
                loop.run_turn(turn)
        finally:
            loop.close()
    if server.violations:
        raise SystemExit(f"the test server saw broken requests: {server.violations[:3]}")
    return Replayed(list(server.bills), events.transitions, events.done)
