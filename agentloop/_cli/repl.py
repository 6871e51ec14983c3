"""The interactive agent and the offline demo behind ``agentloop``: parse, build, print."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from agentloop._cli.main import DEFAULT_MODEL
from agentloop._core.compacter import CompactionSettings, CompactionTransition
from agentloop._core.context import CompactionDecision
from agentloop._core.tool import ToolResult
from agentloop._errors import AgentloopError, ConfigurationError
from agentloop._loop.agent_loop import LoopEvents

HELP_TEXT = """\
Commands:
  /compact [instructions]  compact the conversation now (instructions guide the summary)
  /context                 context usage, where compaction triggers, the window and its source
  /sessions                sessions of this workspace
  /help                    this help
  /exit                    leave (the session is saved; continue later with --continue)"""


def notice(transition: CompactionTransition) -> str:
    """The one line a user sees on every compaction."""
    summary = transition.summary
    return (
        f"Conversation compacted: {summary.original_message_count} messages → new session "
        f"{transition.new_session_id[:8]} ({summary.tokens_before:,} → {summary.tokens_after:,} "
        "tokens)"
    )


class TerminalUI(LoopEvents):
    """Replies to ``out``; notices, tool activity and the spinner to ``err``."""

    def __init__(self, out: TextIO, err: TextIO, *, tty: bool) -> None:
        self.out = out
        self.err = err
        self.tty = tty
        self._wrote_text = False
        self._spinner: threading.Event | None = None

    def on_text(self, delta: str) -> None:
        self.out.write(delta)
        self.out.flush()
        self._wrote_text = True

    def on_reply(self, response: Any) -> None:
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        detail = next(
            (str(tool_input[k]) for k in ("command", "path", "pattern") if k in tool_input), ""
        )
        self.err.write(f"  ⏺ {name}{f' {detail[:80]}' if detail else ''}\n")
        self.err.flush()

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        if result.is_error:
            first = result.content.strip().splitlines()[0] if result.content.strip() else "error"
            self.err.write(f"    ✗ {first[:160]}\n")
            self.err.flush()

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        if not self.tty:
            return
        stop = threading.Event()
        self._spinner = stop

        def spin() -> None:
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            index = 0
            while not stop.wait(0.1):
                self.err.write(f"\r{frames[index % len(frames)]} Compacting conversation…")
                self.err.flush()
                index += 1
            self.err.write("\r\033[K")
            self.err.flush()

        threading.Thread(target=spin, daemon=True).start()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.set()
            self._spinner = None

    def on_transition(self, transition: CompactionTransition) -> None:
        self._stop_spinner()
        self.err.write(notice(transition) + "\n")
        for warning in transition.summary.warnings:
            self.err.write(f"  warning: {warning}\n")
        if transition.summary.fallback_reason:
            reason = transition.summary.fallback_reason
            self.err.write(f"  note: summary built without a model: {reason}\n")
        self.err.flush()

    def on_compaction_skipped(self, reason: str) -> None:
        self._stop_spinner()
        self.err.write(f"Compaction skipped: {reason}\n")
        self.err.flush()


def indicator(decision: CompactionDecision | None, *, enabled: bool) -> str:
    """The quiet after-turn line; it uses the same numbers as the trigger."""
    if decision is None:
        return ""
    window = decision.usage.window
    used = decision.usage.fraction
    if not enabled:
        return f"context {used:.0%} · automatic compaction off"
    return f"context {used:.0%} · compacts at {decision.trigger_tokens / window:.0%}"


def context_report(agent: Any) -> str:
    decision: CompactionDecision = agent.loop.context()
    usage = decision.usage
    compacter = agent.compacter
    calibration = compacter.calibration
    lines = [
        f"Context: {usage.tokens:,} / {usage.window:,} tokens ({usage.fraction:.0%}), "
        f"measured from {usage.source}",
        f"Compaction: triggers at {decision.trigger_tokens:,} tokens "
        f"({decision.trigger_tokens / usage.window:.0%}; threshold {decision.threshold:.0%})"
        + ("" if compacter.settings.enabled else " — automatic compaction is disabled"),
        f"Decision: {decision.reason}",
        f"Window: {usage.window:,} tokens (source: {compacter.window_source}); "
        f"replies up to {compacter.max_output_tokens:,} tokens",
    ]
    if calibration is not None:
        lines.append(
            f"Calibration: API tokens ≈ {calibration.ratio:.2f} × local estimate "
            f"({calibration.samples} samples)"
        )
    lines.append(f"Session: {agent.session_id} ({len(agent.loop.messages)} messages)")
    return "\n".join(lines)


def _no_key_message() -> str:
    return (
        "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a compatible server); "
        "to see agentloop work offline, run `agentloop demo`"
    )


def _resolve_start(args: argparse.Namespace, store: Any, workspace: Path) -> str | None:
    """The session to continue (its newest descendant), or None for a new session."""
    if args.resume:
        return str(store.newest_descendant(store.resolve_id(args.resume)).id)
    if args.resume == "" or args.continue_latest:
        latest = store.list_sessions(workspace=str(workspace), limit=1)
        if not latest:
            raise AgentloopError(f"no session to continue in {workspace}")
        return str(store.newest_descendant(latest[0].id).id)
    return None


def run_agent(args: argparse.Namespace, *, stdin: TextIO | None = None) -> int:
    """``agentloop [options]``: the interactive coding agent."""
    stdin = stdin or sys.stdin
    api_key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    if not api_key and not base_url:
        raise ConfigurationError(_no_key_message())
    from agentloop._adapters.anthropic import AnthropicModel, fetch_model_limits

    model = AnthropicModel(api_key=api_key or "no-key", base_url=base_url)
    model_name = args.model or DEFAULT_MODEL

    def fetch(name: str) -> tuple[int | None, int | None]:
        return fetch_model_limits(name, api_key=api_key or "no-key", base_url=base_url)

    return _session(args, model, model_name, fetch, stdin=stdin)


def _session(
    args: argparse.Namespace,
    model: Any,
    model_name: str,
    fetch: Callable[[str], tuple[int | None, int | None]] | None,
    *,
    stdin: TextIO,
    workspace: Path | None = None,
    approve: Callable[[str], bool] | None = None,
    settings: CompactionSettings | None = None,
    echo_input: bool = False,
) -> int:
    from sessions import SessionError, open_store

    tty = stdin.isatty()
    workspace = (workspace or Path.cwd()).resolve()
    try:
        store = open_store()
    except SessionError as error:  # one line, never a traceback (e.g. a damaged store file)
        raise AgentloopError(str(error)) from None
    try:
        return _run_session(
            args,
            model,
            model_name,
            fetch,
            store,
            stdin=stdin,
            tty=tty,
            workspace=workspace,
            approve=approve,
            settings=settings,
            echo_input=echo_input,
        )
    except SessionError as error:  # an unknown or malformed --resume id, a busy store...
        raise AgentloopError(str(error)) from None
    finally:
        store.close()


def _run_session(
    args: argparse.Namespace,
    model: Any,
    model_name: str,
    fetch: Callable[[str], tuple[int | None, int | None]] | None,
    store: Any,
    *,
    stdin: TextIO,
    tty: bool,
    workspace: Path,
    approve: Callable[[str], bool] | None,
    settings: CompactionSettings | None,
    echo_input: bool,
) -> int:
    from agentloop._adapters.windows import ContextWindowResolver
    from agentloop._agent.agent import CodingAgent
    from agentloop._agent.tools import always_allow, never_allow, terminal_consent
    from sessions import default_store_path

    resolver = ContextWindowResolver(
        fetch=fetch, cache_path=default_store_path().parent / "models.json"
    )
    limits = resolver.resolve(model_name, args.context_window)
    if limits.warning:
        print(f"agentloop: warning: {limits.warning}", file=sys.stderr)
    if approve is None:
        approve = always_allow if args.yes else (terminal_consent() if tty else never_allow)
    if settings is None:
        threshold = args.compaction_threshold
        settings = CompactionSettings(
            enabled=not args.disable_compaction,
            threshold=0.85 if threshold is None else threshold,
        )
    ui = TerminalUI(sys.stdout, sys.stderr, tty=tty)
    resume_id = _resolve_start(args, store, workspace)
    agent = CodingAgent(
        model=model,
        model_name=model_name,
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
    return _repl(agent, ui, args, stdin=stdin, tty=tty, echo_input=echo_input)


def _repl(
    agent: Any,
    ui: TerminalUI,
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    tty: bool,
    echo_input: bool,
) -> int:
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

    if args.prompt is not None:
        turn(args.prompt)
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
            if not _slash(agent, text):
                break
            continue
        turn(text)
    return 1 if failures else 0


def _slash(agent: Any, text: str) -> bool:
    """Run a slash command; False means exit."""
    command, _, rest = text.partition(" ")
    if command in ("/exit", "/quit"):
        return False
    if command == "/help":
        print(HELP_TEXT, file=sys.stderr)
    elif command == "/context":
        print(context_report(agent), file=sys.stderr)
    elif command == "/compact":
        transition = agent.compact(rest.strip() or None)
        compacter = agent.compacter
        # An attempted compaction already reported why it was skipped (on_compaction_skipped).
        if transition is None and not compacter.last_outcome and compacter.last_decision:
            print(f"Nothing compacted: {compacter.last_decision.reason}", file=sys.stderr)
    elif command == "/sessions":
        from agentloop._cli.main import main

        main(["sessions", "list", "--workspace", str(agent.workspace)])
    else:
        print(f"unknown command {command}; /help lists the commands", file=sys.stderr)
    return True
