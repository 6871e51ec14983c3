"""The read loop: one message per prompt (a terminal) or per line (a pipe), and the slash commands.

The terminal UI, the store and the agent are imported where they are used. The slash-command
table and ``/help`` are in :mod:`agentloop._cli.slash_help` (``--help`` lists them too).
"""

from __future__ import annotations

import contextlib
import difflib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentloop._cli.mcp_setup import mcp_command
from agentloop._cli.slash_help import help_text
from agentloop._core.measuring.figures import token_figure
from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._cli.compact_review import Dialog
    from agentloop._cli.editor import Reader
    from agentloop._cli.ui import TerminalUI

EXIT_COMMANDS = frozenset({"/exit", "/quit"})
NOT_SAVED = (
    "(not saved: the store refuses writes; what was said since the last save is in memory only, "
    "and nothing is sent to the model until the store takes it — your next message tries again)"
)
NOT_SAVED_STOP = (
    "(not saved: the store refuses writes; what was said since the last save is lost, and "
    "nothing more is sent to the model: stopping)"
)
TAKEN_OVER = (
    "(not saved: another process writes this session now; nothing more is sent from here — "
    "/exit, then continue in a new branch with `agentloop --resume {sid} --fork-session`)"
)


@dataclass
class Repl:
    """One run of the read loop over ``agent``."""

    agent: CodingAgent
    ui: TerminalUI
    reader: Reader
    busy: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    """Wraps each turn (the terminal's quiet mode while the agent works)."""
    kept_input: Callable[[], str] = str
    """What was typed ahead and taken out of the way of a question: the next prompt's text."""
    echo_input: bool = False
    show_context: bool = False
    kept: Callable[[], bool] = lambda: True
    """Whether the session is kept (a new session whose model never answered is not)."""
    after_turn: Callable[[], None] = lambda: None
    """Called after every turn (the lease follows a session created by the first message)."""
    stop_when_unsaved: bool = False
    """Stop reading (piped input) once the store refuses a write, instead of waiting for it."""
    ask: Callable[[str], str | None] | None = None
    """A question's answer line (None: no answer); without it, the reader's next line."""
    failures: int = 0
    stopped: bool = False
    history: list[str] = field(default_factory=list)

    def run(self, first: str | None = None) -> int:
        """Run ``first`` (if any), then read messages until the user is done. Returns 1 if a
        turn failed, else 0."""
        if first:
            self.handle(first)
        while not self.stopped:
            text = self.reader.read(self.kept_input())
            if text is None:
                break
            if not self.handle(text):
                break
        return 1 if self.failures else 0

    def handle(self, line: str) -> bool:
        """One message or slash command; False means exit."""
        text = line.strip()
        if not text:
            return True
        if self.echo_input:
            print(f"\n› {text}", file=sys.stderr)
        command = text.split(None, 1)[0]
        if command.startswith("/"):
            if command in EXIT_COMMANDS:
                return False
            if command in _HANDLERS or _looks_like_command(command):
                with self._working():
                    slash(self.agent, text, self._dialog())
                self.after_turn()  # /clear, /undo-compaction: the lease follows the session
                return True
        with self._working():
            self.ui.begin_turn()
            try:
                self.agent.run_turn(text)
            finally:
                self.after_turn()
        if self.show_context:
            from agentloop._cli.ui import indicator

            enabled = self.agent.compaction_status().enabled
            _tell(indicator(self.agent.context(), enabled=enabled))
        return True

    def _dialog(self) -> Dialog:
        """Where a command asks back (``/compact --review``): the spinner stops first."""
        from agentloop._cli.compact_review import LineDialog, piped_ask

        ask = self.ask or piped_ask(lambda: self.reader.read(), sys.stderr)
        return LineDialog(ask, sys.stderr, before=self.ui.end_turn)

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        """Errors of a turn or a command become a line; Ctrl-C returns to the prompt."""
        from agentloop._sessions import SessionError, SessionLeasedError

        try:
            with self.busy():
                yield
        except (AgentloopError, SessionError) as error:
            self.failures += 1
            self.ui.end_turn()
            _tell(f"agentloop: error: {error}")
            if self.agent.unsaved:  # what was shown is not stored: said, and no more sent
                self.stopped = self.stop_when_unsaved
                note = NOT_SAVED_STOP if self.stopped else NOT_SAVED
                taken = (error, error.__cause__)
                if any(isinstance(e, SessionLeasedError) for e in taken) and not self.stopped:
                    note = TAKEN_OVER.format(sid=self.agent.session_id[:8])
                _tell(note)
            elif isinstance(error, AgentloopError) and self.agent.saved and self.kept():
                _tell(f"(session {self.agent.session_id[:8]} is saved; you can continue)")
        except KeyboardInterrupt:
            self.ui.interrupted()
            _tell("(interrupted)")
        finally:
            self.ui.end_turn()


def _tell(text: str) -> None:
    """A line (or lines) for the user, wrapped to the terminal at word boundaries."""
    from agentloop._cli.ui import shown

    print(shown(text, sys.stderr), file=sys.stderr)


def _looks_like_command(word: str) -> bool:
    # "/usr/bin/env is broken" is a message, "/contxt" a mistyped command.
    return "/" not in word[1:] and word[1:].isalpha()


def slash(agent: CodingAgent, text: str, dialog: Dialog | None = None) -> None:
    """Run a slash command line (not /exit); ``dialog``: where a command may ask back."""
    command, _, rest = text.partition(" ")
    handler = _HANDLERS.get(command)
    if handler is _compact:
        _compact(agent, rest.strip(), dialog)
        return
    if handler is None:
        names = [*_HANDLERS, *EXIT_COMMANDS]
        close = difflib.get_close_matches(command, names, n=1, cutoff=0.5)
        guess = f"; did you mean {close[0]}?" if close else ""
        _tell(f"unknown command {command}{guess} (/help lists the commands)")
        return
    handler(agent, rest.strip())


def _help(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.render import terminal_width

    _tell(help_text(terminal_width(sys.stderr)))


def _context(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.ui import context_report

    _tell(context_report(agent))


def _cost(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.cost_report import configured_prices, cost_text

    reports = agent.cost(configured_prices())
    if reports is None:
        _tell("Nothing billed yet: the session starts with its first reply.")
        return
    _tell(cost_text(*reports, agent.session_id))


DRY_RUN = "--dry-run"
REVIEW = "--review"
COMPACT_USAGE = "/compact [--dry-run | --review] [instructions]"


def _compact(agent: CodingAgent, rest: str, dialog: Dialog | None = None) -> None:
    words = rest.split()
    # A preview never writes, wherever the flag is; anything else that looks like an option
    # (a mistyped flag) is refused rather than sent to the summarizer as instructions.
    if DRY_RUN in words and REVIEW in words:
        _tell(f"--dry-run and --review do not go together (usage: {COMPACT_USAGE})")
        return
    unknown = next((w for w in words if w.startswith("--") and w not in (DRY_RUN, REVIEW)), None)
    if unknown is not None:  # wherever it stands: never sent as instructions
        _tell(f"unknown option {unknown} (usage: {COMPACT_USAGE})")
        return
    if REVIEW in words and dialog is not None:
        from agentloop._cli.compact_review import review_compaction

        review_compaction(agent, " ".join(w for w in words if w != REVIEW), dialog)
        return
    if DRY_RUN in words:
        instructions = " ".join(w for w in words if w != DRY_RUN)
        _preview(agent, instructions)
        return
    outcome = agent.compact(rest or None)
    # A compaction that was attempted already said why it was skipped (on_compaction_skipped);
    # one the decision refused (too few messages, a tool call pending) says it here.
    if outcome is not None and outcome.transition is None and outcome.skipped is None:
        _tell(f"Nothing compacted: {outcome.decision.reason}")


def _preview(agent: CodingAgent, instructions: str) -> None:
    from agentloop._cli.ui import plan_report

    plan = agent.plan()
    _tell(plan_report(plan))
    if instructions and plan.decision.compact:
        # Instructions shape the summary's text, which only the summarizer writes: the plan
        # (what is summarized, kept, preserved) is the same with them.
        _tell(
            f"  instructions: {instructions!r} (the summary would follow them; `/compact "
            f"{instructions}` compacts with them)"
        )


def _undo_compaction(agent: CodingAgent, rest: str) -> None:
    from agentloop._adapters.undo_branch import NothingToUndoError

    compacted = agent.session_id
    try:
        fork, kept = agent.undo_compaction()
    except NothingToUndoError as error:  # an answer, not a failure
        _tell(f"Nothing to undo: {str(error).removeprefix('nothing to undo: ')}")
        return
    since = f", with the {_messages(kept)} said since it" if kept else ""
    _tell(
        f"Compaction undone: continuing from before it{since}, in new session {fork[:8]} "
        f"({_messages(len(agent.messages))}); {compacted[:8]} stays as it was"
    )
    decision = agent.context()
    if decision is None or decision.usage.tokens < decision.trigger_tokens:
        return
    usage = decision.usage
    if decision.held_until is not None:
        _tell(
            f"(the context is past the trigger: automatic compaction waits until it passes "
            f"{decision.held_until:,} tokens; /compact compacts now)"
        )
    else:
        _tell(
            f"(the restored conversation, {token_figure(usage.tokens, usage.source)} tokens, "
            "leaves no room for a "
            f"reply in the {usage.window:,}-token window: your next message compacts it again)"
        )


def _messages(count: int) -> str:
    from agentloop._core.measuring.figures import plural

    return plural(count, "message")


def _sessions(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.list_commands import list_command
    from agentloop._cli.sessions_commands import current_workspace
    from agentloop._sessions import SessionError

    try:
        list_command(agent.store, sys.stdout, workspace=current_workspace(str(agent.workspace)))
    except SessionError as error:  # e.g. a busy store: a line, and the session goes on
        _tell(f"agentloop: error: {error}")
    sys.stdout.flush()


def _clear(agent: CodingAgent, rest: str) -> None:
    if not agent.saved:
        _tell("Already a fresh conversation: nothing was said in this one yet.")
        return
    before = agent.session_id[:8]
    fresh = agent.clear()
    _tell(
        f"Fresh conversation: new session {fresh[:8]} (stored with its first message); "
        f"{before} is kept — `agentloop --resume {before}` continues it"
    )


CACHE_AND_THINKING = (
    "the prompt cache starts over (a cache belongs to one model), and thinking another "
    "model wrote may be dropped"
)


def _model(agent: CodingAgent, rest: str) -> None:
    name = rest.strip()
    current = agent.model_name
    if not name:
        _tell(f"Model: {current} (/model NAME switches for the next turns)")
        return
    if len(name.split()) > 1 or name.startswith("-"):
        _tell(f"usage: /model [NAME], e.g. /model claude-opus-5-5 (not {name!r})")
        return
    if name == current:
        _tell(f"Model: {current} already")
        return
    agent.switch_model(name)
    _tell(f"Model: {name} for the next turns (was {current}); {CACHE_AND_THINKING}")
    # Its deprecation, if any, is said once by the run's after-command hook (app.py), which
    # also knows what the Models API answered about it.


_HANDLERS: dict[str, Callable[[CodingAgent, str], None]] = {
    "/help": _help,
    "/context": _context,
    "/cost": _cost,
    "/compact": _compact,
    "/undo-compaction": _undo_compaction,
    "/sessions": _sessions,
    "/clear": _clear,
    "/model": _model,
    "/mcp": mcp_command,
}
