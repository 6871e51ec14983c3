"""What the user waits for at the trigger: with a usable summary prepared in the
background, no refresh is waited for and no summary request is made; a prepared summary that
covered too little is brought up to date in at most one request.

No timing: the loop runs on a runtime whose background is in the test's hands (a request
"in flight" stays so until the test lets it answer), and what happens between a compaction's
start and the child taking over is counted: waits for the background and summary requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from support.loop_scripts import filler

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ConversationCompacter,
    LoopEvents,
    ModelResponse,
    Usage,
)
from agentloop._core.compaction.effects import (
    CallModel,
    CancelBackground,
    CollectBackground,
    Effect,
    StartBackground,
)
from agentloop._core.compaction.results import CompactionTransition
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.model import ModelRequest, TextCallback
from agentloop._loop.drive import Runtime

MODEL = "claude-sonnet-4-6"
WINDOW = 40_000
PREPARED = "## Goal\nthe deploy key is orchid-7\n\n## Progress\nprepared in the background"
REFRESHED = "## Goal\nthe deploy key is orchid-7\n\n## Progress\nrefreshed in the background"
UPDATED = "## Goal\nthe deploy key is orchid-7\n\n## Progress\nbrought up to date"


def is_summary(request: ModelRequest) -> bool:
    return request.metadata.get("purpose") == "summary"


class Double:
    """Answers at once. A conversation request reports the size of what it was sent (the
    compacter's own estimate, so the loop's measure is exact); a summary request gets
    ``PREPARED`` (the first sent in the background), ``REFRESHED`` (a later one) or
    ``UPDATED`` (one made at the trigger)."""

    def __init__(self, reply_words: int) -> None:
        self.reply_words = reply_words
        self.compacter: ConversationCompacter | None = None
        self.summaries: list[ModelRequest] = []

    def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if is_summary(request):
            self.summaries.append(request)
            background = [r for r in self.summaries if r.metadata.get("background")]
            text = UPDATED
            if request.metadata.get("background"):
                text = PREPARED if len(background) == 1 else REFRESHED
            return ModelResponse(({"type": "text", "text": text},), Usage(1_000, 50), model=MODEL)
        assert self.compacter is not None
        sent = self.compacter.fixed_tokens(request.system, [dict(t) for t in request.tools])
        sent += sum(self.compacter.count(m) for m in request.messages)
        reply = filler("answer", self.reply_words)
        return ModelResponse(({"type": "text", "text": reply},), Usage(sent, 50), model=MODEL)


@dataclass
class AtTrigger:
    waits: int = 0
    """Times the compaction waited for the background request."""
    summary_calls: int = 0
    """Summary requests made on the compaction's critical path."""
    ready_tokens: int | None = None
    """The context's size when the ready summary was sent (None: no summary was ready)."""
    in_flight: bool = False


class HeldBackground(Runtime):
    """The loop's runtime with a background in the test's hands: the first background request
    answers as soon as it is collected, every later one (a refresh) stays in flight while
    ``hold`` is set, and a wait for it is counted (then it answers, so the loop goes on)."""

    hold: bool = True
    pending: StartBackground | None = None
    started: int = 0
    trigger: AtTrigger | None = None

    def perform(self, effect: Effect[Any]) -> object:
        if isinstance(effect, StartBackground):
            assert self.pending is None, "a second background request while one is in flight"
            self.pending, self.started = effect, self.started + 1
            return None
        if isinstance(effect, CollectBackground):
            pending = self.pending
            if pending is None:
                return None
            if self.started > 1 and self.hold:
                if not effect.wait:
                    return None
                if self.trigger is not None:
                    self.trigger.waits += 1
            self.pending = None
            assert isinstance(pending.model, Double)
            return pending.model.complete(pending.request)
        if isinstance(effect, CancelBackground):
            self.pending = None
            return None
        if isinstance(effect, CallModel) and self.trigger is not None:
            self.trigger.summary_calls += is_summary(effect.request)
        return super().perform(effect)


@dataclass
class Triggers(LoopEvents):
    runtime: HeldBackground
    compacter: ConversationCompacter
    seen: list[AtTrigger] = field(default_factory=list)
    transitions: list[CompactionTransition] = field(default_factory=list)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        ready = self.compacter.prepared
        now = AtTrigger(ready_tokens=None if ready is None else ready.tokens)
        now.in_flight = self.runtime.pending is not None
        self.runtime.trigger = now
        self.seen.append(now)

    def on_transition(self, transition: CompactionTransition) -> None:
        self.runtime.trigger = None
        self.runtime.hold = False  # what was in flight may answer now (it is stale)
        self.transitions.append(transition)


def held_loop(reply_words: int = 400) -> tuple[AgentLoop, Double, Triggers]:
    double = Double(reply_words)
    compacter = ConversationCompacter(
        model=double,
        model_name=MODEL,
        context_window=WINDOW,
        max_output_tokens=512,
        settings=CompactionSettings(strategy="summarize", prepare_at=0.65),
    )
    double.compacter = compacter
    loop = AgentLoop(model=double, model_name=MODEL, compacter=compacter, max_tokens=512)
    runtime = HeldBackground(**{f.name: getattr(loop.runtime, f.name) for f in fields(Runtime)})
    loop.runtime = runtime
    triggers = Triggers(runtime, compacter)
    loop.subscribe(triggers)
    return loop, double, triggers


def test_a_usable_prepared_summary_is_applied_without_waiting_for_the_refresh() -> None:
    loop, double, triggers = held_loop()
    first = "request 0: the deploy key is orchid-7"
    turn = 0
    while not triggers.transitions and turn < 40:
        loop.run_turn(first if turn == 0 else filler(f"request {turn}", 900))
        turn += 1
    loop.run_turn("one more request")  # the refresh answers now: too late, it is not applied
    loop.close()

    assert len(triggers.transitions) == 1
    (seen,) = triggers.seen
    compacter = loop.compacter
    assert compacter is not None
    trigger = compacter.trigger_tokens
    summary = triggers.transitions[0].summary
    # The scene: a refresh was in flight, the ready summary far enough behind that the old
    # rule waited for the refresh (more than a quarter of the trigger), yet usable.
    assert seen.in_flight and seen.ready_tokens is not None
    assert summary.tokens_before - seen.ready_tokens > 0.25 * trigger
    # The user waited for nothing: no wait for the background, no summary request.
    assert (seen.waits, seen.summary_calls) == (0, 0)
    assert all(r.metadata.get("background") for r in double.summaries)
    assert summary.prepared and summary.summary == PREPARED
    assert summary.tokens_after <= trigger // 2 + compacter.fixed_tokens("", [])
    # Only ever one background request at a time (the runtime asserts it), and the refresh
    # that answered after the swap was not applied.
    assert "prepared in the background" in loop.messages[0].text
    assert "refreshed" not in loop.messages[0].text and compacter.prepared is None


def test_a_prepared_summary_that_covered_too_little_costs_one_request_at_most() -> None:
    loop, double, triggers = held_loop(reply_words=200)
    loop.run_turn("request 0: the deploy key is orchid-7")
    turn = 1
    compacter = loop.compacter
    assert compacter is not None
    while compacter.prepared is None and turn < 40:  # up to the first prepared summary
        loop.run_turn(filler(f"request {turn}", 900))
        turn += 1
    assert compacter.prepared is not None and not triggers.transitions
    # Far more than the prepared summary covers arrives at once (a long paste, tool output).
    loop.run_turn(filler("a long request", 16_000))
    loop.close()

    assert triggers.transitions
    seen, summary = triggers.seen[0], triggers.transitions[0].summary
    assert seen.ready_tokens is not None and not seen.in_flight
    assert any("covered too little" in warning for warning in summary.warnings)
    # One request, and it continues from the prepared text (what it covers is not redone).
    assert seen.summary_calls == 1
    (request,) = [r for r in double.summaries if not r.metadata.get("background")]
    assert "prepared in the background" in str([m.content for m in request.messages])
    assert summary.prepared and summary.summary == UPDATED
    assert summary.summary_calls == 2  # the prepared one and the one that brought it up to date
