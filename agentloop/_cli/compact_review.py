"""``/compact --review [instructions]``: the summary that would be used, and the ledger, before
the compaction applies; then apply, ask again with other instructions, or abort.

The summary shown is the child's: the compaction is worked out up to its write (the summary
prepared in the background where it is fresh, so no call; else one summary request now) and
applied as it is, never summarized a second time. A summary the API wrote is signed: it can be
applied or asked for again, not edited. Aborting writes nothing.

The answers come from the terminal (a line, typed after the question is shown: keys typed while
the summary was written are kept for the next prompt) or, piped, from the next input line. End
of input and Ctrl-C at the question abort.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from agentloop._core.measuring.figures import plural, token_figure

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._cli.terminal import TerminalInput
    from agentloop._loop.compaction_draft import CompactionDraft

QUESTION = "apply (a), ask again with other instructions (r), abort (q)? "
AGAIN = "instructions for the new summary: "
SIGNED = "Signed by the API: apply or ask again, not editable (the signature covers its text)."
ABORTED = "Compaction aborted: nothing was written; the conversation goes on as it was."
UNCHANGED = "(no instructions given: the summary above stands)"
ANSWERS = {
    "a": "apply",
    "apply": "apply",
    "r": "again",
    "again": "again",
    "q": "abort",
    "abort": "abort",
    "quit": "abort",
}
NO_LEDGER = "  (none: no files, commands, errors or requests to carry yet)"


class Dialog(Protocol):
    """Where the review is shown and its answers read."""

    def tell(self, text: str) -> None:
        """Show ``text`` (lines wrapped to the terminal)."""

    def ask(self, question: str) -> str | None:
        """Show ``question`` and return the answer line; None at end of input or Ctrl-C."""


def review_compaction(agent: CodingAgent, instructions: str, dialog: Dialog) -> None:
    """Show the compaction ``/compact [instructions]`` would make and do what the user says."""
    from agentloop._loop.compaction_draft import CompactionDraft

    while True:
        drafted = agent.draft_compaction(instructions or None)
        if not isinstance(drafted, CompactionDraft):
            # One attempted already said why it was skipped; one the decision refused says it here.
            if drafted is not None and drafted.transition is None and drafted.skipped is None:
                dialog.tell(f"Nothing compacted: {drafted.decision.reason}")
            return
        try:
            dialog.tell(review_text(drafted))
            choice, instructions = _choose(dialog)
            if choice == "apply":
                agent.apply_compaction(drafted)
                return
            if choice == "abort":
                drafted.drop()
                agent.save_state()  # what its summary requests cost: billed to this session
                dialog.tell(ABORTED)
                return
        finally:
            drafted.drop()  # not applied: forgotten (nothing once it was applied)


def _choose(dialog: Dialog) -> tuple[str, str]:
    """What the user says: ``("apply", "")``, ``("again", instructions)`` or ``("abort", "")``."""
    while True:
        answer = dialog.ask(QUESTION)
        if answer is None:
            return "abort", ""
        word = answer.strip().lower()
        choice = ANSWERS.get(word)
        if choice is None:
            if word:
                dialog.tell(f"answer a, r or q (not {answer.strip()!r})")
            continue
        if choice != "again":
            return choice, ""
        again = dialog.ask(AGAIN)
        if again is None:
            return "abort", ""
        if again.strip():
            return "again", again.strip()
        dialog.tell(UNCHANGED)


def review_text(draft: CompactionDraft) -> str:
    """The review: what the compaction would do, its summary, the ledger it carries."""
    summary = draft.transition.summary
    before = token_figure(summary.tokens_before, summary.tokens_before_source)
    after = token_figure(summary.tokens_after, summary.tokens_after_source)
    if summary.prepared:
        how = "prepared in the background, " + (
            f"brought up to date with {plural(draft.requests, 'request')}"
            if draft.requests
            else "no request now"
        )
    elif draft.requests:
        how = f"written now with {plural(draft.requests, 'request')}"
    else:
        how = "written without a model"
    by = "the API" if draft.signed else "agentloop"
    following = f", following {summary.instructions!r}" if summary.instructions else ""
    lines = [
        f"Compaction review (nothing is written until you apply): "
        f"{plural(summary.original_message_count, 'message')} → "
        f"{plural(summary.compacted_message_count, 'message')} ({before} → {after} tokens)",
        f"Summary by {by}, {how}{following}:",
        *_indented(summary.summary or f"(none: strategy {summary.strategy})"),
        "Ledger carried into the compacted context:",
        *(_indented(draft.ledger) or [NO_LEDGER]),
    ]
    if draft.signed:
        lines.append(SIGNED)
    return "\n".join(lines)


def _indented(text: str) -> list[str]:
    return [f"  {line}" if line.strip() else "" for line in text.strip().splitlines()]


class LineDialog:
    """The REPL's dialog: ``before`` runs first (the spinner stops), text goes to ``err``
    wrapped to the terminal, answers come from ``read`` (a line, None when there is none)."""

    def __init__(
        self,
        read: Callable[[str], str | None],
        err: TextIO,
        before: Callable[[], None] = lambda: None,
    ) -> None:
        self._read = read
        self._err = err
        self._before = before

    def tell(self, text: str) -> None:
        from agentloop._cli.ui import shown

        self._before()
        self._err.write(shown(text, self._err) + "\n")
        self._err.flush()

    def ask(self, question: str) -> str | None:
        self._before()
        return self._read(question)


def terminal_ask(terminal: TerminalInput, err: TextIO) -> Callable[[str], str | None]:
    """A question on the terminal: what was typed before it is kept for the next prompt, the
    answer is the line typed after it; Ctrl-C and Ctrl-D are no answer (None)."""
    from agentloop._cli.consent import KEPT_NOTE

    def ask(question: str) -> str | None:
        if terminal.take_pending():  # typed before the question: not its answer
            err.write(KEPT_NOTE)
        try:
            with terminal.cooked():  # echoed from the moment the question shows
                err.write(question)
                err.flush()
                return terminal.read_line()
        except (EOFError, KeyboardInterrupt):
            err.write("\n")
            err.flush()
            return None

    return ask


def piped_ask(read: Callable[[], str | None], err: TextIO) -> Callable[[str], str | None]:
    """A question answered by the next input line (shown after it, as typed)."""

    def ask(question: str) -> str | None:
        answer = read()
        err.write(question + ("" if answer is None else answer) + "\n")
        err.flush()
        return answer

    return ask
