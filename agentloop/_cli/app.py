"""The composition root of the interactive agent: it opens the store, resolves the context
window, builds the :class:`CodingAgent` with the terminal UI and runs the REPL.

:func:`run_agent` wires the real Anthropic model from the environment; :func:`run_session`
takes any model (the offline demo gives it a scripted one). Light at import: everything heavy
is imported when a session starts.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentloop._core.validation import DEFAULT_MODEL, DEFAULT_THRESHOLD
from agentloop._errors import AgentloopError, ConfigurationError

if TYPE_CHECKING:
    from agentloop._adapters.windows import Fetch
    from agentloop._core.model import AsyncModel, Model
    from sessions import SessionStore


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
    """Continue the latest session of the workspace (at its newest descendant)."""
    prompt: str | None = None
    """Run this one turn, then exit; None reads turns from stdin."""
    yes: bool = False
    """Run shell commands without asking."""
    workspace: Path | None = None
    """The project directory; None is the current directory."""
    echo_input: bool = False
    """Echo each input line on stderr, as a transcript shows it (the demo)."""


def _no_key_message() -> str:
    return (
        "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a compatible server); "
        "to see agentloop work offline, run `agentloop demo`"
    )


def run_agent(options: AgentOptions, *, stdin: TextIO | None = None) -> int:
    """``agentloop [options]``: the coding agent on the Anthropic API (key from the
    environment), reading turns from ``stdin`` (default: the process's)."""
    api_key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    if not api_key and not base_url:
        raise ConfigurationError(_no_key_message())
    from agentloop._adapters.anthropic import AnthropicModel, fetch_model_limits

    model = AnthropicModel(api_key=api_key or "no-key", base_url=base_url)

    def fetch(name: str) -> tuple[int | None, int | None]:
        return fetch_model_limits(name, api_key=api_key or "no-key", base_url=base_url)

    return run_session(options, model, fetch=fetch, stdin=stdin or sys.stdin)


def run_session(
    options: AgentOptions,
    model: Model | AsyncModel,
    *,
    fetch: Fetch | None,
    stdin: TextIO,
) -> int:
    """Run the coding agent with ``model`` in the default session store; the exit code.

    ``fetch`` asks the Models API for a model's limits (None: never ask). Store errors (a
    damaged file, an unknown ``resume`` id) become one-line :class:`AgentloopError`\\ s.
    """
    from sessions import SessionError, open_store

    try:
        store = open_store()
    except SessionError as error:  # one line, never a traceback (e.g. a damaged store file)
        raise AgentloopError(str(error)) from None
    try:
        return _run(options, model, fetch, store, stdin=stdin)
    except SessionError as error:  # an unknown or malformed --resume id, a busy store...
        raise AgentloopError(str(error)) from None
    finally:
        store.close()


def _run(
    options: AgentOptions,
    model: Model | AsyncModel,
    fetch: Fetch | None,
    store: SessionStore,
    *,
    stdin: TextIO,
) -> int:
    from agentloop._adapters.windows import ContextWindowResolver
    from agentloop._agent.agent import CodingAgent
    from agentloop._agent.shell import always_allow, never_allow
    from agentloop._cli.consent import terminal_consent
    from agentloop._cli.repl import run_repl
    from agentloop._cli.ui import TerminalUI
    from agentloop._core.compacter import CompactionSettings
    from sessions import default_store_path

    tty = stdin.isatty()
    workspace = (options.workspace or Path.cwd()).resolve()
    resolver = ContextWindowResolver(
        fetch=fetch, cache_path=default_store_path().parent / "models.json"
    )
    limits = resolver.resolve(options.model_name, options.context_window)
    if limits.warning:
        print(f"agentloop: warning: {limits.warning}", file=sys.stderr)
    approve = always_allow if options.yes else (terminal_consent() if tty else never_allow)
    settings = CompactionSettings(enabled=options.compaction, threshold=options.threshold)
    ui = TerminalUI(sys.stdout, sys.stderr, tty=tty)
    resume_id = _resolve_start(options, store, workspace)
    agent = CodingAgent(
        model=model,
        model_name=options.model_name,
        workspace=workspace,
        store=store,
        context_window=limits.context_window,
        max_output_tokens=limits.max_output_tokens,
        window_source=limits.source,
        settings=settings,
        approve=approve,
        events=ui,
        resume_id=resume_id,
    )
    if resume_id is not None:
        count = len(agent.loop.messages)
        print(f"Resuming session {resume_id[:8]} ({count} messages)", file=sys.stderr)
    return run_repl(
        agent,
        ui,
        prompt=options.prompt,
        stdin=stdin,
        tty=tty,
        echo_input=options.echo_input,
    )


def _resolve_start(options: AgentOptions, store: SessionStore, workspace: Path) -> str | None:
    """The session to continue (its newest descendant), or None for a new session."""
    if options.resume is not None:
        return store.newest_descendant(store.resolve_id(options.resume)).id
    if options.continue_latest:
        latest = store.list_sessions(workspace=str(workspace), limit=1)
        if not latest:
            raise AgentloopError(f"no session to continue in {workspace}")
        return store.newest_descendant(latest[0].id).id
    return None
