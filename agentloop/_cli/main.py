"""The ``agentloop`` command line: parses, calls, prints errors. Nothing heavy at import.

``agentloop [options] [PROMPT]`` runs the agent; ``agentloop sessions …`` and ``agentloop demo``
are commands. A first word that is not a command is the prompt, so the two parsers are chosen
by looking at the first positional argument.

The commands live in their own modules, imported only when they run: the agent's composition
root (:mod:`agentloop._cli.app`), the sessions commands
(:mod:`agentloop._cli.sessions_commands`) and the demo (:mod:`agentloop._cli.demo`).
None of them imports this module back.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from agentloop._core.values.validation import (
    DEFAULT_MODEL,
    DEFAULT_THRESHOLD,
    EFFORT_LEVELS,
    parse_positive_int,
    validate_threshold,
)
from agentloop._errors import AgentloopError, ConfigurationError

if TYPE_CHECKING:
    from agentloop._cli.app import AgentOptions

EXIT_USAGE = 2
STRATEGY_CHOICES = ("auto", "summarize", "sliding_window", "prune", "server", "none")
"""``--compaction-strategy``'s choices, the settings' ``STRATEGIES`` (a test holds them equal),
written out so that ``--help`` loads neither the settings nor ``dataclasses``."""
COMMANDS = ("sessions", "demo")
LATEST = object()
"""``--resume`` given without an id: the latest conversation here."""

ENVIRONMENT = (
    ("ANTHROPIC_API_KEY", "the API key (or ANTHROPIC_AUTH_TOKEN for a bearer token)"),
    ("ANTHROPIC_BASE_URL", "a compatible Messages API server instead of Anthropic's"),
    ("AGENTLOOP_STORE", "the session store: a path, sqlite:///PATH or postgresql://… (--store)"),
    ("AGENTLOOP_HOME", "where the default store, input history and model cache live"),
    ("AGENTLOOP_CONFIG_DIR", "your own instruction files (default ~/.config/agentloop)"),
    ("AGENTLOOP_COMPACTION_MODEL", "the model that writes summaries (--compaction-model)"),
    ("AGENTLOOP_PREPARE_SUMMARIES", "off: no summary prepared in the background (default on)"),
    ("AGENTLOOP_STREAM_TIMEOUT", "seconds a reply may stream nothing before it is asked again"),
    ("AGENTLOOP_PRICES", 'price overrides, JSON: {"claude-sonnet-4": {"input": 3, "output": 15}}'),
    ("AGENTLOOP_KEEP_ENV", "credential variables shell commands may still see"),
    ("AGENTLOOP_MCP_MAX_TOKENS", "the tokens an MCP tool's result may take (default 25,000)"),
    ("NO_COLOR", "set: no colors (diffs, notes, search hits)"),
)
"""Every environment variable agentloop reads, as ``--help`` lists them."""
DESCRIPTION = (
    "A coding agent whose long conversations compact at safe points and continue under a "
    "child session."
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, exit 2: argparse's default prints the whole usage block first.
        self.exit(EXIT_USAGE, f"agentloop: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("agentloop")
        except PackageNotFoundError:
            number = "unknown"
        sys.stdout.write(f"agentloop {number}\n")
        parser.exit(0)


def help_width() -> int:
    """The columns ``--help`` is wrapped to (argparse's own: the terminal's, less 2)."""
    import shutil

    return max(shutil.get_terminal_size().columns - 2, 40)


def _epilog(width: int) -> str:
    from agentloop._cli.cells import paragraph, two_columns
    from agentloop._cli.slash_help import KEY_ITEMS, SLASH_COMMANDS

    commands = (
        ("sessions ...", "stored sessions: list, show, search, tree, export, fork, delete, "
         "prune, copy (agentloop sessions --help)"),
        ("demo", "an offline scripted session that shows compaction"),
    )  # fmt: skip
    examples = (
        ('agentloop "fix the failing test"', "start with a first message"),
        ('git diff | agentloop -p "review"', "one answer, piped input as context"),
        ("agentloop -c", "continue the latest conversation here"),
    )
    lines = [
        "commands:",
        *two_columns(commands, width),
        "",
        "slash commands (interactive):",
        *two_columns(SLASH_COMMANDS, width),
        "",
        *paragraph("keys: " + " · ".join(KEY_ITEMS), width),
        "",
        "environment:",
        *two_columns(ENVIRONMENT, width),
        "",
        "examples:",
        *two_columns(examples, width),
    ]
    return "\n".join(lines)


def build_parser(*, commands: bool = False) -> argparse.ArgumentParser:
    """The agent's parser (``agentloop [options] [PROMPT]``), or with ``commands`` the parser of
    ``agentloop sessions …`` / ``agentloop demo``."""
    from agentloop._cli.cells import paragraph

    width = help_width()
    parser = _Parser(
        prog="agentloop",
        usage="agentloop [options] [PROMPT]\n       agentloop {sessions,demo} ...",
        description="\n".join(paragraph(DESCRIPTION, width)),
        epilog=_epilog(width),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_agent_options(parser)
    if not commands:
        parser.add_argument(
            "prompt",
            nargs="?",
            metavar="PROMPT",
            help="the first message (interactive), or with -p the only one",
        )
        return parser
    from agentloop._cli import sessions_commands as _cli_sessions

    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _cli_sessions.add_parser(subcommands)
    subcommands.add_parser(
        "demo",
        help="an offline scripted session that shows compaction (no API key needed)",
        description="Run a scripted coding session offline: real tools in a temporary "
        "directory, a small context window, compactions, and the session lineage at the end. "
        "Its sessions go to your store; its last line prints the command that removes them.",
    )
    return parser


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=_Version)
    parser.add_argument(
        "-p",
        "--print",
        dest="print_mode",
        action="store_true",
        help="one turn, print only the final answer, exit; text piped to stdin is added to "
        "the prompt as context",
    )
    parser.add_argument(
        "--output-format",
        choices=("text", "json", "stream-json"),
        default=None,
        help="with -p: text (default), json (one result object) or stream-json (one JSON "
        "event per line)",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the latest conversation of this workspace",
    )
    start.add_argument(
        "-r",
        "--resume",
        nargs="?",
        const=LATEST,
        default=None,
        metavar="ID",
        help="resume a session (id or unique prefix; without ID: choose among the recent ones "
        "here, or the latest when not at a terminal) at its newest descendant",
    )
    parser.add_argument(
        "--compaction-instructions",
        metavar="FILE",
        default=None,
        help="standing instructions every summary follows (default: the '## Compaction' "
        "section of the workspace's AGENTLOOP.md)",
    )
    parser.add_argument(
        "--fork-session",
        action="store_true",
        help="with --resume/--continue: continue in a new branch, leaving the session as it is",
    )
    parser.add_argument(
        "-m",
        "--model",
        type=_model_name,
        default=None,
        help=f"Claude model (default {DEFAULT_MODEL}; -c/-r: the session's)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="the session store: a path, sqlite:///PATH or postgresql://… "
        "(default $AGENTLOOP_STORE, else sessions.db in $AGENTLOOP_HOME)",
    )
    parser.add_argument("--yes", action="store_true", help="run shell commands without asking")
    parser.add_argument(
        "--mcp-config", action="append", default=[], metavar="FILE", help="MCP servers (.mcp.json)"
    )
    parser.add_argument("--no-mcp", action="store_true", help="start no MCP servers")
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
        "--compaction-strategy",
        choices=STRATEGY_CHOICES,
        default="auto",
        help="how to compact: auto (prune, then summarize; the default), summarize, "
        "sliding_window, prune, server (the API compacts at the trigger), none",
    )
    parser.add_argument(
        "--compaction-model",
        default=None,
        metavar="MODEL",
        help="write summaries with another model (default: $AGENTLOOP_COMPACTION_MODEL, else the "
        "conversation's; another model cannot read the conversation's prompt cache)",
    )
    parser.add_argument(
        "--context-window", type=_window, default=None, metavar="N", help="override the window"
    )
    parser.add_argument(
        "--effort",
        choices=EFFORT_LEVELS,
        default=None,
        help="how hard the model thinks (output_config.effort; default: the model's own)",
    )


def _threshold(text: str) -> float:
    try:
        return validate_threshold(text)
    except ConfigurationError as error:
        raise argparse.ArgumentTypeError(str(error).split(" (got")[0]) from None


def _model_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"needs a model name, not {text!r}")
    return text.strip()


def _window(text: str) -> int:
    try:
        return parse_positive_int(text, what="context window", unit="tokens")
    except ConfigurationError:
        # argparse names the option; the value is shown as typed.
        raise argparse.ArgumentTypeError(
            f"must be a positive number of tokens, not {text!r}"
        ) from None


def first_positional(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first argument that is neither an option nor an option's value."""
    actions = {name: action for action in parser._actions for name in action.option_strings}
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return argv[index + 1] if index + 1 < len(argv) else None
        if not token.startswith("-") or token == "-":
            return token
        action = actions.get(token)
        if action is not None and "=" not in token and action.nargs != 0:
            following = argv[index + 1] if index + 1 < len(argv) else None
            if action.nargs != "?" or (following is not None and not following.startswith("-")):
                index += 1
        index += 1
    return None


def agent_options(args: argparse.Namespace) -> AgentOptions:
    """The parsed agent options as the composition root's typed value."""
    from agentloop._cli.app import AgentOptions

    if args.output_format is not None and not args.print_mode:
        raise ConfigurationError("--output-format needs -p (it formats the one answer)")
    resume = None if args.resume is LATEST else args.resume
    if args.fork_session and args.resume is None and not args.continue_latest:
        raise ConfigurationError("--fork-session needs --resume or --continue (what to fork)")
    return AgentOptions(
        model_name=args.model or DEFAULT_MODEL,
        context_window=args.context_window,
        compaction=not args.disable_compaction,
        threshold=DEFAULT_THRESHOLD
        if args.compaction_threshold is None
        else args.compaction_threshold,
        resume=resume,
        continue_latest=args.continue_latest or args.resume is LATEST,
        pick=args.resume is LATEST,
        prompt=args.prompt,
        print_mode=args.print_mode,
        output_format=args.output_format or "text",
        yes=args.yes,
        store=args.store,
        fork_session=args.fork_session,
        compaction_instructions=args.compaction_instructions,
        strategy=args.compaction_strategy,
        compaction_model=args.compaction_model
        or os.environ.get("AGENTLOOP_COMPACTION_MODEL")
        or None,
        prepare_summaries=_prepare_setting(os.environ.get("AGENTLOOP_PREPARE_SUMMARIES")),
        effort=args.effort,
        model_given=args.model is not None,
        mcp_configs=tuple(_path(f) for f in args.mcp_config),
        no_mcp=args.no_mcp,
    )


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text).expanduser()


def _prepare_setting(value: str | None) -> bool:
    """``AGENTLOOP_PREPARE_SUMMARIES``: on unless 0/no/off/false."""
    if value is None or not value.strip():
        return True
    lowered = value.strip().lower()
    if lowered in ("0", "no", "off", "false"):
        return False
    if lowered in ("1", "yes", "on", "true"):
        return True
    raise ConfigurationError(f"AGENTLOOP_PREPARE_SUMMARIES must be on or off, not {value!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``agentloop`` console script; returns the exit code.

    Run as the program (no ``argv``), it ends the process itself once its output is flushed:
    tearing down the SDK's and pydantic's thousands of objects would take another half second
    after the work is done, and a background import nobody waited for would be waited for.
    """
    code = _main(argv)
    if argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left, a closed stream
            stream.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    agent_parser = build_parser()
    command = first_positional(agent_parser, arguments)
    parser = build_parser(commands=True) if command in COMMANDS else agent_parser
    args = parser.parse_args(arguments)
    try:
        if getattr(args, "command", None) == "sessions":
            from agentloop._cli.sessions_commands import run

            return run(args)
        if getattr(args, "command", None) == "demo":
            from agentloop._cli.demo import run_demo

            return run_demo()
        from agentloop._cli.app import run_agent

        return run_agent(agent_options(args))
    except AgentloopError as error:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:
        # The store's errors (sessions knows nothing of agentloop) are user errors too.
        from agentloop._sessions import SessionError

        if not isinstance(error, SessionError):
            raise
        print(f"agentloop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("agentloop: interrupted", file=sys.stderr)
        return 130
