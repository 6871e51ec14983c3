"""The MCP servers of one agent, run with the official SDK (``mcp``) on an event loop of their
own in a background thread, so the agent's tools stay plain synchronous calls whichever driver
(sync or async) runs them.

Every server is started at once, each within its time limit; one that fails to start, or dies
later, is one line (its name, why, the last line it wrote on stderr) and the others go on. A
server's process is ended with the hub (its stdin closed, then its process group killed), and
a watchdog (:mod:`.reaper`) kills the group if the agent's process dies first, however it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from agentloop._agent.mcp_config import (
    DEFAULT_START_TIMEOUT,
    HttpServer,
    ServerSpec,
)
from agentloop._agent.reaper import GroupWatch

__all__ = ["McpCallError", "McpHub", "ServerState"]

_PID_MARK = "agentloop-mcp-pid"
_PID_LINE = re.compile(rf"^{_PID_MARK} (\d+)$", re.MULTILINE)
# The server runs in its own session (the SDK starts it so): its pid is its group's id. The shell
# says it on stderr, then becomes the server; a missing program is its "not found" line there.
_WRAPPER = f'echo "{_PID_MARK} $$" >&2; exec "$@"'
_CLOSE_TIMEOUT = 8.0
"""How long closing waits for the servers to stop before their groups are killed."""
_WATCH_TICK = 0.5

State = Literal["starting", "ready", "failed", "closed"]


class McpCallError(Exception):
    """A call that did not come back with a result (the server is gone, or it timed out)."""


@dataclass
class ServerState:
    """One server: its state, why it failed, its tools as it listed them."""

    name: str
    spec: ServerSpec
    state: State = "starting"
    why: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None
    session: Any = field(default=None, repr=False)
    stderr: IO[str] | None = field(default=None, repr=False)
    watch: GroupWatch | None = field(default=None, repr=False)
    stop: asyncio.Event | None = field(default=None, repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def line(self) -> str:
        """One line for the user: name, state, why, stderr's last line."""
        text = f"{self.name}: {self.state}"
        if self.why:
            text += f": {self.why}"
        last = self.stderr_tail()
        if self.state == "failed" and last and last not in text:
            text += f" (stderr: {last})"
        return text

    def stderr_tail(self) -> str:
        """The last line the server wrote on stderr ('' when none)."""
        handle = self.stderr
        if handle is None or handle.closed:
            return ""
        try:
            handle.flush()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4096))
            lines = [x.strip() for x in handle.read().splitlines()]
        except (OSError, ValueError):
            return ""
        lines = [x for x in lines if x and not x.startswith(_PID_MARK)]
        return lines[-1][:200] if lines else ""


class McpHub:
    """Starts the servers, calls their tools, ends them (``close``); ``on_notice`` hears what
    happens later (a server died, a server's tool list changed)."""

    def __init__(
        self,
        servers: Mapping[str, ServerSpec],
        *,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        self.servers = {name: ServerState(name, spec) for name, spec in servers.items()}
        self.on_notice = on_notice
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the caller's side (any thread but the hub's) ------------------------------------

    def start(self) -> None:
        """Start every server and wait until each is ready or has failed (its time limit)."""
        if not self.servers or self._loop is not None:
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="mcp-servers", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start_all(), loop).result()
        except BaseException:
            self.close()
            raise

    def call(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> dict[str, Any]:
        """The server's result (the protocol's ``CallToolResult`` as a dict);
        :class:`McpCallError` when it cannot be had."""
        state = self.servers[server]
        loop = self._loop
        if state.state != "ready" or loop is None:
            raise McpCallError(f"MCP server {server!r} is not running ({state.line()})")
        future = asyncio.run_coroutine_threadsafe(self._call(state, tool, arguments), loop)
        try:
            result: dict[str, Any] = future.result(timeout)
            return result
        except TimeoutError:
            future.cancel()
            raise McpCallError(f"no answer from MCP server {server!r} in {timeout:g} s") from None
        except BaseException:  # Ctrl-C: the call is abandoned, the server goes on
            future.cancel()
            raise

    def close(self) -> None:
        """End every server (stdin closed, then its group killed) and the hub's thread."""
        if self._closed:
            return
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            with contextlib.suppress(BaseException):
                asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(_CLOSE_TIMEOUT + 2)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
        for state in self.servers.values():
            if state.task is None or not state.task.done():  # not stopped in time: killed
                _kill_group(state.pid)
            if state.watch is not None:
                state.watch.finish()
            if state.stderr is not None:
                with contextlib.suppress(OSError):
                    state.stderr.close()
            if state.state in ("ready", "starting"):
                state.state = "closed"
        if loop is not None and not loop.is_running():
            loop.close()

    # -- the hub's thread ----------------------------------------------------------------

    async def _start_all(self) -> None:
        await asyncio.gather(*(self._start_one(s) for s in self.servers.values()))

    async def _start_one(self, state: ServerState) -> None:
        ready = asyncio.Event()
        state.stop = asyncio.Event()
        state.task = asyncio.create_task(self._serve(state, ready))
        timeout = state.spec.timeout or DEFAULT_START_TIMEOUT
        waiter = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait(
            {waiter, state.task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if waiter not in done:
            waiter.cancel()
            if state.state == "starting":
                state.state, state.why = "failed", f"did not start within {timeout:g} s"
                state.task.cancel()  # it ends in the background; closing waits for it

    async def _serve(self, state: ServerState, ready: asyncio.Event) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                session = await self._connect(state, stack)
                await session.initialize()
                state.pid = _read_pid(state.stderr)
                if state.pid is not None and state.watch is not None:
                    state.watch.watch(state.pid)
                state.tools = await _list_tools(session)
                state.session = session
                state.state = "ready"
                ready.set()
                await self._watch(state)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # any failure of a server is one line
            if state.state in ("starting", "ready"):
                was = state.state
                why = _why(error)
                if was == "starting" and why.endswith("Connection closed"):
                    why = "it exited before it answered"
                state.state, state.why = "failed", why
                if was == "ready":
                    self._notice(f"MCP server {state.line()}")
        finally:
            state.session = None

    async def _connect(self, state: ServerState, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import ClientSession

        spec = state.spec
        if isinstance(spec, HttpServer):
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(spec.headers))
            )
            streams = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client)
            )
        else:
            from mcp import StdioServerParameters, stdio_client

            state.stderr = tempfile.TemporaryFile(  # noqa: SIM115 - closed by the hub
                "a+", encoding="utf-8", errors="replace"
            )
            # "a+": the server writes at the end whatever this side's reads moved the offset to
            command, args = spec.command, list(spec.args)
            if os.path.exists("/bin/sh") and sys.platform != "win32":
                state.watch = GroupWatch()
                command, args = "/bin/sh", ["-c", _WRAPPER, "sh", spec.command, *args]
            params = StdioServerParameters(
                command=command, args=args, env=dict(spec.env) or None, cwd=spec.cwd
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=state.stderr))
        read, write = streams[0], streams[1]
        return await stack.enter_async_context(
            ClientSession(read, write, message_handler=self._handler(state))
        )

    def _handler(self, state: ServerState) -> Any:
        async def handle(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                # Not awaited here: the session delivers the next answers only after this returns.
                task = asyncio.get_running_loop().create_task(self._relisted(state))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

        return handle

    async def _relisted(self, state: ServerState) -> None:
        """A server's tools changed: said, never swapped in (the session's tool set stays)."""
        if state.session is None:
            return
        with contextlib.suppress(Exception):
            tools = await _list_tools(state.session)
            if tools != state.tools:
                self._notice(
                    f"MCP server {state.name} now offers other tools: this session keeps the "
                    "ones it started with (a new session gets the new ones)"
                )

    async def _watch(self, state: ServerState) -> None:
        """Until the hub closes: a server whose process ended is failed (and said)."""
        assert state.stop is not None
        while not state.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.stop.wait(), _WATCH_TICK)
            if state.pid is not None and not _alive(state.pid) and not state.stop.is_set():
                state.state, state.why = "failed", "the server's process ended"
                self._notice(f"MCP server {state.line()}")
                return

    async def _call(self, state: ServerState, tool: str, arguments: dict[str, Any]) -> Any:
        session = state.session
        if session is None:
            raise McpCallError(f"MCP server {state.name!r} is not running ({state.line()})")
        try:
            result = await session.call_tool(tool, arguments)
        except Exception as error:
            await asyncio.sleep(0.05)  # a crash: let its end be seen before it is described
            if state.pid is not None and not _alive(state.pid):
                state.state, state.why = "failed", "the server's process ended"
                raise McpCallError(f"MCP server {state.line()}") from None
            raise McpCallError(f"MCP server {state.name!r}: {_why(error)}") from None
        dumped: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    async def _stop_all(self) -> None:
        tasks = []
        for state in self.servers.values():
            if state.stop is not None:
                state.stop.set()
            if state.task is not None and not state.task.done():
                tasks.append(state.task)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_CLOSE_TIMEOUT)
            for task in pending:
                task.cancel()

    def _notice(self, text: str) -> None:
        if self.on_notice is not None:
            with contextlib.suppress(Exception):
                self.on_notice(text)


async def _list_tools(session: Any) -> list[dict[str, Any]]:
    from mcp.types import PaginatedRequestParams

    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages for ever is not followed for ever
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        listed = await session.list_tools(params=params)
        tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        cursor = listed.next_cursor
        if cursor is None:
            break
    return tools


def _why(error: BaseException) -> str:
    """One line for a failure (an exception group: its first leaf)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split())
    errors = getattr(error, "errors", None)
    if type(error).__name__ == "ValidationError" and callable(errors):  # pydantic's
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"invalid answer from the server: {where}: {first.get('msg', '')}"
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or text}"
    name = type(error).__name__
    return f"{name}: {text}"[:300] if text else name


def _read_pid(stderr: IO[str] | None) -> int | None:
    if stderr is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        stderr.flush()
        stderr.seek(0)
        found = _PID_LINE.search(stderr.read(4096))
        return int(found.group(1)) if found else None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (ended, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _kill_group(pid: int | None) -> None:
    if pid is None or sys.platform == "win32":
        return
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
