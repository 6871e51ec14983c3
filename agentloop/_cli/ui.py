"""The terminal face of a running agent: replies, tool activity, the compaction spinner and
notices (:class:`TerminalUI`), the after-turn context line and the ``/context`` report."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TextIO

from agentloop._loop.agent_loop import LoopEvents

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._core.context import CompactionDecision
    from agentloop._core.model import ModelResponse
    from agentloop._core.results import CompactionTransition
    from agentloop._core.tool import ToolResult


def notice(transition: CompactionTransition) -> str:
    """The one line a user sees on every compaction."""
    summary = transition.summary
    return (
        f"Conversation compacted: {summary.original_message_count} messages → new session "
        f"{transition.new_session_id[:8]} ({summary.tokens_before:,} → {summary.tokens_after:,} "
        "tokens)"
    )


class TerminalUI(LoopEvents):
    """Replies to ``out``; notices, tool activity and the spinner to ``err``."""

    def __init__(self, out: TextIO, err: TextIO, *, tty: bool) -> None:
        self.out = out
        self.err = err
        self.tty = tty
        self._wrote_text = False
        self._spinner: threading.Event | None = None

    def on_text(self, delta: str) -> None:
        self.out.write(delta)
        self.out.flush()
        self._wrote_text = True

    def on_reply(self, response: ModelResponse | None) -> None:
        """End the streamed reply's line (also called with None after a failed turn)."""
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False

    # Tool inputs are the model's JSON arguments: the loop's events type them so.
    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        detail = next(
            (str(tool_input[k]) for k in ("command", "path", "pattern") if k in tool_input), ""
        )
        self.err.write(f"  ⏺ {name}{f' {detail[:80]}' if detail else ''}\n")
        self.err.flush()

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        if result.is_error:
            first = result.content.strip().splitlines()[0] if result.content.strip() else "error"
            self.err.write(f"    ✗ {first[:160]}\n")
            self.err.flush()

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        if not self.tty:
            return
        stop = threading.Event()
        self._spinner = stop

        def spin() -> None:
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            index = 0
            while not stop.wait(0.1):
                self.err.write(f"\r{frames[index % len(frames)]} Compacting conversation…")
                self.err.flush()
                index += 1
            self.err.write("\r\033[K")
            self.err.flush()

        threading.Thread(target=spin, daemon=True).start()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.set()
            self._spinner = None

    def on_transition(self, transition: CompactionTransition) -> None:
        self._stop_spinner()
        self.err.write(notice(transition) + "\n")
        for warning in transition.summary.warnings:
            self.err.write(f"  warning: {warning}\n")
        if transition.summary.fallback_reason:
            reason = transition.summary.fallback_reason
            self.err.write(f"  note: summary built without a model: {reason}\n")
        self.err.flush()

    def on_compaction_skipped(self, reason: str) -> None:
        self._stop_spinner()
        self.err.write(f"Compaction skipped: {reason}\n")
        self.err.flush()


def indicator(decision: CompactionDecision | None, *, enabled: bool) -> str:
    """The quiet after-turn line; it uses the same numbers as the trigger."""
    if decision is None:
        return ""
    window = decision.usage.window
    used = decision.usage.fraction
    if not enabled:
        return f"context {used:.0%} · automatic compaction off"
    return f"context {used:.0%} · compacts at {decision.trigger_tokens / window:.0%}"


def context_report(agent: CodingAgent) -> str:
    """The ``/context`` report: usage, trigger, decision, window, calibration, session."""

    session = f"Session: {agent.session_id} ({len(agent.loop.messages)} messages)"
    decision = agent.loop.context()
    if decision is None:
        return session
    usage = decision.usage
    compacter = agent.compacter
    calibration = compacter.calibration
    lines = [
        f"Context: {usage.tokens:,} / {usage.window:,} tokens ({usage.fraction:.0%}), "
        f"measured from {usage.source}",
        f"Compaction: triggers at {decision.trigger_tokens:,} tokens "
        f"({decision.trigger_tokens / usage.window:.0%}; threshold {decision.threshold:.0%})"
        + ("" if compacter.settings.enabled else " — automatic compaction is disabled"),
        f"Decision: {decision.reason}",
        f"Window: {usage.window:,} tokens (source: {compacter.window_source}); "
        f"replies up to {compacter.max_output_tokens:,} tokens",
    ]
    if calibration is not None:
        lines.append(
            f"Calibration: API tokens ≈ {calibration.ratio:.2f} × local estimate "
            f"({calibration.samples} samples)"
        )
    lines.append(session)
    return "\n".join(lines)
