"""MCP servers on the command line: which are configured (``--mcp-config``, ``--no-mcp``, the
user's file, a trusted workspace ``.mcp.json``), asking once whether to trust the workspace's
file, starting them at launch (a line per server that did not start), and ``/mcp``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._agent.mcp_config import Ask, ServerSpec
    from agentloop._agent.mcp_tools import McpServers

__all__ = ["mcp_command", "resumed_notice", "start_mcp", "trust_path"]

TRUST_FILE = "mcp-trust.json"


class Options(Protocol):
    """What the command line said about MCP (the run's ``AgentOptions``)."""

    @property
    def no_mcp(self) -> bool: ...

    @property
    def mcp_configs(self) -> tuple[Path, ...]: ...

    @property
    def print_mode(self) -> bool: ...


def trust_path() -> Path:
    """Where the workspace files the user trusted are remembered (beside the store)."""
    from agentloop._sessions import default_store_path

    return default_store_path().parent / TRUST_FILE


def _warn(text: str) -> None:
    from agentloop._cli.ui import shown

    print(shown(f"agentloop: warning: {text}", sys.stderr), file=sys.stderr, flush=True)


def _asker(stdin: TextIO) -> Ask:
    def ask(path: Path, servers: dict[str, ServerSpec]) -> bool:
        from agentloop._agent.mcp_config import HttpServer

        print(f"{path} asks to start MCP servers:", file=sys.stderr)
        for name, spec in servers.items():
            what = (
                spec.url if isinstance(spec, HttpServer) else " ".join([spec.command, *spec.args])
            )
            print(f"  {name}: {what}", file=sys.stderr)
        print("Trust this file and start them? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = stdin.readline()
        return answer.strip().lower() in ("y", "yes")

    return ask


def start_mcp(options: Options, workspace: Path, stdin: TextIO) -> McpServers | None:
    """The configured servers started (None: none is configured, or ``--no-mcp``)."""
    if options.no_mcp:
        return None
    from agentloop._agent.instructions import user_config_dir
    from agentloop._agent.mcp_config import TrustBook, load_mcp_config
    from agentloop._agent.mcp_tools import open_mcp

    config = load_mcp_config(
        workspace,
        config_dir=user_config_dir(),
        files=list(options.mcp_configs),
        trust=TrustBook(trust_path()),
        ask=_asker(stdin) if stdin.isatty() and not options.print_mode else None,
    )
    servers: McpServers | None = None
    if config.servers:
        servers = open_mcp(config, on_notice=_warn)
        problems = servers.problems
    else:
        problems = config.problems
    for line in problems:
        _warn(line)
    return servers


def mcp_command(agent: CodingAgent, rest: str) -> None:
    """``/mcp``: each server, its state, its tools and the tokens their definitions cost in
    every request."""
    lines = agent.mcp_report()
    print(
        "\n".join(lines)
        if lines
        else "No MCP servers (configure them in .mcp.json, in mcp.json of the config directory, "
        "or with --mcp-config FILE)"
    )


def resumed_notice(agent: CodingAgent) -> str | None:
    """One line when the MCP tools differ from those the resumed session started with: the
    session keeps its own (the tool set stays byte-stable); None when they do not differ."""
    if agent.mcp is None:
        return None
    from agentloop._core.values.tool import tool_definition

    now = {t.name: tool_definition(t) for t in agent.mcp.tools}
    then = {
        str(d.get("name")): d for d in agent.prefix.tools if str(d.get("name")).startswith("mcp__")
    }
    new = [name for name in now if name not in then]
    gone = [name for name in then if name not in now]
    changed = [name for name in now if name in then and now[name] != then[name]]
    if not (new or gone or changed):
        return None
    parts = [f"{len(new)} new (not offered: a new session gets them)"] if new else []
    parts += [f"{len(gone)} gone (a call is answered with an error)"] if gone else []
    parts += [f"{len(changed)} changed (sent as first defined)"] if changed else []
    return "MCP tools differ from when this session started: " + ", ".join(parts)
