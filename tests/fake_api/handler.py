"""The fake Messages API's HTTP side: the request handler (routes, keys, errors, streams) and
the threaded server it runs in; the state and the billing live in :mod:`fake_api.server`."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from fake_api.compaction import compaction_reply
from fake_api.faults import past_thinking, send_json, send_stream, stream_events
from fake_api.gate import Admitted, admit
from fake_api.ondemand import summarize
from fake_api.replies import (
    ErrorReply,
    Reply,
    ReplySpec,
    api_error,
    invalid_request,
    prompt_too_long,
)

if TYPE_CHECKING:
    from fake_api.server import FakeAnthropicServer

_KEY_HEADERS = ("x-api-key", "authorization")
_RETRYABLE = frozenset({408, 409, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received. API keys in ``headers`` are replaced by a marker."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropicServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away (a request cancelled in the background, a dropped stream)
        # is what the tests do on purpose: no traceback for it.
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)


class RequestHandler(BaseHTTPRequestHandler):
    # HTTP/1.0 and "Connection: close": no chunked encoding needed for SSE, no stale keep-alives.
    protocol_version = "HTTP/1.0"
    server: HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet, and nothing about a request (let alone a key) is ever logged

    @property
    def fake(self) -> FakeAnthropicServer:
        return self.server.fake

    # -- plumbing ---------------------------------------------------------------------------

    def _recorded_headers(self) -> dict[str, str]:
        headers = {key.lower(): value for key, value in self.headers.items()}
        for key in _KEY_HEADERS:
            if key in headers:
                headers[key] = "<test key>" if self._key_ok(headers[key]) else "<other key>"
        return headers

    def _key_ok(self, value: str) -> bool:
        expected = self.fake._api_key
        return value in (expected, f"Bearer {expected}")

    def _check_key(self, number: int) -> bool:
        values = [self.headers[key] for key in _KEY_HEADERS if self.headers.get(key)]
        if values and all(self._key_ok(value) for value in values):
            return True
        what = "carried an API key other than the test key" if values else "carried no API key"
        self.fake._violation(f"request {number} ({self.command} {self.path}) {what}")
        self._send_error(ErrorReply(401, "authentication_error", "invalid x-api-key"))
        return False

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.send_header("request-id", self.fake._new_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: ErrorReply, *, retryable: bool | None = None) -> None:
        headers = dict(error.headers)
        if retryable is False:
            headers.setdefault("x-should-retry", "false")
        elif error.status in _RETRYABLE and self.fake.retry_after_ms is not None:
            headers.setdefault("retry-after-ms", str(self.fake.retry_after_ms))
        detail: dict[str, Any] = {"type": error.error_type, "message": error.message}
        if error.error_code is not None:
            detail["details"] = {"error_code": error.error_code}
        payload = {"type": "error", "error": detail, "request_id": self.fake._new_id("req")}
        self._send_json(error.status, payload, headers)

    def _read_body(self) -> tuple[bool, Any] | None:
        """``(True, body)``; ``(False, None)``: not JSON; None: the body ended before its
        ``Content-Length`` (the client went away while it sent, e.g. a process killed)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            return None
        try:
            return True, json.loads(raw) if raw else None
        except ValueError:
            return False, None

    # -- routes -----------------------------------------------------------------------------

    def do_POST(self) -> None:
        read = self._read_body()
        if read is None:
            # No request reached the API (it never saw a whole one): nothing to check against
            # its rules, record or answer; counted, so that a test can tell it happened.
            self.fake._abandoned()
            return
        ok, body = read
        path = self.path.split("?", 1)[0]
        number = self.fake._record(RecordedRequest("POST", path, self._recorded_headers(), body))
        if not self._check_key(number):
            return
        if not ok:
            self.fake._violation(f"request {number}: body is not valid JSON")
            self._send_error(invalid_request("There was an error parsing the body"))
            return
        if not self.headers.get("anthropic-version"):
            self.fake._violation(f"request {number}: no anthropic-version header")
        if path == "/v1/messages":
            self._messages(number, body)
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(number, body)
        else:
            self.fake._violation(f"request {number}: POST to unknown path {path}")
            self._send_error(ErrorReply(404, "not_found_error", "Not Found"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        number = self.fake._record(RecordedRequest("GET", path, self._recorded_headers(), None))
        if not self._check_key(number):
            return
        if path == "/v1/models" or path.startswith("/v1/models/"):
            self._models(path.removeprefix("/v1/models").strip("/"))
        else:
            self.fake._violation(f"request {number}: GET of unknown path {path}")
            self._send_error(ErrorReply(404, "not_found_error", "Not Found"))

    def _admit(self, number: int, body: Any, *, count_tokens: bool = False) -> Admitted | None:
        """The request as the model reads it, or None when it was refused (and answered)."""
        outcome = admit(
            self.fake,
            body,
            self.headers.get("anthropic-beta"),
            count_tokens=count_tokens,
            version=self.headers.get("anthropic-version"),
        )
        if isinstance(outcome, Admitted):
            return outcome
        self.fake._refused(number, outcome.problems)
        self._send_error(outcome.error)
        return None

    def _refuse_too_long(self, body: dict[str, Any]) -> bool:
        window = self.fake.context_window
        if window is None:
            return False
        counted = self.fake.count_input_tokens(body)
        if counted <= window:
            return False
        kind = "compaction request" if "compaction" in body else "request"
        with self.fake._lock:
            self.fake.too_long.append(f"a {kind} of {counted} tokens > {window}")
        self._send_error(prompt_too_long(counted, window))
        return True

    def _messages(self, number: int, body: Any) -> None:
        admitted = self._admit(number, body)
        if admitted is None or self._refuse_too_long(admitted.effective):
            return
        effective = admitted.effective
        if "compaction" in effective:
            hook = self.fake.compaction_handler
            reply: ReplySpec | None = hook(body) if hook is not None else None
            if reply is None:
                reply = summarize(self.fake, effective, admitted.betas)
        elif body.get("max_tokens") == 0:  # a cache keep-alive: no reply is scripted for it
            reply = Reply(content=(), thinking=False)
        else:
            reply = compaction_reply(self.fake, effective) or self.fake._next_reply(body)
        if reply is None:
            self.fake._violation(f"request {number}: no scripted reply left for this request")
            self._send_error(api_error("the fake API has no scripted reply"), retryable=False)
            return
        if isinstance(reply, ErrorReply):
            self._send_error(reply)
            return
        message = self.fake._message_json(body, reply, admitted)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.fault is not None or reply.framing != "close":
            self._send_faulty(number, body, message, reply)
        elif body.get("stream"):
            self._send_stream(message, reply.headers)
        else:
            self._send_json(200, message, reply.headers)

    def _send_stream(self, message: dict[str, Any], headers: Mapping[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", self.fake._new_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        for event, data in stream_events(message, self.fake.stream_chunk_chars):
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def _send_faulty(
        self, number: int, body: dict[str, Any], message: dict[str, Any], reply: Reply
    ) -> None:
        # The client may give up (its timeout) while the reply stalls: nothing left to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._write_faulty(number, body, message, reply)

    def _write_faulty(
        self, number: int, body: dict[str, Any], message: dict[str, Any], reply: Reply
    ) -> None:
        request_id = self.fake._new_id("req")
        stopped = self.fake._stopping.is_set
        if body.get("stream"):
            events = stream_events(message, self.fake.stream_chunk_chars)
            send_stream(
                self,
                events,
                headers=reply.headers,
                framing=reply.framing,
                fault=past_thinking(reply.fault, message, self.fake.stream_chunk_chars),
                request_id=request_id,
                stopped=stopped,
            )
            return
        fault = reply.fault
        if fault is not None and fault.kind in ("end", "no_stop"):
            self.fake._violation(f"request {number}: a {fault.kind} fault needs a streamed request")
            fault = None
        send_json(
            self,
            message,
            headers=reply.headers,
            fault=fault,
            request_id=request_id,
            stopped=stopped,
        )

    def _count_tokens(self, number: int, body: Any) -> None:
        admitted = self._admit(number, body, count_tokens=True)
        if admitted is None:
            return
        if self.fake.count_tokens_error is not None:
            self._send_error(self.fake.count_tokens_error)
            return
        counted = self.fake.count_input_tokens(admitted.effective)
        self._send_json(200, {"input_tokens": counted})

    def _models(self, model_id: str) -> None:
        if self.fake.models_unavailable:
            self._send_error(api_error("the Models API is unavailable"))
            return
        if not model_id:
            data = [self.fake.model_json(spec) for spec in self.fake.models.values()]
            self._send_json(
                200,
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
            )
            return
        spec = self.fake.models.get(model_id)
        if spec is None:
            self._send_error(ErrorReply(404, "not_found_error", f"model: {model_id}"))
            return
        self._send_json(200, self.fake.model_json(spec))
