"""A small MCP server on stdio, written by hand (JSON-RPC lines, no SDK) so that it can
misbehave: ``--slow SECONDS`` before it answers ``initialize``, ``--stderr TEXT`` written at
start, ``--exit-at-start`` (dies before answering). Its tools: ``echo``, ``crash`` (the process
exits in the middle of the call), ``big`` (a 200,000-character result with a needle in the
middle), ``picture`` (a PNG and a resource link), ``fail`` (an error result), ``sleep`` (five
minutes; ``--pid-file PATH``: the server's pid there, and ``PATH.call`` once the call began),
``grow`` (its tool list changes, and it says so), and with ``--bad-schema`` a tool whose input
schema is not an object.

Run as ``python tests/support/mcp_test_server.py [options]``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any

BIG_CHARS = 200_000
NEEDLE = "zanzibar-quartz-needle"
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
    )
).decode()

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {"name": "crash", "description": "Dies mid-call.", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "A huge result.", "inputSchema": {"type": "object"}},
    {"name": "picture", "description": "An image.", "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "An error result.", "inputSchema": {"type": "object"}},
    {"name": "sleep", "description": "Sleeps five minutes.", "inputSchema": {"type": "object"}},
    {"name": "grow", "description": "Gains a tool.", "inputSchema": {"type": "object"}},
]
BAD_SCHEMA = {"name": "bad_schema", "description": "Refused.", "inputSchema": {"type": "string"}}


def big_text() -> str:
    line = "row {n:06d}: alpha beta gamma delta epsilon zeta eta theta iota kappa\n"
    rows: list[str] = []
    n = 0
    while sum(map(len, rows)) < BIG_CHARS:
        rows.append(line.format(n=n) if n != 1400 else f"row {n:06d}: the {NEEDLE} is here\n")
        n += 1
    return "".join(rows)[:BIG_CHARS]


def answer(request_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return {"content": [{"type": "text", "text": f"echo: {arguments.get('text', '')}"}]}
    if name == "crash":
        sys.stderr.write("fatal: the test server crashed on purpose\n")
        sys.stderr.flush()
        sys.exit(3)
    if name == "big":
        return {"content": [{"type": "text", "text": big_text()}]}
    if name == "picture":
        return {
            "content": [
                {"type": "text", "text": "a one-pixel picture"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///pixel.png", "name": "pixel.png"},
            ]
        }
    if name == "sleep":
        if PID_FILE:
            with open(PID_FILE + ".call", "w") as marker:
                marker.write("in the call\n")
        time.sleep(300)
        return {"content": [{"type": "text", "text": "slept"}]}
    if name == "grow":
        TOOLS.append({"name": "grown", "description": "New.", "inputSchema": {"type": "object"}})
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        sys.stdout.write(json.dumps(note) + "\n")
        return {"content": [{"type": "text", "text": "grew"}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "it went wrong"}], "isError": True}
    return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}


PID_FILE = ""


def main(argv: list[str]) -> None:
    global PID_FILE
    if "--pid-file" in argv:
        PID_FILE = argv[argv.index("--pid-file") + 1]
        with open(PID_FILE, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    slow = float(argv[argv.index("--slow") + 1]) if "--slow" in argv else 0.0
    if "--stderr" in argv:
        sys.stderr.write(argv[argv.index("--stderr") + 1] + "\n")
        sys.stderr.flush()
    if "--exit-at-start" in argv:
        sys.stderr.write("error: cannot open the database\n")
        sys.exit(1)
    for raw in sys.stdin:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            time.sleep(slow)
            answer(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "misbehaving", "version": "1.0"},
                },
            )
        elif method == "tools/list":
            answer(
                request_id, {"tools": [*TOOLS, *([BAD_SCHEMA] if "--bad-schema" in argv else [])]}
            )
        elif method == "tools/call":
            params = message["params"]
            answer(request_id, call(params["name"], params.get("arguments") or {}))
        else:
            sys.stdout.write(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {"code": -32601, "message": f"no method {method}"},
                    }
                )
                + "\n"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
