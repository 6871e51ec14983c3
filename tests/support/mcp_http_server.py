"""An MCP server over streamable HTTP on 127.0.0.1 (the SDK's own ``MCPServer``), for the
client's HTTP transport: one tool, ``add``, and every request must carry
``Authorization: Bearer <the token given>`` (so the configured headers are seen to arrive).

Run as ``python tests/support/mcp_http_server.py TOKEN``: it prints its port on stdout, then
serves until killed.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

Scope = MutableMapping[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


def guarded(app: App, token: str) -> App:
    async def guard(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no token"})
                return
        await app(scope, receive, send)

    return guard


def main(token: str) -> None:
    server = MCPServer("adder")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return f"{a} + {b} = {a + b}"

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # before the port is told: a client's connection waits, never refused
    print(listener.getsockname()[1], flush=True)
    app = guarded(server.streamable_http_app(), token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main(sys.argv[1])
