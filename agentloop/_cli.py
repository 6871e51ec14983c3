"""The ``agentloop`` command line: parses, calls the library, prints. Nothing heavy at import."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentloop._errors import AgentloopError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, exit 2: argparse's default prints the whole usage block first.
        self.exit(EXIT_USAGE, f"agentloop: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from agentloop import _cli_sessions

    parser = _Parser(
        prog="agentloop",
        description="A coding agent whose long conversations compact at safe points "
        "and continue under a child session.",
    )
    from agentloop._cli_agent import add_agent_options

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "sessions":
            from agentloop import _cli_sessions

            return _cli_sessions.run(args)
        if args.command == "demo":
            from agentloop._demo import run_demo

            return run_demo(args)
        from agentloop._cli_agent import run_agent

        return run_agent(args)
    except AgentloopError as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("agentloop: interrupted", file=sys.stderr)
        return 130
