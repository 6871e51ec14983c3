"""The composition root of the agent: it opens the store, resolves the context window, takes the
session lease, builds the :class:`CodingAgent` with the terminal UI, and runs the interactive
loop or the one ``-p`` turn.

:func:`run_agent` wires the real Anthropic model from the environment; :func:`run_session`
takes any model (the offline demo gives it a scripted one). Light at import: everything heavy
is imported when a session starts (the SDK and the tokenizer in background threads at once).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentloop._core.values.validation import DEFAULT_MODEL, DEFAULT_THRESHOLD
from agentloop._errors import AgentloopError, ConfigurationError

if TYPE_CHECKING:
    from agentloop._adapters.anthropic_capabilities import ModelLifecycle
    from agentloop._adapters.windows import Fetch, ModelLimits
    from agentloop._agent.agent import CodingAgent
    from agentloop._agent.mcp_tools import McpServers
    from agentloop._cli.printmode import OutputFormat
    from agentloop._cli.resume import Picker, Start
    from agentloop._cli.store_access import SessionLeaseKeeper
    from agentloop._cli.terminal import TerminalInput
    from agentloop._cli.ui import TerminalUI
    from agentloop._core.values.model import AsyncModel, Model
    from agentloop._core.values.settings import StrategyName
    from agentloop._sessions import SessionStore


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """What the command line decides about one run of the agent."""

    model_name: str = DEFAULT_MODEL
    context_window: int | None = None
    """Overrides the model's window; None resolves it (cache, Models API, built-in table)."""
    compaction: bool = True
    """Automatic compaction (``/compact`` works either way)."""
    threshold: float = DEFAULT_THRESHOLD
    resume: str | None = None
    """A session id or unique prefix to continue at its newest descendant."""
    continue_latest: bool = False
    """Continue the latest conversation of the workspace (at its newest descendant)."""
    pick: bool = False
    """``-r`` without an id: on a terminal, choose among the recent conversations here."""
    prompt: str | None = None
    """The first message (``-p``: the only one)."""
    print_mode: bool = False
    """``-p``: run one turn, print the final answer only, exit."""
    output_format: OutputFormat = "text"
    yes: bool = False
    """Run shell commands without asking."""
    workspace: Path | None = None
    """The project directory; None is the current directory."""
    echo_input: bool = False
    """Echo each input line on stderr, as a transcript shows it (the demo)."""
    store: str | None = None
    """The session store (path or URL); None: ``$AGENTLOOP_STORE`` or the default file."""
    fork_session: bool = False
    """With resume/continue: continue in a new branch, the resumed session left as it is."""
    compaction_instructions: str | None = None
    """A file of standing instructions for every summary (``--compaction-instructions``)."""
    strategy: StrategyName = "auto"
    """How to compact (``--compaction-strategy``); ``server`` lets the API do it."""
    compaction_model: str | None = None
    prepare_summaries: bool = True
    effort: str | None = None
    """``--effort``: low, medium, high, xhigh or max (None: the model's default)."""
    model_given: bool = True
    """``model_name`` was chosen for this run; else ``-c``/``-r`` continue on the session's."""
    mcp_configs: tuple[Path, ...] = ()
    """``--mcp-config FILE``s; ``no_mcp``: start no MCP server (``--no-mcp``)."""
    no_mcp: bool = False
    """Prepare summaries in the background (``AGENTLOOP_PREPARE_SUMMARIES``; never with -p)."""
    """Another model for summaries (``--compaction-model``); None: the conversation's."""


def _no_key_message() -> str:
    return (
        "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a compatible server); "
        "to see agentloop work offline, run `agentloop demo`"
    )


def run_agent(options: AgentOptions, *, stdin: TextIO | None = None) -> int:
    """``agentloop [options]``: the coding agent on the Anthropic API (key from the
    environment), reading messages from ``stdin`` (default: the process's)."""
    from agentloop._agent.secrets import hide_from_children

    # Before any thread starts: the agent's commands cannot read its credentials from
    # /proc/<pid>/environ (they still work here; the commands get none of them).
    hide_from_children()
    api_key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    if not api_key and not base_url:
        raise ConfigurationError(_no_key_message())
    from agentloop._cli.startup import prewarm

    stdin = stdin or sys.stdin
    # Interactive: the SDK loads while the user types its first message (started at the
    # prompt), so that it does not slow down the way to the prompt.
    typing_first = stdin.isatty() and not options.print_mode
    prewarm(sdk=not typing_first)
    from agentloop._adapters.anthropic import AnthropicModel

    ui = make_ui(options, stdin)
    model = AnthropicModel(
        api_key=api_key or "no-key",
        base_url=base_url,
        on_retry=ui.on_retry,
        stream_timeout=stream_timeout(),
    )

    def fetch(name: str) -> tuple[int | None, int | None]:
        return model.fetch_limits(name)  # the model's one Models API lookup, shared

    return run_session(
        options, model, fetch=fetch, stdin=stdin, ui=ui, lifecycle=model.known_lifecycle
    )


STREAM_TIMEOUT_ENV = "AGENTLOOP_STREAM_TIMEOUT"


def stream_timeout() -> float:
    """Seconds a streamed reply may send nothing before it counts as stalled (and is asked
    again): ``$AGENTLOOP_STREAM_TIMEOUT``, else the adapter's default."""
    from agentloop._adapters.anthropic import STREAM_TIMEOUT

    text = os.environ.get(STREAM_TIMEOUT_ENV, "").strip()
    if not text:
        return STREAM_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigurationError(
            f"{STREAM_TIMEOUT_ENV} must be a number of seconds above 0, not {text!r}"
        )
    return seconds


def make_ui(options: AgentOptions, stdin: TextIO) -> TerminalUI:
    from agentloop._cli.ui import TerminalUI

    tty = sys.stderr.isatty()
    if options.print_mode and options.output_format == "stream-json":
        from agentloop._cli.printmode import StreamJsonUI

        return StreamJsonUI(sys.stdout, sys.stderr, tty=tty)
    return TerminalUI(sys.stdout, sys.stderr, tty=tty, stream=not options.print_mode)


def run_session(
    options: AgentOptions,
    model: Model | AsyncModel,
    *,
    fetch: Fetch | None,
    stdin: TextIO,
    ui: TerminalUI | None = None,
    lifecycle: Callable[[str], ModelLifecycle | None] | None = None,
) -> int:
    """Run the coding agent with ``model`` in the session store; the exit code.

    ``fetch`` asks the Models API for a model's limits (None: never ask); ``lifecycle`` says
    what it answered about a model's life, once asked (deprecated, retired). Store errors (a
    damaged file, an unknown ``resume`` id, a session in use) become one-line
    :class:`AgentloopError`\\ s.
    """
    from agentloop._cli.store_access import SessionLeaseKeeper, open_cli_store
    from agentloop._sessions import SessionError

    try:
        store = open_cli_store(options.store)
    except SessionError as error:  # one line, never a traceback (e.g. a damaged store file)
        raise AgentloopError(str(error)) from None
    lease = SessionLeaseKeeper(store)
    try:
        ui = ui or make_ui(options, stdin)
        return _run(options, model, fetch, store, lease, stdin=stdin, ui=ui, lifecycle=lifecycle)
    except SessionError as error:  # an unknown or malformed --resume id, a busy store...
        raise AgentloopError(str(error)) from None
    finally:
        lease.release()
        store.close()


def _message(options: AgentOptions, stdin: TextIO) -> str | None:
    """The first message: the prompt, and for ``-p`` what was piped in as its context."""
    from agentloop._cli.editor import clean_text

    prompt = clean_text(options.prompt) if options.prompt is not None else None
    if not options.print_mode:
        return prompt
    piped = ""
    if not stdin.isatty():
        binary = getattr(stdin, "buffer", None)
        raw = binary.read() if binary is not None else stdin.read()
        piped = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else clean_text(raw)
    from agentloop._cli.printmode import with_context

    text = with_context(prompt, piped)
    if not text.strip():
        raise ConfigurationError("-p needs a prompt: an argument, or text piped to stdin")
    return text


def _run(
    options: AgentOptions,
    model: Model | AsyncModel,
    fetch: Fetch | None,
    store: SessionStore,
    lease: SessionLeaseKeeper,
    *,
    stdin: TextIO,
    ui: TerminalUI,
    lifecycle: Callable[[str], ModelLifecycle | None] | None = None,
) -> int:
    from agentloop._adapters.windows import ContextWindowResolver
    from agentloop._cli.resume import orientation, resolve_start
    from agentloop._cli.ui import indicator
    from agentloop._cli.window_check import check_window, remembered_window, session_choices
    from agentloop._sessions import default_store_path

    workspace = (options.workspace or Path.cwd()).resolve()
    first = _message(options, stdin)
    start = resolve_start(
        store,
        resume=options.resume,
        continue_latest=options.continue_latest,
        workspace=workspace,
        pick=_picker(options, stdin),
    )
    if start.session_id is not None and options.fork_session:
        from agentloop._adapters.records import fork_session

        fork = fork_session(store, start.session_id)
        start = replace(start, session_id=fork, forked_from=start.session_id)
        if options.output_format != "text":  # else the orientation says it
            print(f"Continuing in a new branch: session {fork[:8]}", file=sys.stderr)
    if start.session_id is not None:
        lease.check(start.session_id)
    ran_on = None if start.session_id is None else store.get_session(start.session_id).model
    if ran_on and not options.model_given:
        options = replace(options, model_name=ran_on)
    resolver = ContextWindowResolver(
        fetch=fetch, cache_path=default_store_path().parent / "models.json"
    )
    from agentloop._cli.model_check import (
        DeprecationNotices,
        retired,
        unknown_model,
        window_above_model,
    )
    from agentloop._cli.ui import shown

    warnings: list[str] = []
    own = resolver.resolve(options.model_name)  # the model's own limits, whatever the override
    unknown = None
    if fetch is not None and own.source not in ("cache", "models_api"):
        unknown = unknown_model(fetch, options.model_name)  # the lookup the resolver made
    if unknown is None and lifecycle is not None:  # known when the resolver asked the API
        unknown = retired(options.model_name, lifecycle(options.model_name))
    if unknown is not None:
        if not options.model_given and ran_on == options.model_name:
            warnings.append(f"{unknown}: the session ran on it; continuing on {DEFAULT_MODEL}")
            options = replace(options, model_name=DEFAULT_MODEL)
            own = resolver.resolve(options.model_name)
        else:
            raise ConfigurationError(f"{unknown}: choose another with -m (default {DEFAULT_MODEL})")
    window = options.context_window
    if window is None and start.session_id is not None:
        window = remembered_window(store, start.session_id)
    above = (
        None
        if window is None
        else window_above_model(
            window, own, options.model_name, given=options.context_window is not None
        )
    )
    if above is not None and options.context_window is not None:
        raise ConfigurationError(above)
    if above is not None:
        warnings.append(f"{above}; the model's window is used")
        window = None
    limits = own if window is None else resolver.resolve(options.model_name, window)
    if window is not None and options.context_window is None:
        limits = replace(limits, source="session")
    notices = DeprecationNotices(lifecycle)
    warnings += [w for w in (limits.warning, notices.line(options.model_name)) if w]
    for warning in warnings:
        print(shown(f"agentloop: warning: {warning}", sys.stderr), file=sys.stderr)
    from agentloop._cli.mcp_setup import resumed_notice, start_mcp

    mcp = start_mcp(options, workspace, stdin)  # ended below, at exit or Ctrl-C
    try:
        agent = _build_agent(options, model, store, workspace, limits, start, stdin, ui, mcp)
    except BaseException:
        if mcp is not None:
            mcp.close()
        raise
    agent.effort = options.effort
    if start.session_id is not None and (notice := resumed_notice(agent)) is not None:
        print(f"agentloop: warning: {notice}", file=sys.stderr)
    check_window(agent, limits)
    choices = session_choices(store, agent, window)
    lease.attach(agent)
    if start.session_id is not None:
        lease.acquire(start.session_id)
    lease.keep(lambda: agent.session_id if agent.saved else None)
    enabled = agent.compaction_status().enabled
    if stdin.isatty() and not options.print_mode:  # the banner first, then where it resumes
        _banner(agent)
    if start.session_id is not None and options.output_format == "text":
        context = indicator(agent.context(), enabled=enabled)

        for line in orientation(store, start, agent.messages, here=workspace, context_line=context):
            print(shown(line, sys.stderr), file=sys.stderr)
        if ran_on and ran_on != agent.model_name:
            note = f"Model: {agent.model_name} (-m) for the next turns; the session ran on {ran_on}"
            print(shown(note, sys.stderr), file=sys.stderr)
        if agent.instructions_notice is not None:
            print(shown(agent.instructions_notice, sys.stderr), file=sys.stderr)

    def after_command() -> None:
        """After a turn or a command: the session's choices kept, and the model's deprecation
        said once the Models API has answered (the first request on a model asks it)."""
        choices.sync()
        if (line := notices.line(agent.model_name)) is not None:
            print(shown(f"agentloop: warning: {line}", sys.stderr), file=sys.stderr)

    def kept() -> bool:
        """A new session whose model never answered is not kept (nothing worth resuming)."""
        return agent.saved and (start.session_id is not None or ui.replies > 0)

    try:
        if options.print_mode:
            from agentloop._cli.printmode import run_print

            assert first is not None
            code = run_print(agent, ui, first, output_format=options.output_format, kept=kept)
            after_command()
        else:
            code = _interactive(options, agent, ui, stdin, first, kept, lease, after_command)
    finally:
        agent.close()  # nothing left running in the background (what it prepared: counted)
        if mcp is not None:
            mcp.close()
        _forget_if_empty(agent, store, start, kept, lease)
        if kept():
            choices.sync()
    if code and options.print_mode and kept() and not agent.unsaved:
        sid = agent.session_id[:8]
        print(
            f"(session {sid} is saved; continue with `agentloop --resume {sid}`)", file=sys.stderr
        )
    return code


def _build_agent(
    options: AgentOptions,
    model: Model | AsyncModel,
    store: SessionStore,
    workspace: Path,
    limits: ModelLimits,
    start: Start,
    stdin: TextIO,
    ui: TerminalUI,
    mcp: McpServers | None = None,
) -> CodingAgent:
    from agentloop._agent.agent import CodingAgent
    from agentloop._agent.shell import always_allow, never_allow
    from agentloop._core.compaction_core import CompactionSettings
    from agentloop._core.measuring.context import reply_reserve

    if options.yes:
        approve: Callable[[str], bool] = always_allow
    elif stdin.isatty():
        from agentloop._cli.consent import terminal_consent

        terminal = _terminal(stdin)
        approve = terminal_consent(
            terminal.read_line, sys.stderr, before_asking=terminal.take_pending
        )
    else:
        approve = never_allow
    return CodingAgent(
        model=model,
        model_name=options.model_name,
        workspace=workspace,
        store=store,
        context_window=limits.context_window,
        max_output_tokens=reply_reserve(limits.context_window, limits.max_output_tokens),
        window_source=limits.source,
        settings=CompactionSettings(
            enabled=options.compaction,
            threshold=options.threshold,
            strategy=options.strategy,
            standing_instructions=summary_instructions(options, workspace),
            summary_model=options.compaction_model,
            # One turn and the process ends: a summary prepared ahead could never be applied.
            prepare_at=CompactionSettings().prepare_at
            if options.prepare_summaries and not options.print_mode
            else None,
        ),
        approve=approve,
        events=ui,
        resume_id=start.session_id,
        mcp=mcp,
    )


SUMMARY_SECTION = "## Compaction"
"""The section of the workspace's AGENTLOOP.md that every summary follows."""


def summary_instructions(options: AgentOptions, workspace: Path) -> str:
    """Standing instructions for every summary: ``--compaction-instructions FILE``, else the
    ``## Compaction`` section of the workspace's AGENTLOOP.md (empty when there is none)."""
    if options.compaction_instructions is not None:
        path = Path(options.compaction_instructions)
        try:
            return path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as error:
            raise ConfigurationError(
                f"cannot read the compaction instructions {path}: {error.strerror or error}"
            ) from None
    try:
        text = (workspace / "AGENTLOOP.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().lower() == SUMMARY_SECTION.lower()]
    if not starts:
        return ""
    section: list[str] = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith("## ") or line.startswith("# "):
            break
        section.append(line)
    return "\n".join(section).strip()


_TERMINALS: dict[int, TerminalInput] = {}


def _picker(options: AgentOptions, stdin: TextIO) -> Picker | None:
    """The ``-r`` picker where someone can answer it (else ``-r`` takes the latest)."""
    if not options.pick or options.print_mode or not stdin.isatty():
        return None
    from agentloop._cli.picker import terminal_picker

    return terminal_picker(_terminal(stdin).read_key, sys.stderr)


def _terminal(stdin: TextIO) -> TerminalInput:
    """One :class:`TerminalInput` per terminal (the consent and the read loop share it)."""
    from agentloop._cli.terminal import TerminalInput

    fd = stdin.fileno()
    if fd not in _TERMINALS:
        _TERMINALS[fd] = TerminalInput(fd)
    return _TERMINALS[fd]


def _interactive(
    options: AgentOptions,
    agent: CodingAgent,
    ui: TerminalUI,
    stdin: TextIO,
    first: str | None,
    kept: Callable[[], bool],
    lease: SessionLeaseKeeper,
    keep_choices: Callable[[], None] = lambda: None,
) -> int:
    from agentloop._cli.editor import PipeReader, Reader
    from agentloop._cli.repl import Repl

    tty = stdin.isatty()
    repl: Repl
    if tty:
        import signal

        from agentloop._cli.compact_review import terminal_ask
        from agentloop._cli.editor import history_path, terminal_reader

        # Ended from outside: unwind, so the terminal gets its echo back and the lease goes.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        signal.signal(signal.SIGHUP, lambda signum, frame: sys.exit(128 + signum))
        from agentloop._sessions import default_store_path

        terminal = _terminal(stdin)
        # The prompt is drawn where the user sees it, even with one stream redirected.
        screen = sys.stderr if sys.stderr.isatty() or not sys.stdout.isatty() else sys.stdout
        reader: Reader = terminal_reader(
            history=history_path(default_store_path().parent), output=screen
        )
        repl = Repl(
            agent,
            ui,
            reader,
            busy=terminal.busy,
            kept_input=terminal.kept,
            show_context=True,
            kept=kept,
            ask=terminal_ask(terminal, sys.stderr),
        )
    else:
        repl = Repl(
            agent,
            ui,
            PipeReader(stdin),
            echo_input=options.echo_input,
            kept=kept,
            stop_when_unsaved=True,
        )
        repl.show_context = options.echo_input

    def after_turn() -> None:
        lease.follow(agent.session_id if agent.saved else None)
        keep_choices()  # /model, /clear, /undo-compaction: the session now in use

    repl.after_turn = after_turn
    if tty:
        from agentloop._cli.startup import prewarm

        prewarm(tokenizer=False, renderer=ui.markdown is not None)
    code = repl.run(first)
    if agent.unsaved:
        print(
            f"agentloop: warning: the end of session {agent.session_id[:8]} was not saved (the "
            "store refused the writes)",
            file=sys.stderr,
        )
    elif tty and kept():
        from agentloop._cli.ui import shown

        sid = agent.session_id[:8]
        saved = f"Session {sid} saved · continue with `agentloop --continue` or "
        saved += f"`agentloop --resume {sid}`"
        print(shown(saved, sys.stderr), file=sys.stderr)
    return code


def _banner(agent: CodingAgent) -> None:
    """The start line: model, window, workspace, where help is."""
    from agentloop._cli.ui import shown, start_line

    decision = agent.context()
    banner = start_line(
        agent.model_name,
        None if decision is None else decision.usage.window,
        agent.compaction_status().window_source,
        str(agent.workspace),
    )
    print(shown(banner, sys.stderr), file=sys.stderr)


def _forget_if_empty(
    agent: CodingAgent,
    store: SessionStore,
    start: Start,
    kept: Callable[[], bool],
    lease: SessionLeaseKeeper,
) -> None:
    """A run that created a session whose model never answered (auth, 404, refused connection)
    leaves nothing behind: no 1-message session for ``--continue`` to find."""
    if kept() or not agent.saved or start.session_id is not None:
        return
    from agentloop._sessions import SessionError

    with contextlib.suppress(SessionError):  # it stays: --continue skips it all the same
        if store.get_session(agent.session_id).parent_id is None:  # never a compacted one
            lease.release()  # a leased session cannot be deleted
            store.delete_session(agent.session_id)
