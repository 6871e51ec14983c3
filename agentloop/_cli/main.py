"""The ``agentloop`` command line: parses, calls, prints errors. Nothing heavy at import.

The commands live in their own modules, imported only when they run: the agent's composition
root (:mod:`agentloop._cli.app`), the sessions commands (:mod:`agentloop._cli.sessions`) and the
demo (:mod:`agentloop._cli.demo`). None of them imports this module back.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from agentloop._core.validation import (
    DEFAULT_MODEL,
    DEFAULT_THRESHOLD,
    parse_positive_int,
    validate_threshold,
)
from agentloop._errors import AgentloopError, ConfigurationError

if TYPE_CHECKING:
    from agentloop._cli.app import AgentOptions

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, exit 2: argparse's default prints the whole usage block first.
        self.exit(EXIT_USAGE, f"agentloop: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from agentloop._cli import sessions as _cli_sessions

    parser = _Parser(
        prog="agentloop",
        description="A coding agent whose long conversations compact at safe points "
        "and continue under a child session.",
    )
    add_agent_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _cli_sessions.add_parser(commands)
    commands.add_parser(
        "demo",
        help="an offline scripted session that shows compaction (no API key needed)",
        description="Run a scripted coding session offline: real tools in a temporary "
        "directory, a small context window, compactions, and the session lineage at the end.",
    )
    return parser


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help=f"Claude model (default {DEFAULT_MODEL})")
    parser.add_argument(
        "--disable-compaction",
        action="store_true",
        help="never compact automatically (a prompt-too-long error then says to run /compact)",
    )
    parser.add_argument(
        "--compaction-threshold",
        type=_threshold,
        default=None,
        metavar="FLOAT",
        help="fraction of the context window that triggers compaction "
        f"(default {DEFAULT_THRESHOLD})",
    )
    parser.add_argument(
        "--context-window", type=_window, default=None, metavar="N", help="override the window"
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="resume a session (id or unique prefix; default the latest here) at its newest "
        "descendant",
    )
    start.add_argument(
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the latest session of this workspace",
    )
    parser.add_argument(
        "-p", "--print", dest="prompt", metavar="PROMPT", help="one turn, then exit"
    )
    parser.add_argument("--yes", action="store_true", help="run shell commands without asking")


def _threshold(text: str) -> float:
    try:
        return validate_threshold(text)
    except ConfigurationError as error:
        raise argparse.ArgumentTypeError(str(error).split(" (got")[0]) from None


def _window(text: str) -> int:
    try:
        return parse_positive_int(text, what="context window", unit="tokens")
    except ConfigurationError:
        # argparse names the option; the value is shown as typed.
        raise argparse.ArgumentTypeError(
            f"must be a positive number of tokens, not {text!r}"
        ) from None


def agent_options(args: argparse.Namespace) -> AgentOptions:
    """The parsed agent options as the composition root's typed value."""
    from agentloop._cli.app import AgentOptions

    # `--resume` without an id (or with an empty one) means the latest session here.
    resume: str | None = args.resume or None
    return AgentOptions(
        model_name=args.model or DEFAULT_MODEL,
        context_window=args.context_window,
        compaction=not args.disable_compaction,
        threshold=DEFAULT_THRESHOLD
        if args.compaction_threshold is None
        else args.compaction_threshold,
        resume=resume,
        continue_latest=args.continue_latest or args.resume == "",
        prompt=args.prompt,
        yes=args.yes,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The ``agentloop`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "sessions":
            from agentloop._cli.sessions import run

            return run(args)
        if args.command == "demo":
            from agentloop._cli.demo import run_demo

            return run_demo()
        from agentloop._cli.app import run_agent

        return run_agent(agent_options(args))
    except AgentloopError as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:
        # The store's errors (sessions knows nothing of agentloop) are user errors too.
        from sessions import SessionError

        if not isinstance(error, SessionError):
            raise
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("agentloop: interrupted", file=sys.stderr)
        return 130
