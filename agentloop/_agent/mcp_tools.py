"""MCP servers' tools as agentloop tools: named ``mcp__<server>__<tool>``, their schemas passed
through, asked about like shell commands, their results as the Messages API takes them (text,
images, PDF documents; resource links as text) and never drowning the window: a result over
the cap (``AGENTLOOP_MCP_MAX_TOKENS``, default 25,000 tokens) reaches the model shortened while
the session stores it whole, where ``search_history`` finds it.

For library users, :func:`open_mcp` (and :func:`aopen_mcp`) opens the servers of a
configuration (the ``.mcp.json`` shape) and gives their tools for :class:`~agentloop.AgentLoop`;
the servers end with ``close()``, the ``with`` block, or the loop (:meth:`McpServers.close_with`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentloop._agent.mcp_config import (
    McpConfig,
    ServerSpec,
    parse_servers,
    tool_name,
)
from agentloop._agent.mcp_config import max_result_tokens as max_tokens_setting
from agentloop._agent.mcp_hub import McpCallError, McpHub, ServerState
from agentloop._agent.secrets import redact
from agentloop._core.values.blocks import is_text, is_tool_result, is_tool_use
from agentloop._core.values.messages import Message
from agentloop._core.values.shorten import shorten
from agentloop._core.values.tool import Tool, ToolResult
from agentloop._errors import ConfigurationError

__all__ = [
    "CALL_TIMEOUT",
    "McpServers",
    "McpTool",
    "aopen_mcp",
    "convert_result",
    "mcp_report",
    "open_mcp",
    "shortened_results",
]

CALL_TIMEOUT = 600.0
"""Seconds a tool call may take before it is given up (Ctrl-C gives it up at once)."""
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The images the Messages API takes."""
PREFIX = "mcp__"


def count_tokens(text: str) -> int:
    """Tokens of ``text`` as the compacter counts them (tiktoken)."""
    from agentloop._adapters.tokens import TokenEstimator

    return TokenEstimator().count_text(text)


def shortened(text: str, cap: int, tokens: int, tool: str) -> str:
    """What the model gets of a ``text`` of ``tokens`` tokens, over ``cap``: its head, tail
    and telling lines, saying where the rest is (the same text for the same input)."""
    keep = max(1000, int(len(text) * cap / tokens * 0.9))
    return (
        f"[The result of {tool} was {tokens:,} tokens, over the {cap:,}-token limit for an MCP "
        f"result: shortened here to its head, its tail and the lines that look like errors. The "
        "whole result is stored in this session: search_history finds any part of it (search "
        "for words you expect there), or call the tool again for a narrower part.]\n"
        + shorten(text, keep)
    )


def convert_result(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """An MCP ``CallToolResult`` as tool_result content blocks, and whether it is an error."""
    blocks: list[dict[str, Any]] = []
    for item in result.get("content") or []:
        if isinstance(item, Mapping):
            blocks.append(_block(item))
    if not blocks and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"], ensure_ascii=False, indent=1)
        blocks.append({"type": "text", "text": text})
    return blocks, bool(result.get("isError"))


def _block(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "text":
        return {"type": "text", "text": redact(str(item.get("text", "")))}
    mime = str(item.get("mimeType") or "")
    if kind == "image" and mime in IMAGE_TYPES:
        return _image(mime, str(item.get("data", "")))
    if kind == "resource_link":
        name = item.get("title") or item.get("name") or ""
        text = f"[resource link] {name} <{item.get('uri', '')}>"
        text += f" ({mime})" if mime else ""
        if item.get("description"):
            text += f": {item['description']}"
        return {"type": "text", "text": text}
    if kind == "resource" and isinstance(item.get("resource"), Mapping):
        resource = item["resource"]
        uri, mime = resource.get("uri", ""), str(resource.get("mimeType") or "")
        if "text" in resource:
            return {"type": "text", "text": f"[resource {uri}]\n{redact(str(resource['text']))}"}
        blob = str(resource.get("blob", ""))
        if mime in IMAGE_TYPES:
            return _image(mime, blob)
        if mime == "application/pdf":
            source = {"type": "base64", "media_type": mime, "data": blob}
            return {"type": "document", "source": source}
        return {"type": "text", "text": f"[resource {uri}: {mime or 'binary'} content not shown]"}
    return {"type": "text", "text": f"[{kind} content ({mime or 'unknown type'}) not shown]"}


def _image(mime: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}


class McpTool:
    """One tool of one server, as an agentloop :class:`~agentloop.Tool`."""

    def __init__(
        self,
        hub: McpHub,
        server: str,
        definition: Mapping[str, Any],
        *,
        approve: Callable[[str], bool] | None,
        allowed: bool,
        max_tokens: int,
    ) -> None:
        self.hub, self.server = hub, server
        self.remote_name = str(definition["name"])
        self.name = tool_name(server, self.remote_name)
        self.description = str(definition.get("description") or "")
        self.input_schema: dict[str, Any] = dict(definition["inputSchema"])
        self._approve = approve
        self._allowed = allowed or approve is None
        self.max_tokens = max_tokens

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        if not self._allowed:
            shown = json.dumps(dict(tool_input), ensure_ascii=False)
            shown = shown if len(shown) <= 200 else shown[:199] + "…"
            assert self._approve is not None
            if not self._approve(f"{self.name} {shown}"):
                return ToolResult(f"the user declined the call of {self.name}", is_error=True)
            self._allowed = True  # once per tool, as a session goes
        try:
            result = self.hub.call(self.server, self.remote_name, dict(tool_input), CALL_TIMEOUT)
        except McpCallError as error:
            return ToolResult(str(error), is_error=True)
        blocks, is_error = convert_result(result)
        return self._fitted(blocks, is_error)

    def _fitted(self, blocks: list[dict[str, Any]], is_error: bool) -> ToolResult:
        texts = [str(b["text"]) for b in blocks if is_text(b)]
        text = "\n".join(texts)
        if len(texts) < len(blocks):  # images or documents: sent as blocks
            if len(text) > self.max_tokens:  # a cheap first look before counting
                tokens = count_tokens(text)
                if tokens > self.max_tokens:
                    short = shortened(text, self.max_tokens, tokens, self.name)
                    others = [b for b in blocks if not is_text(b)]
                    blocks = [{"type": "text", "text": short}, *others]
            return ToolResult(text, is_error, blocks=tuple(blocks))
        if not text:
            return ToolResult("(no output)", is_error)
        fitted = _over_cap(text, self.max_tokens, self.name)
        if fitted is None:
            return ToolResult(text, is_error)
        return ToolResult(fitted, is_error, whole=text)


def _over_cap(text: str, cap: int, tool: str) -> str | None:
    """The shortened form of ``text`` when it is over ``cap`` tokens (None: it is not)."""
    if len(text) <= cap:  # a token is at least a character
        return None
    tokens = count_tokens(text)
    return shortened(text, cap, tokens, tool) if tokens > cap else None


def shortened_results(messages: Sequence[Message], cap: int) -> dict[str, str]:
    """The MCP results of a stored conversation that were over ``cap`` when they came, as the
    model got them (by ``tool_use_id``): a resumed session sends them the same way."""
    names: dict[str, str] = {}
    found: dict[str, str] = {}
    for message in messages:
        for block in message.content:
            if is_tool_use(block) and str(block.get("name", "")).startswith(PREFIX):
                names[str(block.get("id"))] = str(block.get("name"))
            elif is_tool_result(block) and str(block.get("tool_use_id")) in names:
                content = block.get("content")
                if isinstance(content, str):
                    call = str(block.get("tool_use_id"))
                    short = _over_cap(content, cap, names[call])
                    if short is not None:
                        found[call] = short
    return found


class McpServers:
    """Running MCP servers and their tools; ``close()`` ends them."""

    def __init__(
        self,
        hub: McpHub,
        *,
        approve: Callable[[str], bool] | None = None,
        allow_all: bool = False,
        max_tokens: int | None = None,
        problems: Iterable[str] = (),
    ) -> None:
        self.hub = hub
        self.max_tokens = max_tokens_setting() if max_tokens is None else max_tokens
        self.problems = list(problems)
        """Lines for the user: servers not started, tools left out."""
        self.tools: list[Tool] = []
        """The tools of the servers that started, in the configuration's order."""
        taken: set[str] = set()
        for state in hub.servers.values():
            if state.state != "ready":
                self.problems.append(f"MCP server {state.line()}")
                continue
            allow = set(state.spec.allow)
            for definition in state.tools:
                problem = _unusable(definition)
                if problem is None:
                    name = tool_name(state.name, str(definition["name"]))
                    problem = f"the name {name} is taken" if name in taken else None
                if problem is not None:
                    label = definition.get("name", "?")
                    self.problems.append(
                        f"MCP server {state.name}: tool {label} left out: {problem}"
                    )
                    continue
                tool = McpTool(
                    hub,
                    state.name,
                    definition,
                    approve=approve,
                    allowed=allow_all or "*" in allow or str(definition["name"]) in allow,
                    max_tokens=self.max_tokens,
                )
                taken.add(tool.name)
                self.tools.append(tool)

    @property
    def states(self) -> list[ServerState]:
        return list(self.hub.servers.values())

    def close(self) -> None:
        """End every server (and what it started)."""
        self.hub.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.hub.close)

    def close_with(self, loop: Any) -> None:
        """End the servers when ``loop`` (an :class:`~agentloop.AgentLoop`) is closed, by
        ``close()`` or ``await aclose()``."""
        close, aclose = loop.close, loop.aclose

        def closed() -> None:
            try:
                close()
            finally:
                self.close()

        async def aclosed() -> None:
            try:
                await aclose()
            finally:
                await self.aclose()

        loop.close, loop.aclose = closed, aclosed

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpServers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def mcp_report(
    servers: McpServers | None,
    offered: Sequence[dict[str, Any]],
    count_tools: Callable[[Sequence[dict[str, Any]]], int],
) -> list[str]:
    """Lines for ``/mcp``: each server, its state, its tools (those ``offered`` in this
    session) and what their definitions cost in every request (none: no servers)."""
    if servers is None or not servers.states:
        return []
    sent_names = {d.get("name") for d in offered}
    lines: list[str] = []
    total = 0
    for state in servers.states:
        mine = [t for t in servers.tools if isinstance(t, McpTool) and t.server == state.name]
        sent = [d for d in offered if d.get("name") in {t.name for t in mine}]
        tokens = count_tools(sent) if sent else 0
        total += tokens
        lines.append(f"{state.line()} · {len(sent)} tools · {tokens:,} tokens per request")
        for tool in mine:
            note = "" if tool.name in sent_names else "  (not offered in this session)"
            lines.append(f"  {tool.name}{note}")
    lines.append(f"MCP tool definitions: {total:,} tokens in every request")
    return lines


def _unusable(definition: Mapping[str, Any]) -> str | None:
    """Why the API would refuse this tool (None: it would not)."""
    if not isinstance(definition.get("name"), str) or not definition["name"]:
        return "it has no name"
    schema = definition.get("inputSchema")
    if not isinstance(schema, Mapping):
        return "its input schema is not a JSON object"
    kind = schema.get("type")
    if kind != "object":
        return f"its input schema's type is {kind!r}, not 'object'"
    return None


def _servers(config: object) -> tuple[dict[str, ServerSpec], list[str]]:
    if isinstance(config, McpConfig):
        return dict(config.servers), list(config.problems)
    if isinstance(config, str | Path):
        path = Path(config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigurationError(f"{path}: cannot be read as JSON: {error}") from None
        return parse_servers(data, path.name)
    return parse_servers(config, "the configuration")


def open_mcp(
    config: Mapping[str, Any] | str | Path | McpConfig,
    *,
    approve: Callable[[str], bool] | None = None,
    max_result_tokens: int | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> McpServers:
    """Start the MCP servers of ``config`` (``{"mcpServers": {...}}`` as in ``.mcp.json``, or
    a path to such a file) in parallel, each within its time limit, and give their tools.

    A server that fails is a line in ``problems``, not an exception. ``approve`` is asked once
    per tool before its first call (None: never asked; a server's ``allow`` list is asked
    nothing). Close with ``close()``, a ``with`` block, or :meth:`McpServers.close_with`.
    """
    servers, problems = _servers(config)
    cap = max_tokens_setting() if max_result_tokens is None else max_result_tokens
    hub = McpHub(servers, on_notice=on_notice)
    hub.start()
    return McpServers(hub, approve=approve, max_tokens=cap, problems=problems)


async def aopen_mcp(
    config: Mapping[str, Any] | str | Path | McpConfig,
    *,
    approve: Callable[[str], bool] | None = None,
    max_result_tokens: int | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> McpServers:
    """:func:`open_mcp` for async code (the servers start without blocking the event loop)."""
    return await asyncio.to_thread(
        open_mcp,
        config,
        approve=approve,
        max_result_tokens=max_result_tokens,
        on_notice=on_notice,
    )
