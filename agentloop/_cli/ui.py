"""The terminal face of a running agent: replies, tool activity, the spinners and the compaction
notices (:class:`TerminalUI`), the after-turn context line and the ``/context`` report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from agentloop._cli.render import home_short, styled, terminal_width
from agentloop._cli.spinner import Spinner
from agentloop._core.measuring.figures import percent_figure, plural, token_figure
from agentloop._loop.agent_loop import LoopEvents

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._cli.reply_markdown import MarkdownStream
    from agentloop._core.compaction.results import CompactionPlan, CompactionTransition
    from agentloop._core.measuring.context import CompactionDecision
    from agentloop._core.values.messages import Usage
    from agentloop._core.values.model import ModelResponse
    from agentloop._core.values.tool import ToolResult
    from agentloop._loop.status import CompactionStatus

THINKING = "Thinking…"
COMPACTING = "Compacting conversation…"
WRITING = "Writing…"
_WINDOW_SOURCES = {
    "override": " (--context-window)",
    "session": " (--context-window, kept from this conversation's start)",
    "default": " (a guess: unknown model)",
}


def start_line(model: str, window: int | None, source: str, workspace: str) -> str:
    """The first line of an interactive run: the model, its context window, the workspace."""
    size = "" if window is None else f" · {window:,}-token window{_WINDOW_SOURCES.get(source, '')}"
    return f"agentloop · {model}{size} · {home_short(workspace)} · /help for commands and keys"


def notice(transition: CompactionTransition) -> str:
    """The one line a user sees on every compaction. A figure the API counted is shown as it
    is; one that is (partly) a local estimate carries a ``~``."""
    summary = transition.summary
    before = _figure(summary.tokens_before, summary.tokens_before_source)
    after = _figure(summary.tokens_after, summary.tokens_after_source)
    return (
        f"Conversation compacted: {plural(summary.original_message_count, 'message')} → new "
        f"session {transition.new_session_id[:8]} ({before} → {after} tokens)"
    )


def kept_request_note(transition: CompactionTransition) -> str | None:
    """Why a compaction left more than its aim: the latest request (a big paste, say) is kept
    verbatim, and it is most of what is left; None otherwise."""
    from agentloop._adapters.tokens import TokenEstimator
    from agentloop._core.compaction.api_compaction import CARRIED_OPEN
    from agentloop._core.values.messages import Message, latest_request_index

    child = transition.compacted_messages
    index = latest_request_index(child)
    after = transition.summary.tokens_after
    if index is None or after <= 0:
        return None
    said = [  # what the user said, without what the compaction carried onto it
        b
        for b in child[index].request_blocks
        if not str(b.get("text", "")).startswith(CARRIED_OPEN)
    ]
    request = Message("user", tuple(said))
    size = TokenEstimator().count_message(request)
    if size * 2 < after:
        return None
    return (
        f"your latest request ({_estimate(size)} tokens) is kept verbatim, as the latest "
        "request always is: it is most of what is left, and the next compaction summarizes it"
    )


def _figure(tokens: int, source: str) -> str:
    return token_figure(tokens, source)  # the one rule every surface follows


def _estimate(tokens: int) -> str:
    """A figure no API counted (a preview's sizes), by the same rule."""
    return token_figure(tokens, "estimate")


def shown(text: str, stream: TextIO) -> str:
    """``text`` wrapped to ``stream``'s terminal at word boundaries (piped: as it is)."""
    from agentloop._cli.cells import fit
    from agentloop._cli.render import terminal_width

    return fit(text, terminal_width(stream))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


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
        self.styled = tty and styled()
        """Colors and dim text (a terminal, and no ``NO_COLOR``)."""
        self.stream = stream
        self.spinner = Spinner(err, enabled=tty)
        self.markdown: MarkdownStream | None = None
        """Replies drawn as Markdown: only on a terminal (piped, the text stays as it came)."""
        if stream and _isatty(out):
            from agentloop._cli.reply_markdown import MarkdownStream

            self.markdown = MarkdownStream(out, self.spinner.stop)
        self.replies = 0
        """How many model replies were received (a run whose model never answered stores
        nothing worth keeping)."""
        self.usage: list[Usage] = []
        self._wrote_text = False
        self._thinking = ""
        """The model's notes streamed since the last thing shown (shown collapsed next)."""

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
        self._say(shown(f"  retrying ({attempt}/{limit}): {reason}", self.err))
        self.spinner.start(THINKING)

    # -- the loop's events -------------------------------------------------------------------

    def on_thinking(self, delta: str) -> None:
        """The model's notes (summarized thinking) as they stream: gathered; those that lead
        to a tool call are shown above its line, dimmed, collapsed to two lines at most (the
        reasoning before an answer is not: the answer follows)."""
        if self.stream:
            self._thinking += delta

    def on_text(self, delta: str) -> None:
        if not self.stream:
            return
        self._thinking = ""  # what led to this text: the text says it
        if self.markdown is not None:
            self.markdown.feed(delta)  # a block is drawn once complete
            if self.markdown.pending and not self.spinner.running:
                self.spinner.start(WRITING)  # the rest of a block is on its way
            return
        self.spinner.stop()
        self._wrote_text = True  # first: a Ctrl-C during the write still ends the line later
        self.out.write(delta)
        self.out.flush()

    def on_reply_incomplete(self, reason: str) -> None:
        """What was streamed is not an answer: say so, and that it is asked again."""
        self._thinking = ""  # withdrawn with the rest
        self.spinner.stop()
        self._end_line()
        broke = f"  (the reply broke off: {reason}; asking again — the part above is not kept)"
        self._say(shown(broke, self.err))

    def on_reply(self, response: ModelResponse | None) -> None:
        """End the streamed reply's line (also called with None after a failed turn)."""
        if response is not None:
            self.replies += 1
            self.usage.append(response.usage)
            if response.tool_uses:  # notes before a tool call: shown above its line
                self._show_thinking()
        self._thinking = ""
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
        elif diff := getattr(result, "diff", ""):  # write_file, edit_file: what changed
            self._say(change_lines(str(diff), color=self.styled, width=terminal_width(self.err)))
        # The next model call starts now.
        self.spinner.start(THINKING)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        self._end_line()
        self.spinner.start(COMPACTING)

    def on_transition(self, transition: CompactionTransition) -> None:
        lines = [notice(transition)]
        lines += [f"  warning: {warning}" for warning in transition.summary.warnings]
        lines += [f"  note: {note}" for note in transition.summary.notes]
        if (kept := kept_request_note(transition)) is not None:
            lines.append(f"  note: {kept}")
        if transition.summary.fallback_reason:
            lines.append(
                f"  note: summary built without a model: {transition.summary.fallback_reason}"
            )
        self._say(shown("\n".join(lines), self.err))
        self.spinner.start(THINKING)

    def on_compaction_skipped(self, reason: str) -> None:
        self._say(shown(f"Compaction skipped: {reason}", self.err))

    def on_warning(self, message: str) -> None:
        self._say(shown(f"warning: {message}", self.err))

    # -- writing -----------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        self.spinner.stop()
        self._end_line()
        self.err.write(line + "\n")
        self.err.flush()

    def _show_thinking(self) -> None:
        """The notes gathered so far, dimmed, on at most two lines (then they are gone)."""
        text, self._thinking = self._thinking, ""
        lines = thinking_lines(text)
        if not lines:
            return
        self.spinner.stop()
        self._end_line()
        for line in lines:
            self.err.write(f"{_DIM}{line}{_PLAIN}\n" if self.styled else line + "\n")
        self.err.flush()

    def _end_line(self) -> None:
        if self.markdown is not None:
            self.markdown.finish()
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False


_DIFF_COLORS = {"+": "\033[32m", "-": "\033[31m"}
_DIM, _PLAIN = "\033[2m", "\033[0m"
THINKING_WIDTH = 100
"""The most characters of a line of the model's notes shown (the rest: ``…``)."""


def thinking_lines(text: str) -> list[str]:
    """The model's notes collapsed: their first line, and the second when there is more (cut
    to :data:`THINKING_WIDTH`, ``…`` where something was left out)."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    shown: list[str] = []
    for index, line in enumerate(lines[:2]):
        more = len(line) > THINKING_WIDTH or (index == 1 and len(lines) > 2)
        if len(line) > THINKING_WIDTH:
            line = line[: THINKING_WIDTH - 1].rstrip()
        shown.append(f"  {'✻' if index == 0 else ' '} {line}{'…' if more else ''}")
    return shown


def change_lines(diff: str, *, color: bool, width: int | None = None) -> str:
    """A file tool's compact diff under its tool line; added lines green, removed red; a line
    wider than the terminal (``width``) cut with ``…`` (code is not reflowed)."""
    from agentloop._cli.cells import cut_cells

    head, *lines = diff.split("\n")
    out = [f"    ⎿ {head}"]
    for line in lines:
        mark = line[6:7]
        if width is not None:
            line = cut_cells(line, max(width - 4, 10))
        if color and mark in _DIFF_COLORS:
            line = f"{_DIFF_COLORS[mark]}{line}\033[0m"
        out.append(f"    {line}")
    return "\n".join(out)


def indicator(decision: CompactionDecision | None, *, enabled: bool) -> str:
    """The quiet after-turn line; it uses the same numbers as the trigger."""
    if decision is None:
        return ""
    window = decision.usage.window
    used = decision.usage.fraction
    shown = percent_figure(used, decision.usage.source)
    if not enabled:
        return f"context {shown} · automatic compaction off"
    trigger = f"{decision.trigger_tokens / window:.0%}"
    at = decision.held_until if decision.held_until is not None else decision.trigger_tokens
    shown = percent_figure(_below(decision.usage.tokens, at, window), decision.usage.source)
    if decision.held_until is None:
        return f"context {shown} · compacts at {trigger}"
    # The breaker holds: the threshold in force is where it waits, and the line says why.
    held = f"{decision.held_until / window:.0%}"
    if held == trigger:  # too close to tell apart in percent
        held, trigger = f"{decision.held_until:,} tokens", f"{decision.trigger_tokens:,}"
    return f"context {shown} · compacts at {held} (raised from {trigger}: {decision.held_because})"


def _below(tokens: int, at: int, window: int) -> float:
    """``tokens`` as a share of ``window``, rounded so that it reads as the trigger (``at``)
    only when it is there: below it, it never rounds up to the trigger's figure; past it, it
    never rounds down under it."""
    used, trigger = round(100 * tokens / window), round(100 * at / window)
    if tokens < at and used >= trigger:
        used = trigger - 1
    elif tokens >= at and used < trigger:
        used = trigger
    return used / 100


def context_report(agent: CodingAgent) -> str:
    """The ``/context`` report: usage, trigger, decision, window, calibration, session."""

    session = f"Session: {agent.session_id} ({plural(len(agent.messages), 'message')})"
    decision = agent.context()
    if decision is None:
        return session
    usage = decision.usage
    status = agent.compaction_status()
    calibration = status.calibration
    lines = [
        f"Context: {_figure(usage.tokens, usage.source)} / {usage.window:,} tokens "
        f"({percent_figure(usage.fraction, usage.source)}), measured from {usage.source}",
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
            f"{calibration.per_message:.0f} per message ({plural(calibration.samples, 'sample')})"
        )
    lines += agent.context_notes()
    lines += _preparation_lines(status)
    standing = status.standing_instructions
    if standing:
        first = standing.splitlines()[0]
        lines.append(f"Summary instructions ({plural(len(standing), 'character')}): {first[:80]}")
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
        f"one is ready, covering {plural(covered, 'message')}"
        if covered is not None
        else "none is ready yet"
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
    if done.not_applied:
        counts.append(f"{done.not_applied} written for a review and not applied")
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
        size = f"{_estimate(plan.summarized_tokens)} tokens"
        what = "dropped" if plan.strategy == "sliding_window" else "summarized"
        lines.append(f"  {what}: {plural(plan.summarized_messages, 'message')} ({size})")
    if plan.pruned_messages:
        lines.append(
            f"  pruned: {plural(plan.pruned_messages, 'message')} "
            f"({_estimate(plan.pruned_tokens)} tokens saved)"
        )
    lines.append(
        f"  kept verbatim: {plural(plan.verbatim_messages, 'message')} "
        f"({_estimate(plan.verbatim_tokens)} tokens)"
    )
    carried = "yes" if plan.request_carried else "no (it is in the verbatim part)"
    lines.append(
        f"  pinned messages carried: {plan.pinned_messages}; latest request carried: {carried}"
    )
    lines.append(f"  preserved state: {', '.join(plan.preserved_sections) or 'none'}")
    lines += [f"  warning: {warning}" for warning in plan.warnings]
    trigger = plan.decision.trigger_tokens
    now = plan.decision.usage
    low, high = plan.expected_tokens_low, plan.expected_tokens_after
    if low < high:
        why = f"the summary, up to {plan.summary_allowance:,} tokens, is not written yet; "
        expected = (
            f"a range, {_estimate(low)} to {_estimate(high)} tokens "
            f"({why if plan.summary_allowance else ''}"
        )
    else:
        expected = f"an estimate, {_estimate(high)} tokens ("
    lines.append(
        f"  expected after: {expected}now {_figure(now.tokens, now.source)}; "
        f"compaction triggers at {trigger:,})"
    )
    return "\n".join(lines)
