"""The terminal face of a running agent: replies, tool activity, the spinners and the compaction
notices (:class:`TerminalUI`), the after-turn context line and the ``/context`` report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from agentloop._cli.spinner import Spinner
from agentloop._loop.agent_loop import LoopEvents

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._core.context import CompactionDecision
    from agentloop._core.messages import Usage
    from agentloop._core.model import ModelResponse
    from agentloop._core.results import CompactionPlan, CompactionTransition
    from agentloop._core.tool import ToolResult
    from agentloop._loop.status import CompactionStatus

THINKING = "Thinking…"
COMPACTING = "Compacting conversation…"


def notice(transition: CompactionTransition) -> str:
    """The one line a user sees on every compaction. A figure the API counted is shown as it
    is; one that is (partly) a local estimate carries a ``~``."""
    summary = transition.summary
    before = _figure(summary.tokens_before, summary.tokens_before_source)
    after = _figure(summary.tokens_after, summary.tokens_after_source)
    return (
        f"Conversation compacted: {summary.original_message_count} messages → new session "
        f"{transition.new_session_id[:8]} ({before} → {after} tokens)"
    )


def _figure(tokens: int, source: str) -> str:
    return f"{tokens:,}" if source == "api" else f"~{tokens:,}"


class TerminalUI(LoopEvents):
    """Replies to ``out``; notices, tool activity and the spinners to ``err``.

    ``stream`` shows the reply as it arrives (interactive); without it nothing of the reply is
    written here and the caller prints the final answer once it is stored (``-p``). The spinner
    runs only when ``tty``; every write stops it first, and :meth:`interrupted` stops it after
    Ctrl-C, so it never outlives the work it stands for.
    """

    def __init__(self, out: TextIO, err: TextIO, *, tty: bool, stream: bool = True) -> None:
        self.out = out
        self.err = err
        self.tty = tty
        self.stream = stream
        self.spinner = Spinner(err, enabled=tty)
        self.replies = 0
        """How many model replies were received (a run whose model never answered stores
        nothing worth keeping)."""
        self.usage: list[Usage] = []
        self._wrote_text = False

    # -- a turn ------------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """The request is on its way: show that something happens until the first token."""
        self.usage = []
        self.spinner.start(THINKING)

    def end_turn(self) -> None:
        """The turn ended (any way): no spinner, the reply's line closed."""
        self.spinner.stop()
        self._end_line()

    def interrupted(self) -> None:
        """Ctrl-C during a turn or a compaction."""
        self.end_turn()

    def on_retry(self, attempt: int, limit: int, reason: str) -> None:
        """The model call failed and is tried again (connection refused, overloaded...)."""
        self._say(f"  retrying ({attempt}/{limit}): {reason}")
        self.spinner.start(THINKING)

    # -- the loop's events -------------------------------------------------------------------

    def on_text(self, delta: str) -> None:
        if not self.stream:
            return
        self.spinner.stop()
        self._wrote_text = True  # first: a Ctrl-C during the write still ends the line later
        self.out.write(delta)
        self.out.flush()

    def on_reply_incomplete(self, reason: str) -> None:
        """What was streamed is not an answer: say so, and that it is asked again."""
        self.spinner.stop()
        self._end_line()
        self._say(f"  (the reply broke off: {reason}; asking again — the part above is not kept)")

    def on_reply(self, response: ModelResponse | None) -> None:
        """End the streamed reply's line (also called with None after a failed turn)."""
        if response is not None:
            self.replies += 1
            self.usage.append(response.usage)
        self.spinner.stop()
        self._end_line()

    # Tool inputs are the model's JSON arguments: the loop's events type them so.
    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        detail = next(
            (str(tool_input[k]) for k in ("command", "path", "pattern") if k in tool_input), ""
        )
        detail = " ".join(detail.split())
        self._say(f"  ⏺ {name}{f' {detail[:80]}' if detail else ''}")

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        if result.is_error:
            first = result.content.strip().splitlines()[0] if result.content.strip() else "error"
            self._say(f"    ✗ {first[:160]}")
        # The next model call starts now.
        self.spinner.start(THINKING)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        self._end_line()
        self.spinner.start(COMPACTING)

    def on_transition(self, transition: CompactionTransition) -> None:
        lines = [notice(transition)]
        lines += [f"  warning: {warning}" for warning in transition.summary.warnings]
        lines += [f"  note: {note}" for note in transition.summary.notes]
        if transition.summary.fallback_reason:
            lines.append(
                f"  note: summary built without a model: {transition.summary.fallback_reason}"
            )
        self._say("\n".join(lines))
        self.spinner.start(THINKING)

    def on_compaction_skipped(self, reason: str) -> None:
        self._say(f"Compaction skipped: {reason}")

    def on_warning(self, message: str) -> None:
        self._say(f"warning: {message}")

    # -- writing -----------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        self.spinner.stop()
        self._end_line()
        self.err.write(line + "\n")
        self.err.flush()

    def _end_line(self) -> None:
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False


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

    session = f"Session: {agent.session_id} ({len(agent.messages)} messages)"
    decision = agent.context()
    if decision is None:
        return session
    usage = decision.usage
    status = agent.compaction_status()
    calibration = status.calibration
    lines = [
        f"Context: {usage.tokens:,} / {usage.window:,} tokens ({usage.fraction:.0%}), "
        f"measured from {usage.source}",
        f"Compaction: triggers at {decision.trigger_tokens:,} tokens "
        f"({decision.trigger_tokens / usage.window:.0%}; threshold {decision.threshold:.0%})"
        + ("" if status.enabled else " — automatic compaction is disabled"),
        f"Decision: {decision.reason}",
        f"Window: {usage.window:,} tokens (source: {status.window_source}); "
        f"replies up to {status.max_output_tokens:,} tokens",
    ]
    if calibration is not None:
        lines.append(
            f"Calibration: API tokens ≈ {calibration.ratio:.2f} × local estimate + "
            f"{calibration.per_message:.0f} per message ({calibration.samples} samples)"
        )
    lines += agent.context_notes()
    lines += _preparation_lines(status)
    standing = status.standing_instructions
    if standing:
        first = standing.splitlines()[0]
        lines.append(f"Summary instructions ({len(standing):,} characters): {first[:80]}")
    lines.append(session)
    return "\n".join(lines)


def _preparation_lines(status: CompactionStatus) -> list[str]:
    """What preparing summaries in the background did in this run (``/context``)."""
    mark = status.prepare_mark_tokens
    if mark is None:
        return ["Summaries: written when the trigger is reached (preparing ahead is off)"]
    done = status.preparation
    covered = status.prepared_messages
    state = (
        f"one is ready, covering {covered} messages" if covered is not None else "none is ready yet"
    )
    line = f"Summaries: prepared in the background past {mark:,} tokens; {state}"
    counts = [
        f"{done.started} requested",
        f"{done.applied} applied",
        f"{done.discarded} discarded",
    ]
    if done.failed:
        counts.append(f"{done.failed} failed")
    if done.cancelled:
        counts.append(f"{done.cancelled} cancelled")
    if done.fallbacks:
        counts.append(f"{done.fallbacks} summarized at the trigger instead")
    lines = [line, f"  this run: {', '.join(counts)}"]
    if done.discarded_calls:
        usage = done.discarded_usage
        lines.append(
            f"  discarded requests used {usage.prompt_tokens:,} input tokens "
            f"({usage.cache_read_input_tokens:,} read from the cache) and "
            f"{usage.output_tokens:,} output tokens; last: {done.last_discard}"
        )
    return lines


def plan_report(plan: CompactionPlan) -> str:
    """``/compact --dry-run``: what a compaction would do; nothing is compacted or written."""
    if plan.strategy == "none":
        return f"Nothing would be compacted: {plan.note}"
    lines = ["Compaction preview (nothing was compacted, nothing written):"]
    lines.append(f"  strategy: {plan.strategy}")
    if plan.summarized_messages:
        size = f"~{plan.summarized_tokens:,} tokens"
        lines.append(f"  summarized: {plan.summarized_messages} messages ({size})")
    if plan.pruned_messages:
        lines.append(
            f"  pruned: {plan.pruned_messages} messages (~{plan.pruned_tokens:,} tokens saved)"
        )
    lines.append(
        f"  kept verbatim: {plan.verbatim_messages} messages (~{plan.verbatim_tokens:,} tokens)"
    )
    carried = "yes" if plan.request_carried else "no (it is in the verbatim part)"
    lines.append(
        f"  pinned messages carried: {plan.pinned_messages}; latest request carried: {carried}"
    )
    state = [line for line in plan.preserved_state.splitlines() if line.startswith("#")]
    lines.append(f"  preserved state: {', '.join(s.lstrip('# ') for s in state) or 'none'}")
    lines += [f"  warning: {warning}" for warning in plan.warnings]
    trigger = plan.decision.trigger_tokens
    lines.append(
        f"  expected after: ~{plan.expected_tokens_after:,} tokens (now "
        f"~{plan.decision.usage.tokens:,}; compaction triggers at {trigger:,})"
    )
    return "\n".join(lines)
