"""MCP servers as users already configure them: Claude Code's ``.mcp.json`` shape
(``{"mcpServers": {name: {"command", "args", "env"} | {"type": "http", "url", "headers"}}}``),
``${VAR}`` and ``${VAR:-default}`` expanded from the environment, and the names the model sees
(``mcp__<server>__<tool>``).

Where they come from: the user's own file (``mcp.json`` in ``AGENTLOOP_CONFIG_DIR``), the
workspace's ``.mcp.json`` once the user trusted it (it can start programs: trust is kept per
file content, so a changed file is asked about again), and ``--mcp-config FILE`` (the user named
it: trusted). A later source's server replaces an earlier one of the same name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop._errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_START_TIMEOUT",
    "MAX_TOKENS_ENV",
    "USER_FILE",
    "WORKSPACE_FILE",
    "HttpServer",
    "McpConfig",
    "ServerSpec",
    "StdioServer",
    "TrustBook",
    "load_mcp_config",
    "parse_servers",
    "tool_name",
]

WORKSPACE_FILE = ".mcp.json"
USER_FILE = "mcp.json"
"""The user's own servers, in ``AGENTLOOP_CONFIG_DIR`` (beside the user's AGENTLOOP.md)."""
DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server has to start and list its tools."""
DEFAULT_MAX_TOKENS = 25_000
"""A result over this many tokens is shortened for the model (Claude Code's default)."""
MAX_TOKENS_ENV = "AGENTLOOP_MCP_MAX_TOKENS"
NAME_LIMIT = 128
"""The API's longest tool name."""
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    allow: list[str] = Field(default_factory=list)
    """Tools (their names on the server, ``*`` for all) run without asking."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds to start (default :data:`DEFAULT_START_TIMEOUT`)."""


class StdioServer(_Common):
    """A server the agent starts as a program, spoken to on its stdin and stdout."""

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class HttpServer(_Common):
    """A remote server over streamable HTTP."""

    type: Literal["http"]
    url: str = Field(min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)


ServerSpec = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class McpConfig:
    """The servers to start (by name) and what was wrong with the others (one line each)."""

    servers: dict[str, ServerSpec] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` as Claude Code writes it: every character but letters, digits,
    ``_`` and ``-`` becomes ``_``; cut to the API's 128 characters."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:NAME_LIMIT]


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``environ``; :class:`KeyError` names a variable
    that is unset and has no default."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise KeyError(name)

    return _VARIABLE.sub(one, value)


def _expanded(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return expand(value, environ)
    if isinstance(value, list):
        return [_expanded(item, environ) for item in value]
    if isinstance(value, dict):
        return {key: _expanded(item, environ) for key, item in value.items()}
    return value


def parse_servers(
    data: object, source: str, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, ServerSpec], list[str]]:
    """The servers of one configuration (``{"mcpServers": {...}}``, or the bare mapping) and a
    line per server that cannot be used (the rest are still used)."""
    environ = os.environ if environ is None else environ
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    if not isinstance(data, dict):
        return {}, [f'{source}: expected an object of servers under "mcpServers"']
    servers: dict[str, ServerSpec] = {}
    problems: list[str] = []
    for name, raw in data.items():
        try:
            entry = _expanded(raw, environ)
        except KeyError as missing:
            problems.append(f"{name}: not started: ${{{missing.args[0]}}} is not set ({source})")
            continue
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "streamable-http":  # another spelling some clients write
            entry, kind = {**entry, "type": "http"}, "http"
        try:
            if kind == "http":
                servers[str(name)] = HttpServer.model_validate(entry)
            else:
                servers[str(name)] = StdioServer.model_validate(entry)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "entry"
            problems.append(f"{name}: not started: {where}: {first['msg']} ({source})")
    return servers, problems


def _read(path: Path) -> tuple[object, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except OSError as error:
        return None, f"{path}: cannot be read: {error.strerror or error}"
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return None, f"{path}: not valid JSON: {error}"


class TrustBook:
    """Which workspace ``.mcp.json`` files the user said yes to, by path and content (a file
    that changed is asked about again)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _entries(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    @staticmethod
    def _digest(file: Path) -> str:
        return hashlib.sha256(file.read_bytes()).hexdigest()

    def trusted(self, file: Path) -> bool:
        try:
            return self._entries().get(str(file.resolve())) == self._digest(file)
        except OSError:
            return False

    def trust(self, file: Path) -> None:
        entries = self._entries()
        entries[str(file.resolve())] = self._digest(file)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.path)


Ask = Callable[[Path, dict[str, ServerSpec]], bool]
"""Asks the user whether to trust a workspace file that would start these servers."""


def load_mcp_config(
    workspace: Path,
    *,
    config_dir: Path,
    files: list[Path] | None = None,
    trust: TrustBook | None = None,
    ask: Ask | None = None,
) -> McpConfig:
    """The servers of the user's file, the workspace's ``.mcp.json`` (when trusted, or when
    ``ask`` says yes: then it is remembered in ``trust``), and ``files`` (``--mcp-config``,
    trusted: the user named them). A named file that cannot be read is an error; a server that
    cannot be used is a problem line."""
    config = McpConfig()
    candidates: list[tuple[Path, bool]] = [(config_dir / USER_FILE, False)]
    candidates.append((workspace / WORKSPACE_FILE, False))
    candidates += [(path, True) for path in files or []]
    for path, named in candidates:
        if not named and not path.is_file():
            continue
        data, problem = _read(path)
        if problem is not None:
            if named:
                raise ConfigurationError(f"--mcp-config {problem}")
            config.problems.append(problem)
            continue
        servers, problems = parse_servers(data, path.name)
        is_workspace = not named and path == workspace / WORKSPACE_FILE
        if is_workspace and servers and not (trust is not None and trust.trusted(path)):
            if ask is None or not ask(path, servers):
                names = ", ".join(servers)
                config.problems.append(
                    f"{WORKSPACE_FILE} of this workspace is not trusted: its servers ({names}) "
                    "were not started (answer yes once in an interactive run, or pass "
                    f"--mcp-config {WORKSPACE_FILE})"
                )
                continue
            if trust is not None:
                trust.trust(path)
        config.servers.update(servers)
        config.problems.extend(problems)
        config.sources.append(str(path))
    return config


def max_result_tokens(environ: Mapping[str, str] | None = None) -> int:
    """``AGENTLOOP_MCP_MAX_TOKENS``, else :data:`DEFAULT_MAX_TOKENS`."""
    raw = (os.environ if environ is None else environ).get(MAX_TOKENS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_TOKENS
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{MAX_TOKENS_ENV} must be a whole number, got {raw!r}") from None
    if value < 100:
        raise ConfigurationError(f"{MAX_TOKENS_ENV} must be at least 100, got {value}")
    return value
