"""Writing a reply's body on the wire, faults included: framing (close-delimited or chunked),
a connection that drops (after whole events, or inside one; FIN or RST), a stream that ends
without ``message_stop``, a stall bounded in time; and the events a message streams as
(:func:`stream_events`).

The server calls :func:`send_stream` / :func:`send_json` for every reply that has a ``fault`` or
a ``framing`` other than the default; everything else is written as it always was.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_api.compaction import stream_parts
from fake_api.replies import Fault, Framing

Event = tuple[str, dict[str, Any]]


def stream_events(message: dict[str, Any], chunk_chars: int) -> Iterator[Event]:
    """The server-sent events of ``message``, its text and JSON in ``chunk_chars`` pieces."""
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    if "stop_details" in start:
        start["stop_details"] = None  # a refusal's come with the stop reason
    start["usage"] = dict(usage, output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block, chunk_chars)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": None,
                "stop_details": message.get("stop_details"),
            },
            "usage": dict(usage),  # cumulative totals, as the API sends them
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any], chunk_chars: int) -> Iterator[Event]:
    def chunks(text: str) -> list[str]:
        size = max(1, chunk_chars)
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]

    kind = block.get("type")
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": c} for c in chunks(block["text"])]
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": c}
            for c in chunks(json.dumps(block.get("input", {})))
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": c} for c in chunks(block.get("thinking", ""))
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    elif kind == "compaction":
        start, deltas = stream_parts(block)
    else:
        start, deltas = block, []
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def past_thinking(fault: Fault | None, message: dict[str, Any], chunk_chars: int) -> Fault | None:
    """``fault`` with its ``after_events`` counted past the events of the thinking blocks a
    reply begins with: a fault scripted for a text reply hits the text, thinking or not."""
    if fault is None or fault.kind == "no_stop":
        return fault
    skipped = 0
    for index, block in enumerate(message["content"]):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            break
        skipped += sum(1 for _ in _block_events(index, block, chunk_chars))
    return replace(fault, after_events=fault.after_events + skipped) if skipped else fault


class _Body:
    """A response body in its framing: raw bytes until the connection closes, or chunks."""

    def __init__(self, handler: BaseHTTPRequestHandler, framing: Framing) -> None:
        self.handler = handler
        self.chunked = framing == "chunked"

    def write(self, data: bytes) -> None:
        out = self.handler.wfile
        if self.chunked:
            out.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        else:
            out.write(data)
        out.flush()

    def write_cut(self, data: bytes) -> None:
        """The first half of ``data``; in chunked framing, a chunk that announces all of it."""
        out = self.handler.wfile
        half = data[: max(1, len(data) // 2)]
        if self.chunked:
            out.write(f"{len(data):x}\r\n".encode() + half)
        else:
            out.write(half)
        out.flush()

    def end(self) -> None:
        if self.chunked:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _start(
    handler: BaseHTTPRequestHandler,
    content_type: str,
    headers: Mapping[str, str],
    framing: Framing,
    request_id: str,
    length: int | None = None,
) -> None:
    if framing == "chunked":
        handler.protocol_version = "HTTP/1.1"  # chunked needs it; this response only
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.send_header("request-id", request_id)
    if framing == "chunked":
        handler.send_header("Transfer-Encoding", "chunked")
    elif length is not None:
        handler.send_header("Content-Length", str(length))
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()


def _drop(handler: BaseHTTPRequestHandler, fault: Fault) -> None:
    """End the connection now: the peer sees a FIN (or an RST) mid-body."""
    handler.close_connection = True
    connection = handler.connection
    if not isinstance(connection, socket.socket):
        return
    if fault.reset:
        # SO_LINGER on, timeout 0: close() sends an RST and discards what is unsent.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
        return
    try:
        handler.wfile.flush()
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the peer is gone already


def _stall(fault: Fault, stopped: Callable[[], bool]) -> None:
    """Wait until ``release`` is set, the bound has passed, or the server stops."""
    deadline = time.monotonic() + fault.seconds
    while not stopped():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if fault.release is not None:
            if fault.release.wait(min(left, 0.05)):
                return
        else:
            time.sleep(min(left, 0.05))


def send_stream(
    handler: BaseHTTPRequestHandler,
    events: Iterable[Event],
    *,
    headers: Mapping[str, str],
    framing: Framing,
    fault: Fault | None,
    request_id: str,
    stopped: Callable[[], bool],
) -> None:
    """Write a streamed reply (``text/event-stream``) with its fault, if any."""
    _start(handler, "text/event-stream; charset=utf-8", headers, framing, request_id)
    body = _Body(handler, framing)
    for sent, (event, data) in enumerate(events):
        if fault is not None and event == "message_stop" and fault.kind == "no_stop":
            fault.reached.set()
            break
        if fault is not None and sent == fault.after_events and fault.kind != "no_stop":
            fault.reached.set()
            if fault.kind == "end":
                break
            if fault.kind == "stall":
                _stall(fault, stopped)
            if fault.kind == "inject":
                body.write(fault.raw)
                if fault.then == "end":
                    break
            if fault.kind == "drop" or fault.then == "drop":
                if fault.partial_event:
                    body.write_cut(_sse(event, data))
                _drop(handler, fault)
                return
        body.write(_sse(event, data))
    body.end()


def send_json(
    handler: BaseHTTPRequestHandler,
    payload: Any,
    *,
    headers: Mapping[str, str],
    fault: Fault | None,
    request_id: str,
    stopped: Callable[[], bool],
) -> None:
    """Write a non-streamed reply with its fault: ``drop`` sends half of the announced body;
    ``stall`` waits before the body; ``end`` and ``no_stop`` do not apply (the server refuses
    them for a non-streamed request)."""
    data = json.dumps(payload).encode()
    _start(handler, "application/json", headers, "close", request_id, length=len(data))
    if fault is not None:
        fault.reached.set()
        if fault.kind == "stall":
            _stall(fault, stopped)
        if fault.kind == "drop" or fault.then == "drop":
            handler.wfile.write(data[: len(data) // 2])
            _drop(handler, fault)
            return
    handler.wfile.write(data)
