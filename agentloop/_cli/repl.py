"""The read loop: one user turn per line (or one ``-p`` prompt), and the slash commands.

Light at import (the slash-command table is plain data, e.g. for ``--help``): the terminal UI,
the store and the agent are imported where they are used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._cli.ui import TerminalUI

SLASH_COMMANDS: tuple[tuple[str, str], ...] = (
    ("/compact [instructions]", "compact the conversation now (instructions guide the summary)"),
    ("/context", "context usage, where compaction triggers, the window and its source"),
    ("/sessions", "sessions of this workspace"),
    ("/help", "this help"),
    ("/exit", "leave (the session is saved; continue later with --continue)"),
)
"""Usage and one line of help for each slash command, in the order ``/help`` lists them."""

HELP_TEXT = "Commands:\n" + "\n".join(f"  {usage:<23}  {text}" for usage, text in SLASH_COMMANDS)
EXIT_COMMANDS = frozenset({"/exit", "/quit"})


def run_repl(
    agent: CodingAgent,
    ui: TerminalUI,
    *,
    prompt: str | None,
    stdin: TextIO,
    tty: bool,
    echo_input: bool,
) -> int:
    """Run ``prompt`` as the only turn, or read turns from ``stdin`` until end of input or
    ``/exit``. Returns 1 if a turn failed, else 0."""
    from agentloop._cli.ui import indicator

    failures = 0
    enabled = agent.compacter.settings.enabled

    def turn(text: str) -> None:
        nonlocal failures
        try:
            agent.run_turn(text)
        except AgentloopError as error:
            failures += 1
            ui.on_reply(None)
            print(f"agentloop: error: {error}", file=sys.stderr)
            print(f"(session {agent.session_id[:8]} is saved; you can continue)", file=sys.stderr)
        except KeyboardInterrupt:
            ui.on_reply(None)
            print("\n(interrupted; the session is saved)", file=sys.stderr)
        if tty or echo_input:
            print(indicator(agent.loop.context(), enabled=enabled), file=sys.stderr)

    if prompt is not None:
        turn(prompt)
        return 1 if failures else 0
    if tty:
        banner = f"agentloop · {agent.workspace} · session {agent.session_id[:8]} · /help"
        print(banner, file=sys.stderr)
    while True:
        try:
            line = input("› ") if tty else stdin.readline()
        except (EOFError, KeyboardInterrupt):
            break
        if not tty and line == "":
            break
        text = line.strip()
        if not text:
            continue
        if echo_input:
            print(f"\n› {text}", file=sys.stderr)
        if text.startswith("/"):
            if not slash(agent, text):
                break
            continue
        turn(text)
    return 1 if failures else 0


def slash(agent: CodingAgent, text: str) -> bool:
    """Run a slash command line; False means exit."""
    command, _, rest = text.partition(" ")
    if command in EXIT_COMMANDS:
        return False
    handler = _HANDLERS.get(command)
    if handler is None:
        print(f"unknown command {command}; /help lists the commands", file=sys.stderr)
    else:
        handler(agent, rest.strip())
    return True


def _help(agent: CodingAgent, rest: str) -> None:
    print(HELP_TEXT, file=sys.stderr)


def _context(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.ui import context_report

    print(context_report(agent), file=sys.stderr)


def _compact(agent: CodingAgent, rest: str) -> None:
    outcome = agent.compact(rest or None)
    # A compaction that was attempted already said why it was skipped (on_compaction_skipped);
    # one the decision refused (too few messages, a tool call pending) says it here.
    if outcome is not None and outcome.transition is None and outcome.skipped is None:
        print(f"Nothing compacted: {outcome.decision.reason}", file=sys.stderr)


def _sessions(agent: CodingAgent, rest: str) -> None:
    from agentloop._cli.sessions import current_workspace, list_command
    from sessions import SessionError

    try:
        list_command(agent.store, sys.stdout, workspace=current_workspace(str(agent.workspace)))
    except SessionError as error:  # e.g. a busy store: a line, and the session goes on
        print(f"agentloop: error: {error}", file=sys.stderr)
    sys.stdout.flush()


_HANDLERS: dict[str, Callable[[CodingAgent, str], None]] = {
    "/help": _help,
    "/context": _context,
    "/compact": _compact,
    "/sessions": _sessions,
}
