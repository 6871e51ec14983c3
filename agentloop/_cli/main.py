"""The ``agentloop`` command line: parses, calls the library, prints. Nothing heavy at import."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentloop._core.validation import validate_threshold
from agentloop._errors import AgentloopError, ConfigurationError

EXIT_USAGE = 2
DEFAULT_MODEL = "claude-sonnet-5-5"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
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
        help="fraction of the context window that triggers compaction (default 0.85)",
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
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of tokens, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "sessions":
            from agentloop._cli import sessions as _cli_sessions

            return _cli_sessions.run(args)
        if args.command == "demo":
            from agentloop._cli.demo import run_demo

            return run_demo(args)
        from agentloop._cli.repl import run_agent

        return run_agent(args)
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
